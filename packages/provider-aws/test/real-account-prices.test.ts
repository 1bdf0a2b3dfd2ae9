/**
 * What real AWS accounts do that plain moto does not, reproduced in front of moto (`aws-double.ts`,
 * which every moto suite gets, and per-test fault proxies), and the provider's answer to each:
 * the budget checked on the market actually launched (spot refused, on-demand over the cap); on-demand
 * prices per region from the Price List API, cached on disk with their date; the built-in table only for
 * us-east-1 when the API cannot be read, never for another region.
 */
import { readFile, writeFile } from "node:fs/promises";
import { NoCapacityError } from "@skyward/core";
import type { OfferQuery } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { AWS } from "../src/aws-provider.js";
import { ON_DEMAND_PRICES_AS_OF } from "../src/on-demand-prices.js";
import { priceCacheFile } from "../src/pricing.js";
import { startAwsDouble } from "./aws-double.js";
import { motoInventory, motoUbuntuAmi } from "./moto-server.js";
import {
  call,
  cpuQuery,
  offerOf,
  poolSpec,
  refuseSpotLaunches,
  runs,
  skipReason,
  useRealAccountSuite,
} from "./real-account-support.js";

describe.skipIf(skipReason !== undefined)("AWS real account: budget and prices", () => {
  const suite = useRealAccountSuite();

  describe("budget", () => {
    it("spot-if-available never falls back to on-demand above maxHourlyCost", async () => {
      // moto quotes spot at $0.00001; g4dn.xlarge on demand is $0.526: the offer fits a $0.01 cap
      // only by its spot price. A proxy refuses spot for lack of capacity.
      const proxy = await refuseSpotLaunches(suite.moto.endpoint);
      try {
        const aws = AWS({ endpoint: proxy.endpoint, amiId: await motoUbuntuAmi(suite.ec2) });
        const query: OfferQuery = {
          accelerator: { name: "T4", count: 1 },
          allocation: "spot-if-available",
          maxHourlyCost: 0.01,
        };
        const offer = await offerOf(aws, query, "g4dn.xlarge");
        expect(offer.onDemandPrice).toBe(0.526);
        const capped = poolSpec({ allocation: "spot-if-available", maxHourlyCost: 0.01 });
        const cluster = await aws.prepare({ spec: capped, offer, ...call() });
        const failure = await aws
          .provision({ cluster, count: 2, ...call() })
          .catch((error: unknown) => error);
        expect(NoCapacityError.isInstance(failure)).toBe(true);
        const reasons = (failure as NoCapacityError).attempts.map((attempt) => attempt.reason);
        expect(reasons).toContain("on-demand: $0.526/h is over maxHourlyCost $0.01/h");
        expect(runs(proxy.calls).every((entry) => entry.params.has("InstanceMarketOptions.MarketType"))).toBe(
          true,
        );
        expect((await motoInventory(suite.moto.endpoint)).liveInstances).toEqual([]);
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
      }
    });
  });

  describe("prices", () => {
    it("reads on-demand prices per region from the Price List API, caches them on disk with their date", async () => {
      const pricing = await startAwsDouble(suite.moto.motoEndpoint);
      try {
        pricing.prices.set("us-west-2", { "t3.medium": 0.0418 });
        const settings = { endpoint: suite.moto.endpoint, pricingEndpoint: pricing.endpoint };
        const h100 = await offerOf(
          AWS(settings),
          { accelerator: { name: "H100", count: 1 }, allocation: "on-demand" },
          "p5.4xlarge",
        );
        // A type the built-in table lacks is priced, and so bought on demand.
        expect(h100).toMatchObject({
          onDemandPrice: 6.88,
          pricesAsOf: new Date().toISOString().slice(0, 10),
          specific: { onDemandPriceSource: "pricing-api" },
        });
        // The Price List API's price (after the June 2025 cut, as the built-in table now has it too).
        const eight = await offerOf(
          AWS(settings),
          { accelerator: { name: "H100", count: 8 }, allocation: "on-demand" },
          "p5.48xlarge",
        );
        expect(eight).toMatchObject({
          onDemandPrice: 55.04,
          specific: { onDemandPriceSource: "pricing-api" },
        });
        // Another region has its own prices.
        const west = await offerOf(AWS(settings), { ...cpuQuery, region: "us-west-2" }, "t3.medium");
        expect(west).toMatchObject({ region: "us-west-2", onDemandPrice: 0.0418 });
        // The request asks Linux, shared tenancy, no software, used capacity, in the region, every page
        // (the double serves decoys with other prices for each of these).
        const first = pricing.priceRequests[0] as { Filters: { Field: string; Value: string }[] };
        expect(Object.fromEntries(first.Filters.map((filter) => [filter.Field, filter.Value]))).toEqual({
          regionCode: "us-east-1",
          operatingSystem: "Linux",
          tenancy: "Shared",
          preInstalledSw: "NA",
          capacitystatus: "Used",
        });
        expect(pricing.priceRequests.length).toBeGreaterThan(2); // several pages per region

        // Cached on disk, with the date: a new provider reads the file, not the API.
        const file = priceCacheFile("us-east-1", pricing.endpoint);
        const cached = JSON.parse(await readFile(file, "utf8")) as {
          fetchedAt: string;
          prices: Record<string, number>;
        };
        expect(cached.prices["p5.4xlarge"]).toBe(6.88);
        expect(Date.now() - Date.parse(cached.fetchedAt)).toBeLessThan(600_000);
        const asked = pricing.priceRequests.length;
        await offerOf(AWS(settings), cpuQuery, "t3.medium");
        expect(pricing.priceRequests.length).toBe(asked);
        // Older than 7 days: read again.
        await writeFile(
          file,
          JSON.stringify({ ...cached, fetchedAt: new Date(Date.now() - 8 * 86_400_000).toISOString() }),
        );
        pricing.prices.set("us-east-1", { ...pricing.prices.get("us-east-1"), "t3.medium": 0.05 });
        expect((await offerOf(AWS(settings), cpuQuery, "t3.medium")).onDemandPrice).toBe(0.05);
        expect(pricing.priceRequests.length).toBeGreaterThan(asked);
      } finally {
        await pricing.close();
      }
    });

    it("without the Price List API: the dated table in us-east-1 only; elsewhere no on-demand launch at an unknown price", async () => {
      const pricing = await startAwsDouble(suite.moto.motoEndpoint);
      pricing.denyPricing = true;
      const proxy = await refuseSpotLaunches(suite.moto.endpoint);
      try {
        const aws = AWS({ endpoint: proxy.endpoint, pricingEndpoint: pricing.endpoint });
        const east = await offerOf(aws, cpuQuery, "t3.medium");
        expect(east).toMatchObject({
          onDemandPrice: 0.0416,
          pricesAsOf: ON_DEMAND_PRICES_AS_OF,
          specific: { onDemandPriceSource: "built-in" },
        });
        // us-west-2: nothing on demand, and the reason is carried.
        expect(await aws.offers({ query: { ...cpuQuery, region: "us-west-2" }, ...call() })).toEqual([]);
        const west = await offerOf(
          aws,
          { ...cpuQuery, allocation: "spot-if-available", region: "us-west-2" },
          "t3.medium",
        );
        expect(west.onDemandPrice).toBeNull();
        expect((west.specific as { onDemandPriceMissing: string }).onDemandPriceMissing).toContain(
          "AccessDeniedException",
        );
        // Spot refused: no fallback to on-demand at an unknown price.
        const cluster = await aws.prepare({
          spec: poolSpec({ allocation: "spot-if-available" }),
          offer: west,
          ...call(),
        });
        const failure = await aws
          .provision({ cluster, count: 1, ...call() })
          .catch((error: unknown) => error);
        expect((failure as NoCapacityError).attempts.map((attempt) => attempt.reason)).toContain(
          "on-demand: no known price, never launched",
        );
        expect(runs(proxy.calls).every((entry) => entry.params.has("InstanceMarketOptions.MarketType"))).toBe(
          true,
        );
        await aws.teardown({ cluster, ...call() });
      } finally {
        await proxy.close();
        await pricing.close();
      }
    });
  });
});
