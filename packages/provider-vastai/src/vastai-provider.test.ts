import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  accelerators,
  ConfigurationError,
  compute,
  containers,
  DockerImage,
  NoCapacityError,
  ProvisionError,
  options as poolOptions,
  type SpecInput,
  spec as toSpec,
} from "@skyward/core";
import { createProviderFromEntry } from "@skyward/core/config";
// The core's offer cache itself (not exported): what pools put every offers() answer through.
import {
  type Cluster,
  cachedOffers,
  type Instance,
  type Offer,
  type OfferQuery,
  offerQuery,
  Plugin,
  resolvePoolSpec,
  whyNotProvider,
} from "@skyward/core/contract";
import { launchSshWorker } from "@skyward/ssh";
import { expectPeerPluginRefused, preparedCluster, useMswFake } from "@skyward/testing";
import { HttpResponse } from "msw";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SCALED_CREATE_LIMITS, startFakeVast, TEST_API_KEY } from "../test/fake-vastai.js";
import { SELF_DESTRUCT_COMMAND } from "./onstart-script.js";
import { VastApiError } from "./vastai-api.js";
import { vastGpuNames } from "./vastai-offers.js";
import { createProviderFromConfig, VastAI, type VastClusterData } from "./vastai-provider.js";
import { DEFAULT_VASTAI_IMAGE, type VastAISettings } from "./vastai-settings.js";

const fake = startFakeVast();
const keys = useMswFake(fake, "skyward-vast-keys-");
const call = () => ({ signal: AbortSignal.timeout(10_000) });

function provider(settings: VastAISettings = {}) {
  return VastAI({
    apiKey: TEST_API_KEY,
    keysDirectory: keys.keysDirectory,
    retryDelayMs: 1,
    ...SCALED_CREATE_LIMITS,
    ...settings,
  });
}

const rtx4090: OfferQuery = { accelerator: { name: "RTX_4090", count: 1 }, allocation: "spot-if-available" };

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
  settings: VastAISettings = {},
) {
  const vast = provider(settings);
  const cluster = await preparedCluster(vast, input, pick);
  fake.requests.length = 0;
  return { vast, cluster };
}

describe("offers", () => {
  it("searches with the query JSON: GPU names, count, memory, CPU, reliability, verified, direct ports, type", async () => {
    await provider().offers({
      query: {
        ...rtx4090,
        vcpus: 8,
        memoryGb: 30,
        accelerator: { name: "RTX_4090", count: 1, memoryGb: 24 },
      },
      ...call(),
    });
    // Spot with an on-demand fallback: each market is priced by its own search.
    const [onDemand, request] = fake.to("/api/v0/bundles/", "POST");
    expect(onDemand?.body).toMatchObject({ type: "on-demand" });
    expect(request?.url.href).toBe("https://console.vast.ai/api/v0/bundles/");
    expect(request?.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(request?.body).toEqual({
      rentable: { eq: true },
      rented: { eq: false },
      verified: { eq: true },
      type: "bid",
      gpu_name: { in: vastGpuNames("RTX_4090") },
      num_gpus: { eq: 1 },
      gpu_ram: { gte: 23839 },
      cpu_cores_effective: { gte: 8 },
      cpu_ram: { gte: 30720 },
      reliability: { gte: 0.95 },
      cuda_max_good: { gte: 12 },
      allocated_storage: 50,
      disk_space: { gte: 50 },
      direct_port_count: { gte: 1 },
      order: [["dph_total", "asc"]],
      limit: 64,
    });
    expect(vastGpuNames("RTX_4090")).toEqual(expect.arrayContaining(["RTX 4090", "RTX 4090D"]));
    expect(vastGpuNames("A100")).toEqual(expect.arrayContaining(["A100", "A100 PCIE", "A100 SXM4"]));
    expect(vastGpuNames("RTX_6000_Ada")).toContain("RTX 6000Ada");
  });

  it("parses offers: canonical accelerator, GB from MB, on-demand price from the on-demand search, spot = bid + charges", async () => {
    const offers = await provider().offers({ query: rtx4090, ...call() });
    // The 4090D is another accelerator, the 0.90-reliability host and the unverified one are filtered,
    // the host without direct ports too (direct SSH is the default).
    // 7100002: on demand 0.355; the bid search says 0.1678 (min_bid 0.15 + 0.0178 of charges), which is
    // not the on-demand price; the bid is 0.15 × 1.2 = 0.18, so spot costs 0.18 + 0.0178.
    expect(offers.map((offer) => [offer.id, offer.onDemandPrice, offer.spotPrice])).toEqual([
      ["vastai:7100002", 0.355, 0.1978],
      ["vastai:7100001", 0.412, 0.2606],
    ]);
    expect(fake.to("/api/v0/bundles/").map((request) => (request.body as { type: string }).type)).toEqual([
      "on-demand",
      "bid",
    ]);
    expect(offers[1]).toMatchObject({
      provider: "vastai",
      instanceType: "1x RTX 4090 (machine 3101)",
      accelerator: { name: "RTX_4090", count: 1, memoryGb: 24 },
      vcpus: 16,
      // One GPU of four (gpu_frac 0.25): a quarter of the machine's 64309 MB, not all of it.
      memoryGb: 15.7004,
      diskGb: 500,
      architecture: "x86_64",
      region: "Texas, US",
      billingUnit: "second",
      specific: {
        askId: 7100001,
        machineId: 3101,
        gpuName: "RTX 4090",
        numGpus: 1,
        bid: 0.24,
        reliability: 0.995,
      },
    });
  });

  it("labels the form factor gpu_name says and honours one asked for", async () => {
    // The fixture (POST /api/v0/bundles/, https://docs.vast.ai/api-reference/openapi.yaml) has one
    // "A100 SXM4" and one "A100 PCIE" ask.
    const ask = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            accelerator: { name: "A100", count: 1, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          ...call(),
        })
      )
        .map((offer) => [(offer.specific as { gpuName: string }).gpuName, offer.accelerator?.formFactor])
        .sort();
    expect(await ask("SXM")).toEqual([["A100 SXM4", "SXM"]]);
    expect(await ask("PCIe")).toEqual([["A100 PCIE", "PCIe"]]);
    expect(await ask()).toEqual([
      ["A100 PCIE", "PCIe"],
      ["A100 SXM4", "SXM"],
    ]);
  });

  it("asks for on-demand offers when the allocation is on-demand, without a spot price", async () => {
    const offers = await provider().offers({
      query: { ...rtx4090, allocation: "on-demand", maxHourlyCost: 0.4 },
      ...call(),
    });
    const [request] = fake.to("/api/v0/bundles/");
    expect(request?.body).toMatchObject({ type: "on-demand", dph_total: { lte: 0.4 } });
    expect(offers.map((offer) => [offer.id, offer.spotPrice])).toEqual([["vastai:7100002", null]]);
  });

  it("honours geolocation, proxy SSH, reliability and verification settings", async () => {
    expect(
      (await provider({ geolocation: "us" }).offers({ query: rtx4090, ...call() })).map((offer) => offer.id),
    ).toEqual(["vastai:7100001"]);
    expect(
      (await provider().offers({ query: { ...rtx4090, region: "CA" }, ...call() })).map((offer) => offer.id),
    ).toEqual(["vastai:7100002"]);
    const proxy = await provider({ ssh: "proxy", minReliability: 0.9, verifiedOnly: false }).offers({
      query: rtx4090,
      ...call(),
    });
    expect(proxy.map((offer) => offer.id)).toEqual([
      "vastai:7100003",
      "vastai:7100007",
      "vastai:7100002",
      "vastai:7100006",
      "vastai:7100001",
    ]);
    expect(fake.to("/api/v0/bundles/").at(-1)?.body).not.toHaveProperty("direct_port_count");
  });

  it("offers no CPU-only nodes and asks nothing for them", async () => {
    expect(
      await provider().offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() }),
    ).toEqual([]);
    expect(fake.requests).toEqual([]);
  });
});

