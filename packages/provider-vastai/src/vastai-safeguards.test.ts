import { accelerators, options as poolOptions, spec as toSpec } from "@skyward/core";
import { type Instance, offerQuery, resolvePoolSpec } from "@skyward/core/contract";
import { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS } from "@skyward/provider-utils";
import { useMswFake } from "@skyward/testing";
import { HttpResponse, http } from "msw";
import { describe, expect, it } from "vitest";
import { SCALED_CREATE_LIMITS, startFakeVast, TEST_API_KEY } from "../test/fake-vastai.js";
import errors from "../test/fixtures/errors.json" with { type: "json" };
import market from "../test/fixtures/offers.json" with { type: "json" };
import { classifyVastError } from "./vastai-api.js";
import { VastAI } from "./vastai-provider.js";
import type { VastAISettings } from "./vastai-settings.js";

const fake = startFakeVast();
const keys = useMswFake(fake, "skyward-vast-safeguards-");
const call = () => ({ signal: AbortSignal.timeout(20_000) });

/**
 * A provider with Vast.ai's real limits (`rateLimits` unset), creates scaled for the fake; through the
 * SSH proxy and unverified hosts too, so the fixture has four RTX 4090 offers to rent.
 */
const paced = (settings: VastAISettings = {}) =>
  VastAI({
    apiKey: TEST_API_KEY,
    keysDirectory: keys.keysDirectory,
    retryDelayMs: 1,
    ssh: "proxy",
    verifiedOnly: false,
    createIntervalMs: SCALED_CREATE_LIMITS.createIntervalMs,
    rateLimitPenaltyMs: SCALED_CREATE_LIMITS.rateLimitPenaltyMs,
    ...settings,
  });

/**
 * The gaps between the arrivals of `requests`, ms. They are sent on the limit's schedule; on a loaded
 * machine one may arrive late and the next on time, so gaps are checked from 75 % of it: without the
 * pacing they are a few milliseconds, so the check still fails on a provider that does not pace.
 */
const gaps = (requests: readonly { at: number }[]) =>
  requests.slice(1).map((request, index) => request.at - (requests[index] as { at: number }).at);

/** A cluster of `vast` for one on-demand RTX 4090 a node, prepared. */
async function onDemandCluster(vast: ReturnType<typeof paced>) {
  const spec = resolvePoolSpec(
    toSpec({ provider: vast, accelerator: accelerators.RTX_4090(), allocation: "on-demand" }),
    poolOptions({}),
  );
  const [offer] = await vast.offers({ query: offerQuery(spec), ...call() });
  if (!offer) throw new Error("no offer");
  return vast.prepare({ spec, offer, ...call() });
}

async function threeNodes(vast: ReturnType<typeof paced>) {
  const cluster = await onDemandCluster(vast);
  const nodes = await vast.provision({ cluster, count: 3, ...call() });
  expect(nodes).toHaveLength(3);
  return { cluster, ids: nodes.map((node: Instance) => node.id) };
}

