import { ConfigurationError } from "@skyward/core";
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { filterOffers, fitsAllocationAndBudget, matchesHardware, requireOwnOffer } from "./offer-filter.js";
import { marketsFor, roundPrice } from "./prices.js";

function offer(fields: Partial<Offer> = {}): Offer {
  return {
    id: "example:a100",
    provider: "example",
    instanceType: "a100.x2",
    accelerator: { name: "A100", count: 2, memoryGb: 80 },
    vcpus: 16,
    memoryGb: 128,
    architecture: "x86_64",
    region: "eu",
    spotPrice: 2,
    onDemandPrice: 3,
    pricesAsOf: "2026-01-01",
    specific: {},
    ...fields,
  };
}

const a100x2: OfferQuery = { accelerator: { name: "A100", count: 2 }, allocation: "cheapest" };

describe("matchesHardware", () => {
  it("matches the accelerator by name (case aside) and exact count, and memory at least as asked", () => {
    expect(matchesHardware(offer(), a100x2)).toBe(true);
    expect(
      matchesHardware(offer(), { ...a100x2, accelerator: { name: "a100", count: 2, memoryGb: 80 } }),
    ).toBe(true);
    expect(matchesHardware(offer(), { ...a100x2, accelerator: { name: "A100", count: 1 } })).toBe(false);
    expect(matchesHardware(offer(), { ...a100x2, accelerator: { name: "H100", count: 2 } })).toBe(false);
    expect(
      matchesHardware(offer(), { ...a100x2, accelerator: { name: "A100", count: 2, memoryGb: 81 } }),
    ).toBe(false);
  });

  it("leaves out hardware of another known form factor, keeping hardware that does not say its own", () => {
    const sxm: OfferQuery = { ...a100x2, accelerator: { name: "A100", count: 2, formFactor: "SXM" } };
    const labelled = (formFactor: string) =>
      offer({ accelerator: { name: "A100", count: 2, memoryGb: 80, formFactor } });
    expect(matchesHardware(labelled("SXM"), sxm)).toBe(true);
    expect(matchesHardware(labelled("SXM4"), sxm)).toBe(true);
    expect(matchesHardware(labelled("PCIe"), sxm)).toBe(false);
    expect(matchesHardware(offer(), sxm)).toBe(true);
    expect(matchesHardware(labelled("PCIe"), a100x2)).toBe(true);
  });

  it("checks vCPUs, memory, a fixed disk and the architecture; a CPU query wants CPU-only hardware", () => {
    expect(matchesHardware(offer(), { ...a100x2, vcpus: 17 })).toBe(false);
    expect(matchesHardware(offer(), { ...a100x2, memoryGb: 129 })).toBe(false);
    expect(matchesHardware(offer(), { ...a100x2, diskGb: 500 })).toBe(true);
    expect(matchesHardware(offer({ diskGb: 100 }), { ...a100x2, diskGb: 500 })).toBe(false);
    expect(matchesHardware(offer(), { ...a100x2, architecture: "arm64" })).toBe(false);
    expect(
      matchesHardware(
        { ...offer(), architecture: ["x86_64", "arm64"] },
        { ...a100x2, architecture: "arm64" },
      ),
    ).toBe(true);
    const cpu: OfferQuery = { accelerator: null, allocation: "on-demand" };
    expect(matchesHardware(offer(), cpu)).toBe(false);
    expect(matchesHardware(offer({ accelerator: null }), cpu)).toBe(true);
  });
});

describe("fitsAllocationAndBudget", () => {
  it("wants a price under the allocation within the cap", () => {
    expect(fitsAllocationAndBudget(offer({ spotPrice: null }), { allocation: "spot" })).toBe(false);
    expect(fitsAllocationAndBudget(offer({ onDemandPrice: null }), { allocation: "on-demand" })).toBe(false);
    expect(fitsAllocationAndBudget(offer(), { allocation: "cheapest", maxHourlyCost: 2 })).toBe(true);
    expect(fitsAllocationAndBudget(offer(), { allocation: "on-demand", maxHourlyCost: 2 })).toBe(false);
  });
});

describe("filterOffers", () => {
  it("keeps the offers matching the hardware and the budget", () => {
    const offers = [
      offer(),
      offer({ id: "x1", accelerator: { name: "A100", count: 1, memoryGb: 80 } }),
      offer({ id: "dear", spotPrice: 9 }),
    ];
    expect(filterOffers(offers, { ...a100x2, maxHourlyCost: 2.5 }).map((kept) => kept.id)).toEqual([
      "example:a100",
    ]);
  });
});

describe("requireOwnOffer", () => {
  it("refuses another provider's offer", () => {
    expect(() => requireOwnOffer(offer(), "example", "Example")).not.toThrow();
    expect(() => requireOwnOffer(offer({ provider: "aws" }), "example", "Example")).toThrow(
      ConfigurationError,
    );
    expect(() => requireOwnOffer(offer({ provider: "aws" }), "example", "Example")).toThrow(
      'expected a Example offer, received one from "aws"',
    );
  });
});

describe("marketsFor", () => {
  it("orders the markets of each allocation strategy, leaving out a market without a price", () => {
    const both = { spotPrice: 0.3, onDemandPrice: 1 };
    expect(marketsFor("spot", both)).toEqual(["spot"]);
    expect(marketsFor("on-demand", both)).toEqual(["on-demand"]);
    expect(marketsFor("spot-if-available", both)).toEqual(["spot", "on-demand"]);
    expect(marketsFor("spot-if-available", { spotPrice: null, onDemandPrice: 1 })).toEqual(["on-demand"]);
    expect(marketsFor("spot-if-available", { spotPrice: 0.3, onDemandPrice: null })).toEqual(["spot"]);
    expect(marketsFor("cheapest", both)).toEqual(["spot", "on-demand"]);
    expect(marketsFor("cheapest", { spotPrice: 1, onDemandPrice: 1 })).toEqual(["spot", "on-demand"]);
    expect(marketsFor("cheapest", { spotPrice: 1.5, onDemandPrice: 1 })).toEqual(["on-demand", "spot"]);
    expect(marketsFor("cheapest", { spotPrice: null, onDemandPrice: 1 })).toEqual(["on-demand"]);
    expect(marketsFor("cheapest", { spotPrice: 0.3, onDemandPrice: null })).toEqual(["spot"]);
  });
});

describe("roundPrice", () => {
  it("rounds to 4 decimals", () => {
    expect([roundPrice(0.1 + 0.2), roundPrice(1.23456), roundPrice(2)]).toEqual([0.3, 1.2346, 2]);
  });
});