describe("prepare and provision", () => {
  it("attaches the generated key to each rented instance, never to the account; keeps the private key 0600", async () => {
    const vast = provider();
    const spec = resolvePoolSpec(
      toSpec({ provider: vast, accelerator: accelerators.RTX_4090(), allocation: "on-demand" }),
      poolOptions({}),
    );
    const [offer] = await vast.offers({ query: { ...rtx4090, allocation: "on-demand" }, ...call() });
    const cluster = await vast.prepare({ spec, offer: offer as Offer, ...call() });
    const created = await vast.provision({ cluster, count: 2, ...call() });
    // An account key would reach every instance of the account (Skyward's or not): none is registered.
    expect(fake.to("/api/v0/ssh/")).toEqual([]);
    expect(fake.accountKeys).toEqual([]);
    for (const instance of created) {
      expect(fake.instances.get(Number(instance.id))?.keys).toEqual([cluster.specific.publicKey]);
      expect(fake.to(`/api/v0/instances/${instance.id}/ssh/`, "POST")).toHaveLength(1);
    }
    expect(cluster.ssh).toEqual({
      user: "root",
      identityFile: join(keys.keysDirectory, "vastai_ed25519"),
      sudo: false,
    });
    expect((await stat(cluster.specific.identityFile)).mode & 0o777).toBe(0o600);
  });

  it("rents the offer on demand: image, disk, label, ssh_direct, the onstart watchdog, no price", async () => {
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
      diskGb: 80,
    });
    const [instance] = await vast.provision({ cluster, count: 1, ...call() });
    const [rent] = fake.to(/^\/api\/v0\/asks\/\d+\/$/, "PUT");
    expect(rent?.url.pathname).toBe("/api/v0/asks/7100002/");
    const body = rent?.body as Record<string, unknown>;
    expect(body).toEqual({
      client_id: "me",
      image: DEFAULT_VASTAI_IMAGE,
      disk: 80,
      label: `${cluster.id}-0 vastai:7100002`,
      runtype: "ssh_direct",
      onstart: expect.stringContaining(`${SELF_DESTRUCT_COMMAND}`),
      env: { SKYWARD_CLUSTER: cluster.id },
      cancel_unavail: true,
    });
    expect(body.onstart).toContain("after 1800 s without a running Skyward worker");
    expect(instance).toMatchObject({
      id: "31000001",
      status: "pending",
      ssh: null,
      spot: false,
      hourlyPrice: 0.355,
      offerId: "vastai:7100002",
      tags: { "skyward:cluster": cluster.id },
    });
  });

  it("bids for an interruptible instance at the offer's spot price", async () => {
    const { vast, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090(), allocation: "spot" });
    const [instance] = await vast.provision({ cluster, count: 1, ...call() });
    const [rent] = fake.to(/^\/api\/v0\/asks\//, "PUT");
    expect(rent?.body).toMatchObject({ price: 0.18 });
    expect(instance).toMatchObject({ spot: true, hourlyPrice: 0.1978 });
  });

  it("more nodes than one offer: searches again for the same GPU and rents the next asks", async () => {
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    const instances = await vast.provision({ cluster, count: 2, ...call() });
    expect(instances.map((instance) => instance.id)).toEqual(["31000001", "31000002"]);
    // The asks rented, in order (a create the scaled rate limit refused on a loaded machine is sent
    // again after the penalty: the same ask twice in a row).
    const asked = fake.to(/^\/api\/v0\/asks\//, "PUT").map((request) => request.url.pathname);
    expect([...new Set(asked)]).toEqual(["/api/v0/asks/7100002/", "/api/v0/asks/7100001/"]);
    expect(instances.every((instance) => instance.offerId === cluster.offer.id)).toBe(true);
    // The market is empty now: a third node gets nothing, and says why; an ask rented is not asked again.
    fake.requests.length = 0;
    const error = await vast.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts[0]?.reason).toBe(
      "on-demand: Vast.ai has no other ask of this kind to rent (try another region, accelerator or allocation, or again later)",
    );
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT")).toEqual([]);
    // An ask taken by someone else is reported by what Vast.ai answered.
    const other = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      () => cluster.offer,
    );
    const taken = await other.vast
      .provision({ cluster: other.cluster, count: 1, ...call() })
      .catch((caught: unknown) => caught);
    expect((taken as NoCapacityError).attempts[0]?.reason).toBe(
      "on-demand: on-demand on offer 7100002: Vast.ai's API answered HTTP 410 while renting offer 7100002 (PUT /api/v0/asks/7100002/): Instance type no longer available. (try another region, accelerator or allocation, or again later)",
    );
  });

  it("an offer taken meanwhile (410) is skipped for the next one; spot falls back to on-demand", async () => {
    const { vast, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    fake.rented.add(7100002);
    const [first] = await vast.provision({ cluster, count: 1, ...call() });
    expect(first).toMatchObject({ spot: true, hourlyPrice: 0.2606 });
    const rents = fake.to(/^\/api\/v0\/asks\//, "PUT").map((request) => request.url.pathname);
    expect([...new Set(rents)]).toEqual(["/api/v0/asks/7100002/", "/api/v0/asks/7100001/"]);
  });
});

