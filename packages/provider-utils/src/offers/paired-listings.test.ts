import { describe, expect, it } from "vitest";
import { pairedListings } from "./paired-listings.js";

describe("pairedListings", () => {
  it("pairs each item's listings by key: on-demand order first, then the spot-only items", () => {
    const onDemand = [
      { id: 3, price: 0.5 },
      { id: 1, price: 0.4 },
    ];
    const spot = [
      { id: 2, price: 0.1 },
      { id: 1, price: 0.2 },
      { id: 4, price: 0.3 },
    ];
    expect(pairedListings({ onDemand, spot }, (listing) => listing.id)).toEqual([
      { onDemand: { id: 3, price: 0.5 }, spot: undefined },
      { onDemand: { id: 1, price: 0.4 }, spot: { id: 1, price: 0.2 } },
      { onDemand: undefined, spot: { id: 2, price: 0.1 } },
      { onDemand: undefined, spot: { id: 4, price: 0.3 } },
    ]);
  });

  it("lists nothing for two empty markets, and one market's items alone when the other is empty", () => {
    const listed = [{ id: "a" }, { id: "b" }];
    expect(pairedListings({ onDemand: [], spot: [] }, (listing: { id: string }) => listing.id)).toEqual([]);
    expect(pairedListings({ onDemand: [], spot: listed }, (listing) => listing.id)).toEqual([
      { onDemand: undefined, spot: { id: "a" } },
      { onDemand: undefined, spot: { id: "b" } },
    ]);
    expect(pairedListings({ onDemand: listed, spot: [] }, (listing) => listing.id)).toEqual([
      { onDemand: { id: "a" }, spot: undefined },
      { onDemand: { id: "b" }, spot: undefined },
    ]);
  });
});