describe("pacing by Vast.ai's documented per-endpoint limits", () => {
  it("looks instances up one per 2 s and destroys them one per 3 s, even when asked all at once", async () => {
    const vast = paced();
    const { cluster, ids } = await threeNodes(vast);
    fake.requests.length = 0;
    // The pool's instance watch asks for every node at the same moment.
    await Promise.all(ids.map((id) => vast.getInstance({ cluster, id, ...call() })));
    const lookups = fake.to(/^\/api\/v0\/instances\/\d+\/$/, "GET");
    expect(lookups).toHaveLength(3);
    for (const gap of gaps(lookups)) expect(gap).toBeGreaterThanOrEqual(1500);
    await Promise.all(ids.slice(0, 2).map((id) => vast.terminate({ cluster, ids: [id], ...call() })));
    const destroys = fake.to(/^\/api\/v0\/instances\/\d+\/$/, "DELETE");
    expect(destroys).toHaveLength(2);
    for (const gap of gaps(destroys)) expect(gap).toBeGreaterThanOrEqual(2250);
    // Nothing was refused for coming too early.
    expect(
      fake.requests.filter((request) => request.method === "GET" || request.method === "DELETE"),
    ).toHaveLength(5);
  }, 120_000);

  it("searches within the limit set (10 a minute by default), lists one page per second", async () => {
    const vast = paced({ rateLimits: { search: { requests: 2, perSeconds: 1 } } });
    const query = { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" } as const;
    await Promise.all([1, 2, 3].map(() => vast.offers({ query, ...call() })));
    const searches = fake.to("/api/v0/bundles/", "POST");
    expect(searches).toHaveLength(3);
    expect((searches[2] as { at: number }).at - (searches[0] as { at: number }).at).toBeGreaterThanOrEqual(
      750,
    );
    fake.pageSize = 1;
    await threeNodes(paced({ rateLimits: { search: { requests: 10, perSeconds: 0.6 } } }));
    fake.requests.length = 0;
    await vast.listInstances?.(call());
    const pages = fake.to("/api/v1/instances/", "GET");
    expect(pages).toHaveLength(3);
    for (const gap of gaps(pages)) expect(gap).toBeGreaterThanOrEqual(750);
  }, 120_000);

  it("refuses a limit that is not one, by name", () => {
    expect(() => VastAI({ rateLimits: { get: { requests: 0, perSeconds: 2 } } })).toThrow(
      /VastAI\.rateLimits\.get\.requests/,
    );
  });
});

describe("the country", () => {
  it("is asked of the search: a German machine is found though the cheapest offers worldwide are elsewhere", async () => {
    const settings: VastAISettings = { searchLimit: 1, verifiedOnly: true, ...SCALED_CREATE_LIMITS };
    const query = { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" } as const;
    const offers = await paced(settings).offers({ query: { ...query, region: "DE" }, ...call() });
    expect(offers.map((offer) => [offer.id, offer.region])).toEqual([["vastai:7100006", "Bavaria, DE"]]);
    expect(fake.to("/api/v0/bundles/", "POST")[0]?.body).toMatchObject({ geolocation: { eq: "DE" } });
    // The setting does the same; a region written as the offers show it ("Texas, US") asks for its country.
    const texas = await paced({ ...settings, geolocation: "Texas, US" }).offers({ query, ...call() });
    expect(texas.map((offer) => offer.region)).toEqual(["Texas, US"]);
    expect(fake.to("/api/v0/bundles/", "POST").at(-1)?.body).toMatchObject({ geolocation: { eq: "US" } });
  });
});

describe("provisioning", () => {
  it("waits up to 30 minutes for an image pull unless the pool's options say otherwise", () => {
    expect(IMAGE_PULL_PROVISION_TIMEOUT_SECONDS).toBe(1800);
    expect(paced().capabilities.provisionTimeout).toBe(1800);
  });
});

describe("errors, in the base's taxonomy", () => {
  it("tells Vast.ai's refusals apart by their documented `error` codes", () => {
    // The `{success, error, msg}` bodies of https://docs.vast.ai/api-reference/rate-limits-and-errors.
    const kind = (statusCode: number, answer: { msg: string }) =>
      classifyVastError({
        statusCode,
        message: `Vast.ai's API answered HTTP ${statusCode}: ${answer.msg}`,
        answer,
      });
    expect(kind(400, errors.instanceGone)).toBe("gone");
    expect(kind(400, errors.askGone)).toBe("capacity");
    expect(kind(400, errors.bidTooLow)).toBe("price");
    expect(kind(400, errors.duplicateKey)).toBeUndefined();
    expect(kind(429, errors.askGone)).toBeUndefined();
  });
});

describe("nothing left billing unsaid", () => {
  it("a key that cannot be attached destroys the instance; when that fails too, the error names it, says it may bill and how to remove it", async () => {
    const vast = paced({ ...SCALED_CREATE_LIMITS });
    const cluster = await onDemandCluster(vast);
    // The key refused (errors.json's `{success, error, msg}` shape), then every destroy refused alike.
    const refusal = () => HttpResponse.json(errors.duplicateKey, { status: 400 });
    let destroys = 0;
    fake.server.use(
      http.post("https://console.vast.ai/api/v0/instances/:id/ssh/", refusal),
      http.delete("https://console.vast.ai/api/v0/instances/:id/", () => {
        destroys += 1;
        return refusal();
      }),
    );
    const failed = await vast.provision({ cluster, count: 1, ...call() }).catch((error: unknown) => error);
    const [rented] = [...fake.instances.keys()];
    expect(rented).toBeDefined();
    expect((failed as Error).message).toMatch(
      new RegExp(`instance ${rented}.*may still be billing.*skyward down`),
    );
    expect((failed as Error).message).toMatch(/already registered/);
    // The destroy was asked (the base's delete-until-gone), not given up on silently.
    expect(destroys).toBeGreaterThanOrEqual(1);
  });

  it("a key that cannot be attached destroys the instance and says why the rent failed", async () => {
    const vast = paced({ ...SCALED_CREATE_LIMITS });
    const cluster = await onDemandCluster(vast);
    fake.server.use(
      http.post("https://console.vast.ai/api/v0/instances/:id/ssh/", () =>
        HttpResponse.json(errors.duplicateKey, { status: 400 }),
      ),
    );
    await expect(vast.provision({ cluster, count: 1, ...call() })).rejects.toThrow(/already registered/);
    expect([...fake.instances.keys()]).toEqual([]);
  });

  it("a rent whose answer was lost, not listed yet, is waited for: the retry rents no other ask in its place", async () => {
    const vast = paced({ ...SCALED_CREATE_LIMITS });
    const cluster = await onDemandCluster(vast);
    fake.faults.loseNextCreateAnswer?.();
    // The list is a moment behind the rent: its first three answers (the documented empty page) miss it.
    let lagging = 3;
    fake.server.use(
      http.get("https://console.vast.ai/api/v1/instances/", () => {
        if (lagging <= 0) return undefined;
        lagging -= 1;
        return HttpResponse.json({ instances: [], next_token: null });
      }),
    );
    const made = await vast.provision({ cluster, count: 1, ...call() });
    expect([...fake.instances.keys()].map(String)).toEqual(made.map((instance) => instance.id));
    expect(fake.to(/^\/api\/v0\/asks\/\d+\/$/, "PUT").map((rent) => rent.url.pathname)).toEqual([
      `/api/v0/asks/${cluster.offer.id.replace("vastai:", "")}/`,
      `/api/v0/asks/${cluster.offer.id.replace("vastai:", "")}/`,
    ]);
  });

  it("an instance listed without a numeric id fails the list loudly, never read as no instance", async () => {
    const vast = paced();
    // The v1 list's items carry an integer `id` (fixtures/instance.json; vast-cli's
    // _fetch_all_instances_v1 pages by it): one whose id is a string is a shape not known here.
    fake.addForeignInstance({
      id: "31000099",
      label: "skyward-abc vastai:7100002",
      actual_status: "running",
    });
    await expect(vast.listInstances?.(call())).rejects.toThrow(/without a numeric id/);
  });
});

describe("the price cap", () => {
  it("is checked against the price the rented instance bills, not the offer's cached one", async () => {
    // Offers are cached up to an hour (a marketplace's): a host may raise its ask meanwhile, and an
    // on-demand rent takes no price, so the instance bills the new one.
    const vast = paced();
    const spec = resolvePoolSpec(
      toSpec({ provider: vast, accelerator: accelerators.RTX_4090(), allocation: "on-demand" }),
      poolOptions({}),
    );
    const [offer] = await vast.offers({ query: offerQuery(spec), ...call() });
    if (!offer?.onDemandPrice) throw new Error("no on-demand offer");
    const cap = offer.onDemandPrice + 0.01;
    const cluster = await vast.prepare({ spec: { ...spec, maxHourlyCost: cap }, offer, ...call() });
    const raised = market.offers.find((entry) => entry.id === Number(offer.id.replace("vastai:", "")));
    if (!raised) throw new Error("the offer's ask is not in the fixture");
    const before = raised.dph_total;
    raised.dph_total = cap + 1;
    try {
      await vast.provision({ cluster, count: 1, ...call() }).catch(() => []);
      const live = await fake.faults.live();
      expect(live.filter((instance) => instance.hourlyPrice > cap)).toEqual([]);
    } finally {
      raised.dph_total = before;
      await vast.teardown({ cluster, ...call() });
    }
  });
});
