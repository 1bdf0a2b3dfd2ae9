import { describe, expect, it } from "vitest";
import { machineOffer } from "./machine-offer.js";

const base = {
  id: "example:a100:x2",
  provider: "example",
  instanceType: "2x A100",
  vcpus: 16,
  memoryGb: 128,
  region: "any",
  spotPrice: null,
  onDemandPrice: 3.2,
};

describe("machineOffer", () => {
  it("freezes the offer, its accelerator and its specific; x86_64 and a price date by default", () => {
    const offer = machineOffer({
      ...base,
      accelerator: { name: "A100", count: 2, memoryGb: 80, formFactor: "SXM" },
      specific: { productId: "p-1" },
    });
    expect(offer).toMatchObject({
      ...base,
      accelerator: { name: "A100", count: 2, memoryGb: 80, formFactor: "SXM" },
      architecture: "x86_64",
      specific: { productId: "p-1" },
    });
    expect(Number.isFinite(Date.parse(offer.pricesAsOf))).toBe(true);
    expect([offer, offer.accelerator, offer.specific].every(Object.isFrozen)).toBe(true);
  });

  it("keeps what is given: no form factor when none is named, a CPU machine's null, its own date and architecture", () => {
    const offer = machineOffer({
      ...base,
      accelerator: { name: "A100", count: 1, memoryGb: 40 },
      architecture: "arm64",
      pricesAsOf: "2026-01-01T00:00:00.000Z",
      specific: {},
    });
    expect(offer.accelerator).toEqual({ name: "A100", count: 1, memoryGb: 40 });
    expect(offer).toMatchObject({ architecture: "arm64", pricesAsOf: "2026-01-01T00:00:00.000Z" });
    expect(machineOffer({ ...base, accelerator: null, specific: {} }).accelerator).toBeNull();
  });
});
