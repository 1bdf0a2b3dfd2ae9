import type { OfferQuery } from "@skyward/core/contract";
import { fitsAllocationAndBudget } from "@skyward/provider-utils";
import { describe, expect, it } from "vitest";
import type { InstanceType } from "./instance-types.js";
import {
  buildOffer,
  latestSpotPrices,
  instanceTypeMatches as matchesHardware,
  type SpotPrice,
} from "./offers.js";
import { BUILT_IN_ON_DEMAND_PRICES, ON_DEMAND_PRICES_AS_OF } from "./on-demand-prices.js";

const cpu = (
  instanceType: string,
  vcpus: number,
  memoryGb: number,
  architecture: "x86_64" | "arm64",
): InstanceType => ({
  instanceType,
  vcpus,
  memoryGb,
  architectures: [architecture],
  accelerator: null,
  spot: true,
  onDemand: true,
});
const gpu = (instanceType: string, name: string, count: number, memoryGb: number): InstanceType => ({
  ...cpu(instanceType, 8, 32, "x86_64"),
  accelerator: { name, awsName: name, manufacturer: "NVIDIA", count, memoryGb, kind: "gpu" },
});

const query = (fields: Partial<OfferQuery>): OfferQuery => ({
  accelerator: null,
  allocation: "spot-if-available",
  ...fields,
});

describe("instanceTypeMatches", () => {
  it("matches the accelerator by catalog name, exact count and at least the memory asked", () => {
    const a10g = gpu("g5.xlarge", "A10G", 1, 24);
    expect(matchesHardware(a10g, query({ accelerator: { name: "A10G", count: 1, memoryGb: 24 } }))).toBe(
      true,
    );
    expect(matchesHardware(a10g, query({ accelerator: { name: "a10g", count: 1 } }))).toBe(true);
    expect(matchesHardware(a10g, query({ accelerator: { name: "A10G", count: 4, memoryGb: 24 } }))).toBe(
      false,
    );
    expect(matchesHardware(a10g, query({ accelerator: { name: "L4", count: 1 } }))).toBe(false);
    const a100 = gpu("p4d.24xlarge", "A100", 8, 40);
    expect(matchesHardware(a100, query({ accelerator: { name: "A100", count: 8, memoryGb: 80 } }))).toBe(
      false,
    );
    expect(matchesHardware(a100, query({ accelerator: { name: "A100", count: 8, memoryGb: 40 } }))).toBe(
      true,
    );
  });

  it("matches a fractional count to a GPU partition of that size", () => {
    const partition = gpu("g6f.large", "L4", 0.125, 24);
    expect(
      matchesHardware(partition, query({ accelerator: { name: "L4", count: 0.125, memoryGb: 24 } })),
    ).toBe(true);
    expect(matchesHardware(partition, query({ accelerator: { name: "L4", count: 1, memoryGb: 24 } }))).toBe(
      false,
    );
  });

  it("filters vCPUs, memory and architecture; CPU-only queries leave out accelerator types", () => {
    const small = cpu("t3.medium", 2, 4, "x86_64");
    const graviton = cpu("m7g.xlarge", 4, 16, "arm64");
    expect(matchesHardware(small, query({ vcpus: 2, memoryGb: 4 }))).toBe(true);
    expect(matchesHardware(small, query({ vcpus: 4 }))).toBe(false);
    expect(matchesHardware(small, query({ memoryGb: 8 }))).toBe(false);
    expect(matchesHardware(graviton, query({ architecture: "arm64" }))).toBe(true);
    expect(matchesHardware(graviton, query({ architecture: "x86_64" }))).toBe(false);
    expect(matchesHardware(gpu("g5.xlarge", "A10G", 1, 24), query({}))).toBe(false);
  });

  it("leaves out types that cannot be bought under the allocation", () => {
    const onDemandOnly = { ...cpu("x1.small", 2, 4, "x86_64"), spot: false };
    expect(matchesHardware(onDemandOnly, query({ allocation: "spot" }))).toBe(false);
    expect(matchesHardware(onDemandOnly, query({ allocation: "cheapest" }))).toBe(true);
    expect(matchesHardware({ ...onDemandOnly, onDemand: false }, query({ allocation: "on-demand" }))).toBe(
      false,
    );
  });
});

