import { EC2ServiceException } from "@aws-sdk/client-ec2";
import { NoCapacityError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { type LaunchRequest, launchAcrossMarkets } from "./allocation.js";

/** An EC2 error as the SDK throws it. */
function ec2Error(code: string, message: string, status = 500): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: status >= 500 ? "server" : "client",
    $metadata: { httpStatusCode: status },
    message,
  });
}

describe("launchAcrossMarkets (RunInstances stubbed)", () => {
  const subnetIds = ["subnet-a", "subnet-b"];

  it("falls back to on-demand when spot has no capacity in any subnet", async () => {
    const requests: LaunchRequest[] = [];
    const launched = await launchAcrossMarkets({
      count: 2,
      markets: ["spot", "on-demand"],
      subnetIds,
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
    expect(launched).toEqual([{ market: "on-demand", items: ["i-1", "i-2"] }]);
  });

  it("asks again after a short answer, then the next subnet, then the next market", async () => {
    const requests: LaunchRequest[] = [];
    let spotInA = 0;
    const launched = await launchAcrossMarkets({
      count: 4,
      markets: ["spot", "on-demand"],
      subnetIds,
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
    expect(requests.map((request) => [request.market, request.subnetId, request.count])).toEqual([
      ["spot", "subnet-a", 4],
      ["spot", "subnet-a", 3],
      ["spot", "subnet-b", 3],
      ["on-demand", "subnet-a", 3],
      ["on-demand", "subnet-a", 1],
    ]);
    expect(launched).toEqual([
      { market: "spot", items: ["i-spot"] },
      { market: "on-demand", items: ["i-od0", "i-od1"] },
      { market: "on-demand", items: ["i-od2"] },
    ]);
  });

  it("moves on when a request returns nothing", async () => {
    const requests: string[] = [];
    const launched = await launchAcrossMarkets({
      count: 1,
      markets: ["on-demand"],
      subnetIds,
      instanceType: "g5.xlarge",
      launch: async (request) => {
        requests.push(request.subnetId);
        return request.subnetId === "subnet-a" ? [] : ["i-1"];
      },
    });
    expect(requests).toEqual(["subnet-a", "subnet-b"]);
    expect(launched).toEqual([{ market: "on-demand", items: ["i-1"] }]);
  });

  it("throws NoCapacityError listing every attempt when nothing launches", async () => {
    const failure = launchAcrossMarkets({
      count: 1,
      markets: ["spot"],
      subnetIds,
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
    const failure = launchAcrossMarkets({
      count: 1,
      markets: ["spot", "on-demand"],
      subnetIds,
      instanceType: "g5.xlarge",
      launch: async () => {
        calls += 1;
        throw ec2Error("InvalidAMIID.NotFound", "The image id does not exist", 400);
      },
    });
    await expect(failure).rejects.toMatchObject({ name: "InvalidAMIID.NotFound" });
    expect(calls).toBe(1);
  });
});
