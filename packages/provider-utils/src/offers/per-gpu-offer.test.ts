import { describe, expect, it } from "vitest";
import { perGpuOffer } from "./per-gpu-offer.js";

const facts = {
  provider: "example",
  key: "secure:H100",
  typeName: "H100 SXM",
  accelerator: { name: "H100", memoryGb: 80, formFactor: "SXM" },
  specific: { typeId: "h100-sxm" },
};

describe("perGpuOffer", () => {
  it("multiplies the type's prices, vCPUs and memory by the count, and names the count", () => {
    const perGpu = { spotPrice: 1.111_11, onDemandPrice: 2.5, vcpus: 12, memoryGb: 100 };
    const [offer] = perGpuOffer({ ...facts, count: 3, region: "EU-1", perGpu });
    expect(offer).toMatchObject({
      id: "example:secure:H100:x3",
      provider: "example",
      instanceType: "3x H100 SXM",
      accelerator: { name: "H100", count: 3, memoryGb: 80, formFactor: "SXM" },
      vcpus: 36,
      memoryGb: 300,
      region: "EU-1",
      spotPrice: 3.3333,
      onDemandPrice: 7.5,
      specific: { typeId: "h100-sxm" },
    });
  });

  it("one GPU is named without a count; the region defaults to any, vCPUs and memory to 0", () => {
    const [offer] = perGpuOffer({ ...facts, count: 1, perGpu: { spotPrice: null, onDemandPrice: 2.5 } });
    expect(offer).toMatchObject({
      id: "example:secure:H100:x1",
      instanceType: "H100 SXM",
      region: "any",
      vcpus: 0,
      memoryGb: 0,
      spotPrice: null,
      onDemandPrice: 2.5,
    });
  });

  it("offers nothing when neither market has a price", () => {
    expect(perGpuOffer({ ...facts, count: 2, perGpu: { spotPrice: null, onDemandPrice: null } })).toEqual([]);
  });
});
