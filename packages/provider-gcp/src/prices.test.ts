import { describe, expect, it } from "vitest";
import { priceBookFromSkus, vmPrice } from "./prices.js";

// SKUs in the Catalog API's shape (https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list).
const sku = (
  description: string,
  usageType: string,
  units: string,
  nanos: number,
  regions = ["us-central1"],
) => ({
  description,
  category: { usageType },
  serviceRegions: regions,
  pricingInfo: [
    {
      pricingExpression: {
        usageUnit: "h",
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
    const vm = { series: "N1", vcpus: 4, memoryGib: 15, gpu: { skuName: "Nvidia Tesla T4", count: 2 } };
    expect(vmPrice(book, "us-central1", "on-demand", vm)).toBe(0.89);
    expect(vmPrice(book, "us-central1", "spot", vm)).toBe(0.322);
    expect(vmPrice(book, "us-central1", "on-demand", { ...vm, gpu: null })).toBe(0.19);
  });

  it("tells GPUs whose names share a prefix apart", () => {
    const a100 = (skuName: string) => ({ series: "N1", vcpus: 0, memoryGib: 0, gpu: { skuName, count: 1 } });
    expect(vmPrice(book, "us-central1", "on-demand", a100("Nvidia Tesla A100"))).toBe(2.9339);
    expect(vmPrice(book, "us-central1", "on-demand", a100("Nvidia Tesla A100 80GB"))).toBe(3.93);
  });

  it("has no price where a part has none: another region, a series or GPU it does not know", () => {
    const vm = { series: "N1", vcpus: 1, memoryGib: 1, gpu: null };
    expect(vmPrice(book, "europe-west3", "on-demand", vm)).toBeNull();
    expect(vmPrice(book, "us-central1", "on-demand", { ...vm, series: "N2" })).toBeNull();
    expect(
      vmPrice(book, "us-central1", "spot", { ...vm, gpu: { skuName: "Nvidia Tesla A100", count: 1 } }),
    ).toBeNull();
    expect(book.asOf).toBe("2026-11-24T00:00:00.000Z");
  });
});
