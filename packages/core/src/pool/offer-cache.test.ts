import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Offer, OfferQuery, Provider } from "../contract/provider.js";
import { cachedOffers, OFFER_CACHE_SECONDS } from "./offer-cache.js";

let home = "";
const previous = process.env.SKYWARD_HOME;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "skyward-offer-cache-"));
  process.env.SKYWARD_HOME = home;
});

afterAll(async () => {
  if (previous === undefined) delete process.env.SKYWARD_HOME;
  else process.env.SKYWARD_HOME = previous;
  await rm(home, { recursive: true, force: true });
});

function countingProvider(
  offerCache: "marketplace" | "catalogue" | undefined,
  name: string,
): { provider: Provider; calls: () => number } {
  let calls = 0;
  const offer: Offer = {
    id: "o1",
    provider: name,
    instanceType: "gpu.small",
    accelerator: { name: "T4", count: 1, memoryGb: 16 },
    vcpus: 4,
    memoryGb: 16,
    architecture: "x86_64",
    region: "r1",
    spotPrice: 0.2,
    onDemandPrice: 0.5,
    pricesAsOf: "2026-11-22",
    specific: {},
  };
  const provider = {
    specificationVersion: "v1",
    name,
    capabilities: { spot: true, ...(offerCache ? { offerCache } : {}) },
    async offers() {
      calls += 1;
      return [offer];
    },
  } as unknown as Provider;
  return { provider, calls: () => calls };
}

const query: OfferQuery = { accelerator: { name: "T4", count: 1 }, allocation: "spot-if-available" };
const options = { signal: AbortSignal.timeout(5000) };

describe("the offer cache", () => {
  it("keeps a marketplace's offers for an hour and a catalogue's for a day", async () => {
    const market = countingProvider("marketplace", "market");
    const now = Date.now();
    expect(await cachedOffers(market.provider, query, options, now)).toHaveLength(1);
    await cachedOffers(market.provider, query, options, now + 1000);
    expect(market.calls()).toBe(1);
    await cachedOffers(market.provider, query, options, now + OFFER_CACHE_SECONDS.marketplace * 1000 + 1);
    expect(market.calls()).toBe(2);

    const catalogue = countingProvider("catalogue", "catalogue");
    await cachedOffers(catalogue.provider, query, options, now);
    await cachedOffers(catalogue.provider, query, options, now + 2 * 3600 * 1000);
    expect(catalogue.calls()).toBe(1);
  });

  it("asks again for another query, and never caches providers that do not say they may be", async () => {
    const market = countingProvider("marketplace", "market2");
    await cachedOffers(market.provider, query, options);
    await cachedOffers(market.provider, { ...query, maxHourlyCost: 1 }, options);
    expect(market.calls()).toBe(2);
    const uncached = countingProvider(undefined, "local-like");
    await cachedOffers(uncached.provider, query, options);
    await cachedOffers(uncached.provider, query, options);
    expect(uncached.calls()).toBe(2);
  });
});
