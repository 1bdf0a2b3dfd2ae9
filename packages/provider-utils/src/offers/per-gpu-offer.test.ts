import { describe, expect, it } from "vitest";
import { perGpuOffer } from "./per-gpu-offer.js";

const gpu = { name: "A100", memoryGb: 80, formFactor: "SXM" };
const product = {
  provider: "example",
  key: "a100-sxm",
  name: "A100 SXM 80GB",
  vcpus: 12,
  memoryGb: 96,
  region: "any",
  spotPrice: 0.60005,
  onDemandPrice: 1.34,
  specific: { productId: "a100-sxm" },
};

describe("perGpuOffer", () => {
  it("multiplies the figures and prices of one GPU by the count, in the id and the type too", () => {
    const [offer] = perGpuOffer({ ...product, accelerator: { ...gpu, count: 8 } });
    expect(offer).toMatchObject({
      id: "example:a100-sxm:x8",
      instanceType: "8x A100 SXM 80GB",
      accelerator: { name: "A100", count: 8, memoryGb: 80, formFactor: "SXM" },
      vcpus: 96,
      memoryGb: 768,
      spotPrice: 4.8004,
      onDemandPrice: 10.72,
      specific: { productId: "a100-sxm" },
    });
  });

  it("names one GPU's machine by the product alone, keeps a market without a price unpriced, and offers nothing without any price", () => {
    const [one] = perGpuOffer({ ...product, accelerator: { ...gpu, count: 1 }, spotPrice: null });
    expect(one).toMatchObject({ id: "example:a100-sxm:x1", instanceType: "A100 SXM 80GB", spotPrice: null });
    const unpriced = { ...product, spotPrice: null, onDemandPrice: null };
    expect(perGpuOffer({ ...unpriced, accelerator: { ...gpu, count: 2 } })).toEqual([]);
  });
});