describe("offers: prices, allocation and budget", () => {
  const at = new Date("2026-01-02T03:04:05Z");
  const spot = (zone: string, price: number, timestamp = at): SpotPrice => ({
    instanceType: "g5.xlarge",
    availabilityZone: zone,
    price,
    timestamp,
  });

  it("keeps the latest spot price per type and zone", () => {
    const latest = latestSpotPrices([
      spot("us-east-1a", 0.5, new Date("2026-01-01T00:00:00Z")),
      spot("us-east-1a", 0.4, new Date("2026-01-02T00:00:00Z")),
      spot("us-east-1b", 0.6),
    ]);
    expect(
      [...(latest.get("g5.xlarge")?.values() ?? [])].map((entry) => [entry.availabilityZone, entry.price]),
    ).toEqual([
      ["us-east-1a", 0.4],
      ["us-east-1b", 0.6],
    ]);
  });

  it("builds an offer with the cheapest zone's spot price and the table's on-demand price", () => {
    const offer = buildOffer(gpu("g5.xlarge", "A10G", 1, 24), {
      region: "us-east-1",
      spotByZone: new Map([
        ["us-east-1a", spot("us-east-1a", 0.45)],
        ["us-east-1c", spot("us-east-1c", 0.39)],
      ]),
      onDemandOverrides: {},
      now: at,
    });
    expect(offer).toMatchObject({
      id: "aws:us-east-1:g5.xlarge",
      provider: "aws",
      instanceType: "g5.xlarge",
      accelerator: { name: "A10G", count: 1, memoryGb: 24 },
      vcpus: 8,
      memoryGb: 32,
      architecture: "x86_64",
      region: "us-east-1",
      spotPrice: 0.39,
      onDemandPrice: 1.006,
      billingUnit: "second",
      pricesAsOf: ON_DEMAND_PRICES_AS_OF,
      specific: {
        availabilityZone: "us-east-1c",
        spotPriceByZone: { "us-east-1a": 0.45, "us-east-1c": 0.39 },
        onDemandPriceSource: "built-in",
      },
    });
  });

  it("takes on-demand prices from the setting first; a type in neither has none", () => {
    const base = { region: "us-west-2", spotByZone: new Map(), now: at };
    const overridden = buildOffer(gpu("g5.xlarge", "A10G", 1, 24), {
      ...base,
      onDemandOverrides: { "g5.xlarge": 1.2 },
    });
    expect(overridden).toMatchObject({ onDemandPrice: 1.2, spotPrice: null, pricesAsOf: "2026-01-02" });
    expect(overridden.specific).toMatchObject({ onDemandPriceSource: "setting", availabilityZone: null });
    const unknown = buildOffer(cpu("x9z.large", 2, 8, "x86_64"), { ...base, onDemandOverrides: {} });
    expect(unknown.onDemandPrice).toBeNull();
  });

  it("filters by allocation and price cap the way the pool prices offers", () => {
    const offer = buildOffer(gpu("g5.xlarge", "A10G", 1, 24), {
      region: "us-east-1",
      spotByZone: new Map([["us-east-1a", spot("us-east-1a", 0.4)]]),
      onDemandOverrides: {},
      now: at,
    });
    const noSpot = { ...offer, spotPrice: null };
    expect(fitsAllocationAndBudget(offer, query({ allocation: "spot", maxHourlyCost: 0.5 }))).toBe(true);
    expect(fitsAllocationAndBudget(offer, query({ allocation: "on-demand", maxHourlyCost: 0.5 }))).toBe(
      false,
    );
    expect(fitsAllocationAndBudget(offer, query({ allocation: "cheapest", maxHourlyCost: 0.5 }))).toBe(true);
    expect(fitsAllocationAndBudget(noSpot, query({ allocation: "spot" }))).toBe(false);
    expect(fitsAllocationAndBudget(noSpot, query({ allocation: "spot-if-available" }))).toBe(true);
    expect(
      fitsAllocationAndBudget(noSpot, query({ allocation: "spot-if-available", maxHourlyCost: 1 })),
    ).toBe(false);
  });

  it("has P4 and P5 at their prices after AWS's June 2025 cut in the built-in table", () => {
    // us-east-1 Linux on demand after "Announcing up to 45% price reduction for Amazon EC2 NVIDIA
    // GPU-accelerated instances" (https://aws.amazon.com/about-aws/whats-new/2025/06/pricing-usage-model-ec2-instances-nvidia-gpus/).
    expect(BUILT_IN_ON_DEMAND_PRICES).toMatchObject({
      "p4d.24xlarge": 21.96,
      "p4de.24xlarge": 27.447,
      "p5.48xlarge": 55.04,
      "p5en.48xlarge": 63.296,
    });
    expect(ON_DEMAND_PRICES_AS_OF >= "2025-06-01").toBe(true);
  });
});