describe("nodes after the first: the same search as the offers", () => {
  // One ask rents once: the nodes after the first (provision of several, autoscaling, replacements)
  // come from a search again. In each test the fake's market holds a cheaper ask of the same GPU that
  // breaks one of the filters; the second node must be the dearer ask that meets them all.
  const rentedAsks = () => [
    ...new Set(fake.to(/^\/api\/v0\/asks\/\d+\/$/, "PUT").map((request) => request.url.pathname)),
  ];
  /** The search bodies sent, the first offers search's and the re-search's, by market. */
  const searches = (type: string) =>
    fake
      .to("/api/v0/bundles/", "POST")
      .map((request) => request.body as Record<string, unknown>)
      .filter((body) => body.type === type);

  it("keeps the spec's hardware: no host with less RAM than memoryGb", async () => {
    // 96 GB hosts at $0.45 and $0.60; the fixture's 7100002 ($0.355) has 32 GB.
    fake.addOffer(7100002, { id: 7400001, cpu_ram: 98_304, dph_total: 0.45, dph_base: 0.43 });
    fake.addOffer(7100002, { id: 7400002, cpu_ram: 98_304, dph_total: 0.6, dph_base: 0.58 });
    const vast = provider();
    const spec = resolvePoolSpec(
      toSpec({ provider: vast, accelerator: accelerators.RTX_4090(), allocation: "on-demand", memoryGb: 40 }),
      poolOptions({}),
    );
    const offers = await vast.offers({ query: offerQuery(spec), ...call() });
    expect(offers.map((offer) => offer.id)).toEqual(["vastai:7400001", "vastai:7400002"]);
    const [firstSearch] = searches("on-demand");
    const cluster = await vast.prepare({ spec, offer: offers[0] as Offer, ...call() });
    const instances = await vast.provision({ cluster, count: 2, ...call() });
    expect(instances).toHaveLength(2);
    expect(rentedAsks()).toEqual(["/api/v0/asks/7400001/", "/api/v0/asks/7400002/"]);
    expect(fake.rented.has(7100002)).toBe(false);
    // The re-search sent the very query of the offers search: cpu_ram and all.
    const again = searches("on-demand").at(-1);
    expect(searches("on-demand")).toHaveLength(2);
    expect(again).toEqual(firstSearch);
    expect(again).toMatchObject({ cpu_ram: { gte: 40_960 } });
  });

  it("keeps the accelerator's memory: no 40 GB A100 where 80 GB was asked", async () => {
    // A 40 GB A100 SXM4 at $0.90 (cheaper than the fixture's 80 GB one at $1.21), an 80 GB one at $1.50.
    fake.addOffer(7200001, {
      id: 7400003,
      gpu_ram: 40_960,
      gpu_total_ram: 40_960,
      dph_total: 0.9,
      dph_base: 0.85,
    });
    fake.addOffer(7200001, { id: 7400004, dph_total: 1.5, dph_base: 1.45 });
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.A100({ memory: "80GB" }),
      allocation: "on-demand",
    });
    expect(cluster.offer.id).toBe("vastai:7200001");
    const instances = await vast.provision({ cluster, count: 2, ...call() });
    expect(instances).toHaveLength(2);
    expect(rentedAsks()).toEqual(["/api/v0/asks/7200001/", "/api/v0/asks/7400004/"]);
    expect(fake.rented.has(7400003)).toBe(false);
    expect(searches("on-demand").at(-1)).toMatchObject({ gpu_ram: { gte: 79_462 } });
  });

  it("keeps the provider's settings: no host in another country than geolocation", async () => {
    // Another Texas host at $0.50; the fixture's Canadian 7100002 ($0.355) is cheaper.
    fake.addOffer(7100001, { id: 7400005, dph_total: 0.5, dph_base: 0.48 });
    const { vast, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      { geolocation: "US" },
    );
    expect(cluster.offer.id).toBe("vastai:7100001");
    const instances = await vast.provision({ cluster, count: 2, ...call() });
    expect(instances).toHaveLength(2);
    expect(rentedAsks()).toEqual(["/api/v0/asks/7100001/", "/api/v0/asks/7400005/"]);
    expect(fake.rented.has(7100002)).toBe(false);
  });

  it("a node that replaces one later (a provision of its own) is searched for the same way", async () => {
    fake.addOffer(7100002, { id: 7400001, cpu_ram: 98_304, dph_total: 0.45, dph_base: 0.43 });
    fake.addOffer(7100002, { id: 7400002, cpu_ram: 98_304, dph_total: 0.6, dph_base: 0.58 });
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
      memoryGb: 40,
      vcpus: 8,
    });
    await vast.provision({ cluster, count: 1, ...call() });
    const [replacement] = await vast.provision({ cluster, count: 1, ...call() });
    expect(replacement).toBeDefined();
    expect(rentedAsks()).toEqual(["/api/v0/asks/7400001/", "/api/v0/asks/7400002/"]);
    // No third node meets the spec: none is rented (the cheaper 32 GB hosts stay on the market).
    await expect(vast.provision({ cluster, count: 1, ...call() })).rejects.toSatisfy(
      NoCapacityError.isInstance,
    );
    expect(fake.rented.has(7100002)).toBe(false);
    expect(searches("on-demand").at(-1)).toMatchObject({
      cpu_ram: { gte: 40_960 },
      cpu_cores_effective: { gte: 8 },
    });
  });
});

