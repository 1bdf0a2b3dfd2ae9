import { NoCapacityError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { machineError } from "./errors.js";
import { launchAcrossMarkets, type MarketLaunch, type MarketLaunchAnswer } from "./market-loop.js";
import type { ZonalMarket } from "./zonal-markets.js";

const signal = AbortSignal.timeout(10_000);
const refusal = (kind: "capacity" | "quota" | "bad-request", message: string) =>
  machineError("fake", kind, message);

/** Every market in every zone at $1, none refused. */
function places(markets: readonly ("spot" | "on-demand")[], zones: readonly string[]): ZonalMarket[] {
  return markets.flatMap((market) => zones.map((zone) => ({ market, zone, price: 1 })));
}

/** Runs the loop over a launch that answers from `answer`, and records each request. */
async function run(
  options: Omit<
    Parameters<typeof launchAcrossMarkets<string>>[0],
    "provider" | "offer" | "signal" | "launch"
  >,
  answer: (request: MarketLaunch, call: number) => MarketLaunchAnswer<string>,
) {
  const requests: string[] = [];
  const outcome = await launchAcrossMarkets<string>({
    ...options,
    provider: "fake",
    offer: "gpu-1x",
    signal,
    launch: async (request) => {
      requests.push(`${request.market} ${request.zone} ${request.count}`);
      return answer(request, requests.length);
    },
  }).catch((error: unknown) => error);
  return { outcome, requests };
}

describe("launchAcrossMarkets (the base's market loop)", () => {
  it("takes a batch's partial answer, moves on after a refusal, asks a short answer again, and keeps one zone", async () => {
    const { outcome, requests } = await run(
      { count: 5, places: places(["spot", "on-demand"], ["a", "b"]) },
      (request, call) => {
        if (call === 1) return { items: [], refused: refusal("capacity", "zone a is full") };
        // Zone b: 2 of the 4 asked, no reason (asked again there), then 1 and a capacity refusal.
        if (call === 2) return { items: ["s1", "s2"] };
        if (call === 3) return { items: ["s3"], refused: refusal("capacity", "no more spot") };
        return { items: Array.from({ length: request.count }, (_, index) => `d${index + 1}`) };
      },
    );
    expect(requests).toEqual(["spot a 5", "spot b 5", "spot b 3", "on-demand b 2"]);
    expect(outcome).toEqual([
      { market: "spot", zone: "b", items: ["s1", "s2"] },
      { market: "spot", zone: "b", items: ["s3"] },
      { market: "on-demand", zone: "b", items: ["d1", "d2"] },
    ]);
  });

  it("skips a market's other zones on a quota, and throws quotaFailure's error when every launch met one", async () => {
    const quota = () => {
      throw refusal("quota", "vCPU limit 0");
    };
    const named = await run(
      {
        count: 1,
        places: places(["spot", "on-demand"], ["a", "b", "c"]),
        quotaFailure: (refusals) =>
          new Error(`raise: ${refusals.map((entry) => entry.request.market).join(", ")}`),
      },
      quota,
    );
    expect(named.requests).toEqual(["spot a 1", "on-demand a 1"]);
    expect((named.outcome as Error).message).toBe("raise: spot, on-demand");

    // A capacity refusal beside the quota: another offer may still have room.
    const mixed = await run(
      { count: 1, places: places(["spot", "on-demand"], ["a"]), quotaFailure: () => new Error("raise") },
      (request) => {
        if (request.market === "spot") throw refusal("capacity", "full");
        return quota();
      },
    );
    expect(NoCapacityError.isInstance(mixed.outcome)).toBe(true);
    expect((mixed.outcome as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "spot in a: full (try another region, accelerator or allocation, or again later)",
      expect.stringMatching(/^on-demand in a: vCPU limit 0/),
    ]);
  });

  it("never launches a place the price rule refused, lists why first, and bounds the launches", async () => {
    const { outcome, requests } = await run(
      {
        count: 2,
        places: [
          { market: "spot", zone: "a", price: 3, refused: "spot in a: $3/h is over maxHourlyCost $2/h" },
          ...places(["spot"], ["b", "c", "d"]),
          { market: "on-demand", zone: "a", price: null },
        ],
        maxLaunches: 2,
        launchesName: "create calls",
      },
      () => ({ items: [] }),
    );
    expect(requests).toEqual(["spot b 2", "spot c 2"]);
    expect((outcome as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "spot in a: $3/h is over maxHourlyCost $2/h",
      "on-demand: no known price, never launched",
      "spot in b: the launch made no machine",
      "spot in c: the launch made no machine",
      "gave up after 2 create calls (at most 2 per provision)",
    ]);
  });

  it("hands back what was made after an error that is no refusal, or throws it when asked to", async () => {
    const failing = (_request: MarketLaunch, call: number): MarketLaunchAnswer<string> => {
      if (call === 1) return { items: ["m1"] };
      throw refusal("bad-request", "image gone");
    };
    const handed = await run({ count: 2, places: places(["on-demand"], [""]) }, failing);
    expect(handed.outcome).toEqual([{ market: "on-demand", zone: "", items: ["m1"] }]);
    const thrown = await run({ count: 2, places: places(["on-demand"], [""]), onFailure: "throw" }, failing);
    expect((thrown.outcome as Error).message).toBe("image gone");
    const none = await run({ count: 1, places: places(["on-demand"], [""]) }, () => {
      throw refusal("bad-request", "image gone");
    });
    expect((none.outcome as Error).message).toBe("image gone");
  });
});
