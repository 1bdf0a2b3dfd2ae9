import { options, spec } from "@skyward/core";
import { type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { launchableMarketsByZone } from "./zonal-markets.js";

const clusterOf = (
  fields: Parameters<typeof spec>[0],
  prices: Pick<Offer, "spotPrice" | "onDemandPrice">,
) => ({
  spec: resolvePoolSpec(spec(fields), options({})),
  offer: prices as Offer,
});

describe("launchableMarketsByZone", () => {
  it("judges each zone at its own spot price, market by market in the allocation's order", () => {
    const cluster = clusterOf(
      { allocation: "spot-if-available", maxHourlyCost: 2 },
      { spotPrice: 1, onDemandPrice: 1.5 },
    );
    const zonal = launchableMarketsByZone(cluster, ["a", "b", "c"], (zone) =>
      zone === "b" ? { spotPrice: 3 } : zone === "c" ? { spotPrice: 1.2 } : {},
    );
    expect(zonal).toEqual([
      { market: "spot", zone: "a", price: 1 },
      { market: "spot", zone: "b", price: 3, refused: "spot in b: $3/h is over maxHourlyCost $2/h" },
      { market: "spot", zone: "c", price: 1.2 },
      { market: "on-demand", zone: "a", price: 1.5 },
      { market: "on-demand", zone: "b", price: 1.5 },
      { market: "on-demand", zone: "c", price: 1.5 },
    ]);
  });

  it("lists a market of unknown price, refused, and one the cap or the pool rules out", () => {
    const unknown = launchableMarketsByZone(
      clusterOf({ allocation: "spot-if-available" }, { spotPrice: 0.4, onDemandPrice: null }),
      ["a"],
      () => ({}),
    );
    expect(unknown).toEqual([
      { market: "spot", zone: "a", price: 0.4 },
      { market: "on-demand", zone: "a", price: null, refused: "on-demand: no known price, never launched" },
    ]);
    const spotOnly = launchableMarketsByZone(
      clusterOf({ allocation: "spot" }, { spotPrice: 0.4, onDemandPrice: 1 }),
      ["a"],
      () => ({ spotPrice: 0.5 }),
      false,
    );
    expect(spotOnly).toEqual([
      { market: "spot", zone: "a", price: 0.5, refused: "spot in a: not allowed for this pool" },
    ]);
  });
});