describe("pool ids", () => {
  it("a pool id given to prepare goes into the label and comes back as the skyward:pool tag", async () => {
    const vast = provider();
    const spec = resolvePoolSpec(
      toSpec({ provider: vast, accelerator: accelerators.RTX_4090() }),
      poolOptions({}),
    );
    const [offer] = await vast.offers({ query: rtx4090, ...call() });
    const cluster = await vast.prepare({ spec, offer: offer as Offer, ...call(), poolId: "a1b2c3d4" });
    expect(cluster.poolId).toBe("a1b2c3d4");
    await vast.provision({ cluster, count: 1, ...call() });
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT")[0]?.body).toMatchObject({
      label: `${cluster.id}-0 vastai:7100002 a1b2c3d4`,
    });
    const [listed] = (await vast.listInstances?.(call())) ?? [];
    expect(listed).toMatchObject({
      offerId: "vastai:7100002",
      tags: { "skyward:cluster": cluster.id, "skyward:pool": "a1b2c3d4" },
    });
  });
});

describe("getInstance, terminate, teardown, listInstances", () => {
  let vast: ReturnType<typeof provider>;
  let cluster: Cluster<VastClusterData>;
  beforeEach(async () => {
    ({ vast, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090(), allocation: "on-demand" }));
  });

  it("direct SSH: the public IP and the host port mapped to 22, once running", async () => {
    // The create reads the instance back once (what it bills): still loading then.
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    const id = (created as Instance).id;
    expect(created).toMatchObject({ status: "pending", ssh: null });
    const running = await vast.getInstance({ cluster, id, ...call() });
    expect(running).toMatchObject({
      id,
      status: "running",
      publicIp: "198.51.100.102",
      ssh: {
        host: "198.51.100.102",
        port: 40_001,
        user: "root",
        identityFile: cluster.specific.identityFile,
      },
      offerId: cluster.offer.id,
      createdAt: 1_761_008_618_225,
      tags: { "skyward:cluster": cluster.id },
    });
    const [lookup] = fake.to(`/api/v0/instances/${id}/`, "GET");
    expect(lookup?.url.searchParams.get("owner")).toBe("me");
    expect(await vast.getInstance({ cluster, id: "99999999", ...call() })).toBeNull();
    expect(await vast.getInstance({ cluster, id: "not-a-vast-id", ...call() })).toBeNull();
  });

  it("proxied SSH: Vast.ai's ssh_host and ssh_port", async () => {
    const proxied = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      {
        ssh: "proxy",
      },
    );
    const [created] = await proxied.vast.provision({ cluster: proxied.cluster, count: 1, ...call() });
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT")[0]?.body).toMatchObject({ runtype: "ssh_proxy" });
    await proxied.vast.getInstance({ cluster: proxied.cluster, id: (created as Instance).id, ...call() });
    const running = await proxied.vast.getInstance({
      cluster: proxied.cluster,
      id: (created as Instance).id,
      ...call(),
    });
    expect(running?.ssh).toMatchObject({ host: "ssh5.vast.ai", port: 10_001 });
  });

  it("destroys idempotently: twice, and unknown ids", async () => {
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    const id = (created as Instance).id;
    await vast.terminate({ cluster, ids: [id], ...call() });
    const [destroy] = fake.to(`/api/v0/instances/${id}/`, "DELETE");
    expect(destroy?.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(fake.instances.size).toBe(0);
    await vast.terminate({ cluster, ids: [id, "12345", "not-a-vast-id"], ...call() });
    await vast.terminate({ cluster, ids: [], ...call() });
  });

  it("teardown destroys the instances labelled with the cluster, and only those", async () => {
    await vast.provision({ cluster, count: 1, ...call() });
    const other = await clusterFor({ accelerator: accelerators.RTX_4090(), allocation: "on-demand" });
    const [foreign] = await other.vast.provision({ cluster: other.cluster, count: 1, ...call() });
    await vast.teardown({ cluster, ...call() });
    expect([...fake.instances.keys()].map(String)).toEqual([foreign?.id]);
    await vast.teardown({ cluster, ...call() });
  });

  it("listInstances finds Skyward's instances by label", async () => {
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    fake.instances.set(5, {
      id: 5,
      askId: 7300001,
      body: { label: "my notebook" },
      lookups: 0,
      state: "running",
      keys: [],
    });
    const listed = await vast.listInstances?.(call());
    expect(
      listed?.map((instance) => [instance.id, instance.tags["skyward:cluster"], instance.offerId]),
    ).toEqual([[created?.id, cluster.id, cluster.offer.id]]);
  });

  it("only prepare creates the key pair: offers, listInstances, getInstance and terminate write nothing", async () => {
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    const id = (created as Instance).id;
    const elsewhere = await mkdtemp(join(tmpdir(), "skyward-vast-read-only-"));
    try {
      const empty = join(elsewhere, "keys");
      const reader = provider({ keysDirectory: empty });
      expect(await reader.offers({ query: rtx4090, ...call() })).not.toHaveLength(0);
      await reader.getInstance({ cluster, id, ...call() }); // pending
      expect(await reader.getInstance({ cluster, id, ...call() })).toMatchObject({ status: "running" });
      const [listed] = (await reader.listInstances?.(call())) ?? [];
      // Without a key pair on this machine the instance is listed without one.
      expect(listed?.ssh).toMatchObject({ user: "root" });
      expect(listed?.ssh).not.toHaveProperty("identityFile");
      // With one (made by prepare), listing points at it.
      const [own] = (await vast.listInstances?.(call())) ?? [];
      expect(own?.ssh).toMatchObject({ identityFile: cluster.specific.identityFile });
      await reader.terminate({ cluster, ids: [id], ...call() });
      await expect(stat(empty)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it("selfDestruct runs the command the onstart script installed", async () => {
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    expect(vast.selfDestruct({ cluster, instance: created as Instance })).toBe(
      "/usr/local/bin/skyward-self-destruct",
    );
  });
});

describe("instances as Skyward sees them", () => {
  it("is running only once the SSH port is known, else pending", async () => {
    const running = {
      id: 7,
      label: "skyward-1a2b3c4d vastai:42 pool-1",
      actual_status: "running",
      intended_status: "running",
      public_ipaddr: "203.0.113.9",
      ports: null,
      ssh_host: null,
      ssh_port: null,
      dph_total: 0.4,
      start_date: null,
    };
    const vast = provider();
    const described = async () => (await vast.listInstances?.(call()))?.find(({ id }) => id === "7");
    fake.addForeignInstance(running);
    expect(await described()).toMatchObject({ status: "pending", ssh: null });
    fake.addForeignInstance({ ...running, ports: { "22/tcp": [{ HostIp: "0.0.0.0", HostPort: "40022" }] } });
    expect(await described()).toMatchObject({
      status: "running",
      ssh: { host: "203.0.113.9", port: 40022, user: "root" },
      offerId: "vastai:42",
      tags: { "skyward:cluster": "skyward-1a2b3c4d", "skyward:pool": "pool-1", "skyward:offer": "vastai:42" },
    });
  });
});

describe("errors", () => {
  it("looks the API key up lazily, with a clear message when there is none", async () => {
    const saved = process.env.VAST_API_KEY;
    delete process.env.VAST_API_KEY;
    try {
      const vast = VastAI({ keysDirectory: keys.keysDirectory });
      const error = await vast.offers({ query: rtx4090, ...call() }).catch((caught: unknown) => caught);
      expect((error as ConfigurationError).issues).toEqual([
        { path: "apiKey", message: "Vast.ai API key is missing: set VAST_API_KEY or pass apiKey" },
      ]);
      expect(fake.requests).toEqual([]);
      process.env.VAST_API_KEY = TEST_API_KEY;
      expect(await vast.offers({ query: rtx4090, ...call() })).toHaveLength(2);
    } finally {
      if (saved === undefined) delete process.env.VAST_API_KEY;
      else process.env.VAST_API_KEY = saved;
    }
  });

  it("without an API key, listing and terminating fail and create no key pair", async () => {
    const saved = process.env.VAST_API_KEY;
    delete process.env.VAST_API_KEY;
    const elsewhere = await mkdtemp(join(tmpdir(), "skyward-vast-no-key-"));
    try {
      const empty = join(elsewhere, "keys");
      const vast = VastAI({ keysDirectory: empty });
      await expect(vast.listInstances?.(call())).rejects.toSatisfy(ConfigurationError.isInstance);
      const cluster = {} as Cluster<VastClusterData>;
      await expect(vast.terminate({ cluster, ids: ["12345"], ...call() })).rejects.toSatisfy(
        ConfigurationError.isInstance,
      );
      await expect(stat(empty)).rejects.toMatchObject({ code: "ENOENT" });
      expect(fake.requests).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.VAST_API_KEY;
      else process.env.VAST_API_KEY = saved;
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it("a rejected key fails at once and never shows the key: Vast.ai's 404 to an unknown key is an auth error", async () => {
    const error = await provider({ apiKey: "vast_wrong_key" })
      .offers({ query: rtx4090, ...call() })
      .catch((caught: unknown) => caught);
    expect(VastApiError.isInstance(error) && ProvisionError.isInstance(error)).toBe(true);
    expect((error as VastApiError).statusCode).toBe(401);
    expect((error as Error).message).toBe(
      "Vast.ai rejected the API key while searching offers (it answers HTTP 404 to a key it does not know): set VAST_API_KEY to a valid key or pass apiKey",
    );
    expect(fake.to("/api/v0/users/current/")).toHaveLength(1);
    fake.interrupt(1, () =>
      HttpResponse.json({ success: false, error: "forbidden", msg: "no permission" }, { status: 403 }),
    );
    const forbidden = await provider()
      .offers({ query: rtx4090, ...call() })
      .catch((caught: unknown) => caught);
    expect((forbidden as VastApiError).statusCode).toBe(403);
    expect(`${String((forbidden as Error).stack)} ${JSON.stringify(forbidden)}`).not.toContain(TEST_API_KEY);
  });

  it("rate limits (429) are retried with backoff, honouring Retry-After, then fail clearly", async () => {
    fake.interrupt(2, () =>
      HttpResponse.json(
        { detail: "API requests too frequent" },
        { status: 429, headers: { "Retry-After": "0" } },
      ),
    );
    const spotOnly: OfferQuery = { ...rtx4090, allocation: "spot" };
    expect(await provider({ retryDelayMs: 10_000 }).offers({ query: spotOnly, ...call() })).toHaveLength(2);
    expect(fake.to("/api/v0/bundles/")).toHaveLength(3);
    fake.reset();
    fake.interrupt(10, () => HttpResponse.json({ detail: "API requests too frequent" }, { status: 429 }));
    const error = await provider({ maxRetries: 2 })
      .offers({ query: spotOnly, ...call() })
      .catch((caught: unknown) => caught);
    expect(fake.requests).toHaveLength(3);
    expect((error as Error).message).toBe(
      "Vast.ai's rate limit (HTTP 429) persisted after 3 attempts while searching interruptible offers (POST /api/v0/bundles/); try again later",
    );
    expect((error as VastApiError).isRetryable).toBe(true);
  });

  it("renting after a 5xx (it may have happened) looks for the instance by its label first; reads are retried", async () => {
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    fake.interrupt(1, () => HttpResponse.text("upstream failed", { status: 503 }));
    const created = await vast.provision({ cluster, count: 1, ...call() });
    const kinds = fake.requests.map((request) => `${request.method} ${request.url.pathname}`);
    const [firstRent, secondRent] = kinds.flatMap((kind, index) => (kind.startsWith("PUT") ? [index] : []));
    expect(secondRent).toBeDefined();
    expect(kinds.slice(firstRent, secondRent)).toContain("GET /api/v1/instances/");
    expect(created.map((instance) => instance.id)).toEqual([...fake.instances.keys()].map(String));
    fake.interrupt(1, () => HttpResponse.text("upstream failed", { status: 503 }));
    expect(await vast.listInstances?.(call())).toHaveLength(1);
  });
});

describe("settings", () => {
  it("builds a v1 provider whose workers start over SSH", () => {
    const vast = provider();
    expect(whyNotProvider(vast)).toBeUndefined();
    expect(vast.launchWorker).toBe(launchSshWorker);
  });

  it("rejects bad settings with the field's path", () => {
    expect(() => VastAI({ minReliability: 2 })).toThrow(ConfigurationError);
    try {
      VastAI({ ssh: "telnet" as never });
      expect.unreachable('VastAI accepted ssh: "telnet"');
    } catch (error) {
      expect((error as ConfigurationError).issues.map((issue) => issue.path)).toEqual(["VastAI.ssh"]);
    }
  });

  it("createProviderFromConfig takes a skyward.toml table (min_reliability, geolocation)", async () => {
    const vast = createProviderFromConfig({
      apiKey: TEST_API_KEY,
      minReliability: 0.99,
      geolocation: "US",
      keysDirectory: keys.keysDirectory,
    });
    expect(vast.name).toBe("vastai");
    expect((await vast.offers({ query: rtx4090, ...call() })).map((offer) => offer.id)).toEqual([
      "vastai:7100001",
    ]);
    await expect(
      createProviderFromEntry({
        name: "market",
        type: "vastai",
        package: "@skyward/provider-vastai",
        settings: { minReliability: "high" },
      }),
    ).rejects.toMatchObject({ issues: [{ path: "providers.market.minReliability" }] });
  });
});

describe("the offer cache", () => {
  // The core caches offers on disk by provider name and cacheKey (for an hour: a marketplace). Two
  // providers that differ in one setting the search depends on must not share them: each test lets the
  // first cache its offers, then asks the second through the same cache (the core's own code).
  let home = "";
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "skyward-vast-offer-cache-"));
    vi.stubEnv("SKYWARD_HOME", home);
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(home, { recursive: true, force: true });
  });
  const cached = async (settings: VastAISettings, query: OfferQuery = rtx4090) =>
    (await cachedOffers(provider(settings), query, call())).map((offer) => [
      offer.id,
      offer.onDemandPrice,
      offer.spotPrice,
    ]);

  it("is not shared by providers of other geolocations", async () => {
    expect(await cached({})).toEqual([
      ["vastai:7100002", 0.355, 0.1978],
      ["vastai:7100001", 0.412, 0.2606],
    ]);
    expect(await cached({ geolocation: "US" })).toEqual([["vastai:7100001", 0.412, 0.2606]]);
  });

  it("is not shared by providers bidding with another bidMultiplier", async () => {
    await cached({});
    // Bids of 1.5 × the minimum: 7100002 bids 0.225 (+ 0.0178 of charges), 7100001 0.3 (+ 0.0206).
    expect(await cached({ bidMultiplier: 1.5 })).toEqual([
      ["vastai:7100002", 0.355, 0.2428],
      ["vastai:7100001", 0.412, 0.3206],
    ]);
  });

  it("is not shared by providers asking for other disk sizes", async () => {
    await cached({});
    // Every fake host has 500 GB of disk: none fits 600 GB.
    expect(await cached({ diskGb: 600 })).toEqual([]);
  });

  it("is not shared by providers reached over proxied SSH", async () => {
    await cached({});
    // 7100006 opens no direct port: offered only when SSH goes through Vast.ai's proxy.
    expect((await cached({ ssh: "proxy" })).map(([id]) => id)).toEqual([
      "vastai:7100002",
      "vastai:7100006",
      "vastai:7100001",
    ]);
  });

  it("is not shared by providers with another searchLimit", async () => {
    await cached({});
    // Two asks per search, cheapest first: the RTX 4090D (another accelerator, dropped) and 7100002.
    expect(await cached({ searchLimit: 2 })).toEqual([["vastai:7100002", 0.355, 0.1978]]);
  });

  it("is not shared by providers whose images need another CUDA", async () => {
    fake.addOffer(7100002, { id: 7400006, cuda_max_good: 12.9, dph_total: 0.5, dph_base: 0.48 });
    await cached({});
    expect((await cached({ dockerImage: containers.cuda("12.9") })).map(([id]) => id)).toEqual([
      "vastai:7400006",
    ]);
  });

  it("is shared by equal settings", async () => {
    await cached({});
    const asked = fake.to("/api/v0/bundles/").length;
    await cached({});
    expect(fake.to("/api/v0/bundles/")).toHaveLength(asked);
  });
});

describe("what real accounts do", () => {
  it("instances share no network: a distributed-training plugin on several nodes is refused before anything starts", () => {
    expectPeerPluginRefused(provider, accelerators.RTX_4090());
    expect(fake.requests).toEqual([]);
  });

  it("sky.compute with such a plugin on several Vast.ai nodes fails at once, asking Vast.ai nothing", async () => {
    const ddp = Plugin.create("ddp").withPeerNetwork();
    await expect(
      compute({
        provider: provider(),
        accelerator: accelerators.RTX_4090(),
        nodes: 2,
        plugins: [ddp],
        options: { console: false },
      }),
    ).rejects.toSatisfy(ConfigurationError.isInstance);
    expect(fake.requests).toEqual([]);
  });

  it("a bad key answering 404 to renting is reported as a rejected key, not as no capacity", async () => {
    const { cluster: offered } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    // Each provider object provisions a cluster it prepared: its first call is the rent.
    const preparedBy = (vast: ReturnType<typeof provider>) =>
      vast.prepare({ spec: offered.spec, offer: offered.offer, poolId: offered.poolId, ...call() });
    const revoked = provider({ apiKey: "vast_revoked_key" });
    const error = await revoked
      .provision({ cluster: await preparedBy(revoked), count: 1, ...call() })
      .catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(false);
    expect((error as VastApiError).statusCode).toBe(401);
    expect((error as Error).message).toMatch(/rejected the API key while renting offer 7100002/);
    // With a good key a 404 to renting is the offer gone: the key is checked once, then believed.
    const vast = provider();
    const cluster = await preparedBy(vast);
    fake.interrupt(1, () => HttpResponse.json({ success: false, error: "no_such_ask" }, { status: 404 }));
    const [instance] = await vast.provision({ cluster, count: 1, ...call() });
    expect(instance?.id).toBeDefined();
  });

  it("a too-low bid leaves no stopped instance: the one Vast.ai created is destroyed, by the id in the refusal", async () => {
    const { vast, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090(), allocation: "spot" });
    // The minimum bids rose since the search, past the bids placed (min_bid × 1.2).
    fake.minBidNow.set(7100002, 0.2);
    fake.minBidNow.set(7100001, 0.3);
    const error = await vast.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    const [reason] = (error as NoCapacityError).attempts.map((attempt) => attempt.reason);
    expect(reason).toMatch(
      /^spot: bid on offer 7100002: .*below the current minimum bid.*\(instance 31000001, created stopped, was destroyed\); bid on offer 7100001: .*\(instance 31000002, created stopped, was destroyed\)/,
    );
    expect(fake.to("/api/v0/instances/31000001/", "DELETE")).toHaveLength(1);
    expect([...fake.instances.values()]).toEqual([]);
  });

  it("maxHourlyCost is checked on the market actually rented: no on-demand fallback above it", async () => {
    // Spot if available, at most $0.30/h: 7100002 costs 0.355 on demand, 0.1978 as a bid.
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "spot-if-available",
      maxHourlyCost: 0.3,
    });
    expect([cluster.offer.spotPrice, cluster.offer.onDemandPrice]).toEqual([0.1978, null]);
    for (const [ask, minimum] of [
      [7100002, 0.5],
      [7100001, 0.5],
    ] as const)
      fake.minBidNow.set(ask, minimum);
    const error = await vast.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    // No on-demand rental was tried: every on-demand price found was over the cap.
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT").every((request) => "price" in (request.body as object))).toBe(
      true,
    );
    expect([...fake.instances.values()]).toEqual([]);
  });

  it("cheapest compares the real prices of both markets", async () => {
    const [offer] = await provider().offers({ query: { ...rtx4090, allocation: "cheapest" }, ...call() });
    expect(offer).toMatchObject({ id: "vastai:7100002", spotPrice: 0.1978, onDemandPrice: 0.355 });
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "cheapest",
    });
    const [instance] = await vast.provision({ cluster, count: 1, ...call() });
    expect(instance).toMatchObject({ spot: true, hourlyPrice: 0.1978 });
  });

  it("several nodes in a row are created under the create endpoint's rate limit (one per interval, penalty)", async () => {
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    const created = await vast.provision({ cluster, count: 2, ...call() });
    expect(created).toHaveLength(2);
    const [first, second] = fake.to(/^\/api\/v0\/asks\//, "PUT");
    expect(first && second).toBeTruthy();
    // Without the spacing the fake refuses the second create in a row and starts its penalty (here the
    // real 4.5 s interval, so that a slow machine cannot space the two calls by chance).
    fake.reset();
    fake.rateLimit = { intervalMs: 4500, penaltyMs: 12_000 };
    const eager = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      { createIntervalMs: 0, rateLimitPenaltyMs: 0, maxRetries: 0 },
    );
    const partial = await eager.vast.provision({ cluster: eager.cluster, count: 2, ...call() });
    expect(partial).toHaveLength(1);
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT")).toHaveLength(2);
    // A limiter that waits out the penalty gets past a refusal caused by someone else's call.
    fake.reset();
    const { vast: patient, cluster: other } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    fake.interrupt(1, () =>
      HttpResponse.json({ detail: "API requests too frequent: endpoint threshold=4.5" }, { status: 429 }),
    );
    expect(await patient.provision({ cluster: other, count: 2, ...call() })).toHaveLength(2);
  });

  it("by default spaces creates by Vast.ai's 4.5 s limit plus a 10 % margin, so the real limit never refuses one", async () => {
    fake.rateLimit = { intervalMs: 4500, penaltyMs: 12_000 };
    const vast = VastAI({
      apiKey: TEST_API_KEY,
      keysDirectory: keys.keysDirectory,
      retryDelayMs: 1,
      maxRetries: 0,
    });
    const spec = resolvePoolSpec(
      toSpec({ accelerator: accelerators.RTX_4090(), allocation: "on-demand", provider: vast }),
      poolOptions({}),
    );
    const [offer] = await vast.offers({ query: offerQuery(spec), ...call() });
    if (!offer) throw new Error("no offer");
    const cluster = await vast.prepare({ spec, offer, ...call() });
    expect(await vast.provision({ cluster, count: 2, ...call() })).toHaveLength(2);
    const [first, second] = fake.to(/^\/api\/v0\/asks\//, "PUT");
    // The pacer spaces departures by 4,950 ms; the fake stamps arrivals, which a loaded machine can
    // bring up to a few hundred ms closer. What matters is the margin over Vast.ai's 4.5 s limit.
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(4700);
  }, 60_000);

  it("lists through the paged v1 endpoint; one odd instance (null port map, odd fields) does not fail the list", async () => {
    const { vast, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    const created = await vast.provision({ cluster, count: 2, ...call() });
    fake.pageSize = 1;
    fake.addForeignInstance({ id: 42, label: null, ports: null, actual_status: null });
    fake.addForeignInstance({
      id: 43,
      label: `${cluster.id} vastai:7100002`,
      ports: { "22/tcp": null },
      public_ipaddr: 17,
      actual_status: "exited",
    });
    const listed = (await vast.listInstances?.(call())) ?? [];
    expect(listed.map((instance) => instance.id).sort()).toEqual(
      [...created.map((entry) => entry.id), "43"].sort(),
    );
    expect(fake.to("/api/v1/instances/", "GET").length).toBeGreaterThanOrEqual(4);
    expect(fake.to("/api/v0/instances/", "GET")).toEqual([]);
    const [page] = fake.to("/api/v1/instances/", "GET");
    expect(page?.url.searchParams.get("limit")).toBe("25");
    await vast.teardown({ cluster, ...call() });
    expect([...fake.instances.keys()]).toEqual([42]);
  });
});

