import { EC2ServiceException } from "@aws-sdk/client-ec2";
import { NoCapacityError, options, ProvisionError, spec } from "@skyward/core";
import { type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { launchableMarketsByZone, type Market, type ZonalMarket } from "@skyward/provider-utils";
import { describe, expect, it } from "vitest";
import { type LaunchRequest, MAX_LAUNCH_ATTEMPTS, runInstancesAcrossMarkets } from "./allocation.js";
import { quotaFor } from "./aws-api.js";

/** An EC2 error as the SDK throws it. */
function ec2Error(code: string, message: string, status = 500): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: status >= 500 ? "server" : "client",
    $metadata: { httpStatusCode: status },
    message,
  });
}

/** Every market in every subnet, none refused (what the base's rule gives an offer with no cap). */
function everywhere(markets: readonly Market[], subnets: readonly string[]): ZonalMarket[] {
  return markets.flatMap((market) => subnets.map((zone) => ({ market, zone, price: 1 })));
}

describe("runInstancesAcrossMarkets (RunInstances stubbed)", () => {
  const subnetIds = ["subnet-a", "subnet-b"];

  it("falls back to on-demand when spot has no capacity in any subnet", async () => {
    const requests: LaunchRequest[] = [];
    const launched = await runInstancesAcrossMarkets({
      count: 2,
      launches: everywhere(["spot", "on-demand"], subnetIds),
      instanceType: "g5.xlarge",
      launch: async (request) => {
        requests.push(request);
        if (request.market === "spot")
          throw ec2Error("InsufficientInstanceCapacity", "There is no Spot capacity available");
        return ["i-1", "i-2"].slice(0, request.count);
      },
    });
    expect(requests).toEqual([
      { market: "spot", subnetId: "subnet-a", count: 2 },
      { market: "spot", subnetId: "subnet-b", count: 2 },
      { market: "on-demand", subnetId: "subnet-a", count: 2 },
    ]);
    expect(launched).toEqual([{ market: "on-demand", subnetId: "subnet-a", items: ["i-1", "i-2"] }]);
  });

  it("asks again after a short answer, in the same zone only once a node runs there", async () => {
    const requests: LaunchRequest[] = [];
    let spotInA = 0;
    const launched = await runInstancesAcrossMarkets({
      count: 4,
      launches: everywhere(["spot", "on-demand"], subnetIds),
      instanceType: "g5.xlarge",
      launch: async (request) => {
        requests.push(request);
        if (request.market === "spot" && request.subnetId === "subnet-a") {
          spotInA += 1;
          if (spotInA === 1) return ["i-spot"];
          throw ec2Error("InsufficientInstanceCapacity", "no more");
        }
        if (request.market === "spot") throw ec2Error("SpotMaxPriceTooLow", "price too low", 400);
        return request.count === 3 ? ["i-od0", "i-od1"] : ["i-od2"];
      },
    });
    // subnet-b is never asked: the first node runs in subnet-a, and the pool's nodes share a zone.
    expect(requests.map((request) => [request.market, request.subnetId, request.count])).toEqual([
      ["spot", "subnet-a", 4],
      ["spot", "subnet-a", 3],
      ["on-demand", "subnet-a", 3],
      ["on-demand", "subnet-a", 1],
    ]);
    expect(launched).toEqual([
      { market: "spot", subnetId: "subnet-a", items: ["i-spot"] },
      { market: "on-demand", subnetId: "subnet-a", items: ["i-od0", "i-od1"] },
      { market: "on-demand", subnetId: "subnet-a", items: ["i-od2"] },
    ]);
  });

  it("moves on when a request returns nothing", async () => {
    const requests: string[] = [];
    const launched = await runInstancesAcrossMarkets({
      count: 1,
      launches: everywhere(["on-demand"], subnetIds),
      instanceType: "g5.xlarge",
      launch: async (request) => {
        requests.push(request.subnetId);
        return request.subnetId === "subnet-a" ? [] : ["i-1"];
      },
    });
    expect(requests).toEqual(["subnet-a", "subnet-b"]);
    expect(launched).toEqual([{ market: "on-demand", subnetId: "subnet-b", items: ["i-1"] }]);
  });

  it("throws NoCapacityError listing every attempt when nothing launches", async () => {
    const failure = runInstancesAcrossMarkets({
      count: 1,
      launches: everywhere(["spot"], subnetIds),
      instanceType: "p5.48xlarge",
      launch: async () => {
        throw ec2Error("InsufficientInstanceCapacity", "no capacity");
      },
    });
    await expect(failure).rejects.toSatisfy((error: unknown) => NoCapacityError.isInstance(error));
    const error = (await failure.catch((caught: unknown) => caught)) as NoCapacityError;
    expect(error.attempts).toEqual([
      {
        provider: "aws",
        offer: "p5.48xlarge",
        reason: "spot in subnet-a: InsufficientInstanceCapacity: no capacity",
      },
      {
        provider: "aws",
        offer: "p5.48xlarge",
        reason: "spot in subnet-b: InsufficientInstanceCapacity: no capacity",
      },
    ]);
  });

  it("stops at once on an error that is not about capacity", async () => {
    let calls = 0;
    const failure = runInstancesAcrossMarkets({
      count: 1,
      launches: everywhere(["spot", "on-demand"], subnetIds),
      instanceType: "g5.xlarge",
      launch: async () => {
        calls += 1;
        throw ec2Error("InvalidAMIID.NotFound", "The image id does not exist", 400);
      },
    });
    await expect(failure).rejects.toMatchObject({ name: "InvalidAMIID.NotFound" });
    expect(calls).toBe(1);
  });

  it("asks only the (market, subnet) pairs the base's price rule allows, and lists why the others were not", async () => {
    // spot-if-available chose the offer by its spot price ($4); on demand it is $10.49: over the cap;
    // subnet-b's zone sells spot at $6: over the cap too.
    const cluster = {
      spec: resolvePoolSpec(spec({ allocation: "spot-if-available", maxHourlyCost: 5 }), options({})),
      offer: { spotPrice: 4, onDemandPrice: 10.49 } as Offer,
    };
    const requests: LaunchRequest[] = [];
    const failure = await runInstancesAcrossMarkets({
      count: 1,
      launches: launchableMarketsByZone(cluster, subnetIds, (subnet) =>
        subnet === "subnet-b" ? { spotPrice: 6 } : {},
      ),
      instanceType: "g6e.12xlarge",
      region: "us-east-1",
      launch: async (request) => {
        requests.push(request);
        throw ec2Error("InsufficientInstanceCapacity", "There is no Spot capacity available");
      },
    }).catch((error: unknown) => error);
    expect(requests).toEqual([{ market: "spot", subnetId: "subnet-a", count: 1 }]);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect((failure as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      // The base's loop lists the places never asked first, then what the asked ones said.
      "spot in subnet-b: $6/h is over maxHourlyCost $5/h",
      "on-demand: $10.49/h is over maxHourlyCost $5/h",
      "spot in subnet-a: InsufficientInstanceCapacity: There is no Spot capacity available",
    ]);

    const unknown = await runInstancesAcrossMarkets({
      count: 1,
      launches: launchableMarketsByZone(
        {
          spec: resolvePoolSpec(spec({ allocation: "on-demand" }), options({})),
          offer: { spotPrice: null, onDemandPrice: null } as Offer,
        },
        subnetIds,
        () => ({}),
      ),
      instanceType: "x9.huge",
      region: "eu-west-3",
      launch: async () => ["i-never"],
    }).catch((error: unknown) => error);
    expect((unknown as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "on-demand: no known price, never launched",
    ]);
  });

  it("reports a regional quota as a quota, naming it, without trying the market's other zones", async () => {
    const requests: LaunchRequest[] = [];
    const failure = await runInstancesAcrossMarkets({
      count: 2,
      launches: everywhere(["spot", "on-demand"], ["subnet-a", "subnet-b", "subnet-c"]),
      instanceType: "g5.12xlarge",
      region: "us-west-2",
      launch: async (request) => {
        requests.push(request);
        throw request.market === "spot"
          ? ec2Error("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded", 400)
          : ec2Error(
              "VcpuLimitExceeded",
              "You have requested more vCPU capacity than your current vCPU limit of 0 allows",
              400,
            );
      },
    }).catch((error: unknown) => error);
    expect(requests.map((request) => request.market)).toEqual(["spot", "on-demand"]);
    expect(ProvisionError.isInstance(failure) && !NoCapacityError.isInstance(failure)).toBe(true);
    expect((failure as ProvisionError).isRetryable).toBe(false);
    expect((failure as Error).message).toMatch(
      /^AWS quota reached in us-west-2 for spot g5\.12xlarge \(MaxSpotInstanceCountExceeded: .*\): request a quota increase for "All G and VT Spot Instance Requests" \(L-3819A6DF\) in us-west-2/,
    );
    expect(quotaFor("p4d.24xlarge", "on-demand")).toEqual({
      name: "Running On-Demand P instances",
      code: "L-417A185B",
    });
    expect(quotaFor("m7i.large", "on-demand").name).toBe(
      "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    );
  });

  it("counts UnfulfillableCapacity as no capacity, and bounds the calls with an error saying what was tried", async () => {
    let calls = 0;
    const failure = await runInstancesAcrossMarkets({
      count: 2,
      launches: everywhere(
        ["spot", "on-demand"],
        ["subnet-a", "subnet-b", "subnet-c", "subnet-d", "subnet-e", "subnet-f"],
      ),
      instanceType: "g5.xlarge",
      launch: async () => {
        calls += 1;
        throw ec2Error(
          "UnfulfillableCapacity",
          "Unable to fulfill capacity due to your request configuration",
        );
      },
    }).catch((error: unknown) => error);
    expect(calls).toBe(MAX_LAUNCH_ATTEMPTS);
    const reasons = (failure as NoCapacityError).attempts.map((attempt) => attempt.reason);
    expect(reasons).toHaveLength(MAX_LAUNCH_ATTEMPTS + 1);
    expect(reasons[0]).toBe(
      "spot in subnet-a: UnfulfillableCapacity: Unable to fulfill capacity due to your request configuration",
    );
    expect(reasons.at(-1)).toBe(
      `gave up after ${MAX_LAUNCH_ATTEMPTS} RunInstances calls (at most ${MAX_LAUNCH_ATTEMPTS} per provision)`,
    );
  });
});
