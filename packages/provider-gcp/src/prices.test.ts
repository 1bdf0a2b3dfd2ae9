import { describe, expect, it } from "vitest";
import { priceBookFromSkus, vmPrice } from "./prices.js";

// SKUs in the Catalog API's shape (https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list).
const sku = (
  description: string,
  usageType: string,
  units: string,
  nanos: number,
  regions = ["us-central1"],
  usageUnit = "h",
) => ({
  description,
  category: { usageType },
  serviceRegions: regions,
  pricingInfo: [
    {
      pricingExpression: {
        usageUnit,
        tieredRates: [{ startUsageAmount: 0, unitPrice: { currencyCode: "USD", units, nanos } }],
      },
    },
  ],
});

describe("prices from the Cloud Billing Catalog", () => {
  const book = priceBookFromSkus(
    [
      sku("N1 Predefined Instance Core running in Americas", "OnDemand", "0", 31_611_000),
      sku("N1 Predefined Instance Ram running in Americas", "OnDemand", "0", 4_237_000),
      sku("Spot Preemptible N1 Predefined Instance Core running in Americas", "Preemptible", "0", 6_980_000),
      sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", "Preemptible", "0", 936_000),
      sku("Nvidia Tesla T4 GPU running in Americas", "OnDemand", "0", 350_000_000),
      sku(
        "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
        "Preemptible",
        "0",
        140_000_000,
      ),
      sku("Nvidia Tesla A100 80GB GPU running in Americas", "OnDemand", "3", 930_000_000),
      sku("Nvidia Tesla A100 GPU running in Americas", "OnDemand", "2", 933_908_000),
      // Not a price of the series or the GPU: custom cores, commitments, another region.
      sku("N1 Custom Instance Core running in Americas", "OnDemand", "9", 0),
      sku("Commitment v1: N1 Cpu in Americas for 1 Year", "Commit1Yr", "0", 19_915_000),
      sku("N1 Predefined Instance Core running in Frankfurt", "OnDemand", "0", 38_000_000, ["europe-west3"]),
    ],
    "2026-11-24T00:00:00.000Z",
  );

  it("adds up a VM's vCPUs, memory and GPUs in its region, per market", () => {
    const vm = { series: "N1", vcpus: 4, memoryGib: 15, gpu: { skuNames: ["Nvidia Tesla T4"], count: 2 } };
    expect(vmPrice(book, "us-central1", "on-demand", vm)).toBe(0.89);
    expect(vmPrice(book, "us-central1", "spot", vm)).toBe(0.322);
    expect(vmPrice(book, "us-central1", "on-demand", { ...vm, gpu: null })).toBe(0.19);
  });

  it("tells GPUs whose names share a prefix apart", () => {
    const a100 = (skuName: string) => ({
      series: "N1",
      vcpus: 0,
      memoryGib: 0,
      gpu: { skuNames: [skuName], count: 1 },
    });
    expect(vmPrice(book, "us-central1", "on-demand", a100("Nvidia Tesla A100"))).toBe(2.9339);
    expect(vmPrice(book, "us-central1", "on-demand", a100("Nvidia Tesla A100 80GB"))).toBe(3.93);
  });

  it("has no price where a part has none: another region, a series or GPU it does not know", () => {
    const vm = { series: "N1", vcpus: 1, memoryGib: 1, gpu: null };
    expect(vmPrice(book, "europe-west3", "on-demand", vm)).toBeNull();
    expect(vmPrice(book, "us-central1", "on-demand", { ...vm, series: "N2" })).toBeNull();
    expect(
      vmPrice(book, "us-central1", "spot", { ...vm, gpu: { skuNames: ["Nvidia Tesla A100"], count: 1 } }),
    ).toBeNull();
    expect(book.asOf).toBe("2026-11-24T00:00:00.000Z");
  });

  it("prices A3 Mega by its A3Plus parts and either H100 Mega SKU name, and the local SSD bundled with it", async () => {
    // Descriptions as the Catalog writes them (SkyPilot's catalogue fetcher reads the same: "A3Plus"
    // cores and RAM, "Nvidia H100 80GB Plus GPU" / "Nvidia H100 80GB Mega GPU"); local SSD per GiB-month
    // ("SSD backed Local Storage", https://cloud.google.com/compute/disks-image-pricing#localssdpricing).
    const { GCP_ACCELERATOR_TYPES } = await import("./accelerators.js");
    const { bundledLocalSsdGb, pricingSeriesOf } = await import("./machine-series.js");
    const mega = priceBookFromSkus(
      [
        sku("A3Plus Instance Core running in Americas", "OnDemand", "0", 30_000_000),
        sku("A3Plus Instance Ram running in Americas", "OnDemand", "0", 3_000_000),
        sku("Nvidia H100 80GB Plus GPU running in Americas", "OnDemand", "10", 344_275_712),
        sku("SSD backed Local Storage in Americas", "OnDemand", "0", 80_000_000, ["us-central1"], "GiBy.mo"),
      ],
      "2026-11-24T00:00:00.000Z",
    );
    const machineType = "a3-megagpu-8g";
    const price = vmPrice(mega, "us-central1", "on-demand", {
      series: pricingSeriesOf(machineType),
      vcpus: 208,
      memoryGib: 1872,
      gpu: { skuNames: GCP_ACCELERATOR_TYPES["nvidia-h100-mega-80gb"]?.skuNames ?? [], count: 8 },
      localSsdGb: bundledLocalSsdGb(machineType),
    });
    // 208 × 0.03 + 1872 × 0.003 + 8 × 10.344275712 + 6000 × 0.08 / 730
    expect(price).toBeCloseTo(208 * 0.03 + 1872 * 0.003 + 8 * 10.344275712 + (6000 * 0.08) / 730, 3);
    // A bundled local SSD without a price leaves the VM without one: never an underestimate.
    expect(
      vmPrice(book, "us-central1", "on-demand", {
        series: "N1",
        vcpus: 1,
        memoryGib: 1,
        gpu: null,
        localSsdGb: 375,
      }),
    ).toBeNull();
  });
});