describe("root", () => {
  it("is Skyward's directory on each instance, {id} its id; the watchdog reads the worker's pid file there", async () => {
    const { vast, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      { root: "/scratch/skyward-{id}" },
    );
    const [created] = await vast.provision({ cluster, count: 1, ...call() });
    const body = fake.to(/^\/api\/v0\/asks\//, "PUT")[0]?.body as { onstart?: string } | undefined;
    const onstart = String(body?.onstart);
    expect(onstart).toContain("[ -f /scratch/skyward-$CONTAINER_ID/worker.pid ]");
    await vast.getInstance({ cluster, id: created?.id ?? "", ...call() });
    const running = await vast.getInstance({ cluster, id: created?.id ?? "", ...call() });
    expect(running?.ssh?.root).toBe(`/scratch/skyward-${created?.id}`);
    expect(() => VastAI({ root: "relative" })).toThrow(/VastAI\.root/);
    expect(() => VastAI({ root: "/x/$(reboot)" })).toThrow(/VastAI\.root/);
  });

  it("too long for Vast.ai's 4,048-character onstart is refused by name before any call, from code and from a config table", () => {
    const root = `/scratch/${"d".repeat(2000)}`;
    for (const make of [() => VastAI({ root }), () => createProviderFromConfig({ root })]) {
      const error = (() => {
        try {
          make();
        } catch (caught) {
          return caught;
        }
      })();
      expect(ConfigurationError.isInstance(error)).toBe(true);
      const [issue] = (error as ConfigurationError).issues;
      expect(issue?.path).toMatch(/^(VastAI\.)?root$/);
      expect(issue?.message).toMatch(/4048/);
    }
    expect(fake.requests).toEqual([]);
    // A long root that fits is kept.
    expect(() => VastAI({ root: `/scratch/${"d".repeat(200)}` })).not.toThrow();
  });
});

describe("container images", () => {
  it("rents with a sky.containers image: its tag goes into the create request", async () => {
    const image = containers.cuda("12.9", { variant: "runtime", ubuntu: "24.04", repository: "nvidia" });
    // A CUDA 12.9 image runs only on hosts whose driver goes to 12.9 (the fixture's go to 12.8).
    fake.addOffer(7100002, { id: 7400006, cuda_max_good: 12.9 });
    const { vast, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      { dockerImage: image },
    );
    expect(cluster.specific.image).toBe("nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04");
    await vast.provision({ cluster, count: 1, ...call() });
    expect(fake.to(/^\/api\/v0\/asks\//, "PUT")[0]?.body).toMatchObject({
      image: "nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04",
    });
  });

  it("rents with a DockerImage.of image or a plain tag string", async () => {
    for (const [dockerImage, tag] of [
      [DockerImage.of("ghcr.io/acme/trainer:1.4", { cuda: "12.8" }), "ghcr.io/acme/trainer:1.4"],
      ["pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime", "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"],
    ] as const) {
      fake.reset();
      const { vast, cluster } = await clusterFor(
        { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
        undefined,
        { dockerImage },
      );
      await vast.provision({ cluster, count: 1, ...call() });
      expect(fake.to(/^\/api\/v0\/asks\//, "PUT")[0]?.body).toMatchObject({ image: tag });
    }
  });

  it("an image that states its CUDA rents only hosts whose driver runs it, the first node and the next", async () => {
    // Every fixture host's driver goes up to CUDA 12.8; two more go to 12.9 ($0.50) and 13.0 ($0.60).
    fake.addOffer(7100002, { id: 7400006, cuda_max_good: 12.9, dph_total: 0.5, dph_base: 0.48 });
    fake.addOffer(7100002, { id: 7400007, cuda_max_good: 13, dph_total: 0.6, dph_base: 0.58 });
    const { vast, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      undefined,
      { dockerImage: containers.cuda("12.9") },
    );
    expect(cluster.offer.id).toBe("vastai:7400006");
    const instances = await vast.provision({ cluster, count: 2, ...call() });
    expect(instances).toHaveLength(2);
    const rents = fake.to(/^\/api\/v0\/asks\/\d+\/$/, "PUT").map((request) => request.url.pathname);
    expect([...new Set(rents)]).toEqual(["/api/v0/asks/7400006/", "/api/v0/asks/7400007/"]);
    for (const search of fake.to("/api/v0/bundles/", "POST"))
      expect(search.body).toMatchObject({ cuda_max_good: { gte: 12.9 } });
  });

  it("the larger of minCuda and the image's CUDA; a tag string or an image without CUDA leaves minCuda", async () => {
    const asked = async (settings: VastAISettings) => {
      fake.reset();
      await provider(settings).offers({ query: rtx4090, ...call() });
      return fake
        .to("/api/v0/bundles/", "POST")
        .map((request) => (request.body as Record<string, unknown>).cuda_max_good);
    };
    expect(await asked({ dockerImage: containers.cuda("12.9"), minCuda: 13 })).toEqual([
      { gte: 13 },
      { gte: 13 },
    ]);
    expect(await asked({ dockerImage: containers.cuda("12.4") })).toEqual([{ gte: 12.4 }, { gte: 12.4 }]);
    expect(await asked({ dockerImage: containers.pytorch("2.8") })).toEqual([{ gte: 12.9 }, { gte: 12.9 }]);
    expect(
      await asked({ dockerImage: DockerImage.of("ghcr.io/acme/trainer:1.4", { cuda: "12.8" }), minCuda: 11 }),
    ).toEqual([{ gte: 12.8 }, { gte: 12.8 }]);
    expect(await asked({ dockerImage: containers.ubuntu("24.04") })).toEqual([{ gte: 12 }, { gte: 12 }]);
    expect(await asked({ dockerImage: "nvidia/cuda:12.9.1-runtime-ubuntu24.04" })).toEqual([
      { gte: 12 },
      { gte: 12 },
    ]);
    // From skyward.toml the image is a tag: minCuda alone.
    fake.reset();
    await createProviderFromConfig({
      apiKey: TEST_API_KEY,
      dockerImage: "ubuntu:24.04",
      minCuda: 12.6,
    }).offers({
      query: rtx4090,
      ...call(),
    });
    expect(fake.to("/api/v0/bundles/", "POST")[0]?.body).toMatchObject({ cuda_max_good: { gte: 12.6 } });
  });

  it("refuses an image that is neither a tag nor a DockerImage, naming the field", () => {
    expect(() => provider({ dockerImage: "Not An Image" })).toThrow(
      /VastAI\.dockerImage: expected a Docker image reference/,
    );
    expect(() => provider({ dockerImage: 12 as never })).toThrow(
      /VastAI\.dockerImage: expected an image tag string or a DockerImage/,
    );
  });
});

describe("volumes", () => {
  it("are refused through sky.compute, naming each, before any instance is rented", async () => {
    const error = await compute({
      provider: provider(),
      accelerator: accelerators.RTX_4090({ count: 1 }),
      volumes: [{ bucket: "datasets", mount: "/data", storage: { endpoint: "https://s3.example.com" } }],
      options: { console: false },
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(ConfigurationError.isInstance(error)).toBe(true);
    const issues = (error as ConfigurationError).issues;
    expect(issues.map((issue) => issue.path)).toEqual(["volumes[0]"]);
    expect(issues[0]?.message).toMatch(
      /^the Vast\.ai provider does not mount volumes \(datasets on \/data\): its instances are containers without FUSE/,
    );
    expect(fake.rented.size).toBe(0);
    expect(fake.instances.size).toBe(0);
  });
});
