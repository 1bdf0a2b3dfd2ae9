import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  accelerators,
  ConfigurationError,
  containers,
  DockerImage,
  NoCapacityError,
  type PoolSpec,
  ProvisionError,
  options as poolOptions,
  type SpecInput,
  spec as toSpec,
} from "@skyward/core";
import { createProviderFromEntry } from "@skyward/core/config";
import {
  type Cluster,
  type Instance,
  type Offer,
  type OfferQuery,
  offerQuery,
  resolvePoolSpec,
  whyNotProvider,
} from "@skyward/core/contract";
import { launchSshWorker } from "@skyward/ssh";
import { HttpResponse } from "msw";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type FakePod, type FakeRunPod, startFakeRunPod, TEST_API_KEY } from "../test/fake-runpod.js";
import { RunPodApiError } from "./runpod-api.js";
import {
  createProviderFromConfig,
  DEFAULT_RUNPOD_IMAGE,
  RunPod,
  type RunPodClusterData,
  type RunPodSettings,
} from "./runpod-provider.js";

let fake: FakeRunPod;
let keysDirectory: string;
const call = () => ({ signal: AbortSignal.timeout(10_000) });

beforeAll(async () => {
  fake = startFakeRunPod();
  fake.server.listen({ onUnhandledFrame: "error" });
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-runpod-keys-"));
});
afterAll(async () => {
  fake.server.close();
  await rm(keysDirectory, { recursive: true, force: true });
});
beforeEach(() => fake.reset());
afterEach(() => fake.server.resetHandlers());

function provider(settings: RunPodSettings = {}) {
  return RunPod({ apiKey: TEST_API_KEY, keysDirectory, retryDelayMs: 1, ...settings });
}

function poolSpec(input: Omit<SpecInput, "provider">, runpod = provider()): PoolSpec {
  return resolvePoolSpec(toSpec({ ...input, provider: runpod }), poolOptions({}));
}

const a100Query: OfferQuery = { accelerator: { name: "A100", count: 2 }, allocation: "spot-if-available" };

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  pick: (offers: readonly Offer[]) => Offer | undefined,
) {
  const runpod = provider();
  const spec = poolSpec(input, runpod);
  const offer = pick(await runpod.offers({ query: offerQuery(spec), ...call() }));
  if (!offer) throw new Error("no offer picked");
  return { runpod, cluster: await runpod.prepare({ spec, offer, ...call() }) };
}

describe("offers", () => {
  it("asks gpuTypes for the lowest price of a pod of the requested GPU count in each cloud, with the bearer key", async () => {
    await provider().offers({ query: { ...a100Query, vcpus: 8, memoryGb: 64 }, ...call() });
    const [request] = fake.operations("SkywardGpuTypes");
    expect(request?.method).toBe("POST");
    expect(request?.url.href).toBe("https://api.runpod.io/graphql");
    expect(request?.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(request?.url.search).toBe(""); // never ?api_key=…
    expect(request?.query).toContain(
      "secureLowest: lowestPrice(input: {gpuCount: 2, secureCloud: true, minVcpuCount: 8, minMemoryInGb: 64})",
    );
    expect(request?.query).toContain(
      "communityLowest: lowestPrice(input: {gpuCount: 2, secureCloud: false, minVcpuCount: 8, minMemoryInGb: 64})",
    );
    expect(request?.query).toMatch(/securePrice communityPrice secureSpotPrice communitySpotPrice/);
  });

  it("parses one offer per GPU type and cloud, prices per pod (per GPU × count), spot = lowest bid", async () => {
    const offers = await provider().offers({ query: a100Query, ...call() });
    expect(offers.map((offer) => [offer.id, offer.spotPrice, offer.onDemandPrice])).toEqual([
      ["runpod:secure:NVIDIA A100 80GB PCIe:x2", 1.64, 3.28],
      ["runpod:community:NVIDIA A100 80GB PCIe:x2", 1.2, 2.38],
      ["runpod:secure:NVIDIA A100-SXM4-80GB:x2", 2.1, 3.78],
    ]);
    const [first] = offers;
    expect(first).toMatchObject({
      provider: "runpod",
      instanceType: "2x NVIDIA A100 80GB PCIe (secure cloud)",
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
      vcpus: 8,
      memoryGb: 117,
      architecture: "x86_64",
      region: "any",
      specific: {
        kind: "gpu",
        gpuTypeId: "NVIDIA A100 80GB PCIe",
        gpuCount: 2,
        cloudType: "SECURE",
        bidPerGpu: 0.82,
      },
    });
    expect(Date.parse(first?.pricesAsOf ?? "")).not.toBeNaN();
  });

  it("honours the cloud type, the allocation, GPU memory, the count limit per cloud and the price cap", async () => {
    const secure = await provider({ cloudType: "secure" }).offers({ query: a100Query, ...call() });
    expect(secure.every((offer) => offer.id.startsWith("runpod:secure:"))).toBe(true);
    // H100 SXM has no spot price: an on-demand offer only, and none under allocation "spot".
    const h100 = await provider().offers({
      query: { accelerator: { name: "H100", count: 1 }, allocation: "spot-if-available" },
      ...call(),
    });
    expect(h100.map((offer) => [offer.spotPrice, offer.onDemandPrice])).toEqual([[null, 2.99]]);
    expect(
      await provider().offers({
        query: { accelerator: { name: "H100", count: 1 }, allocation: "spot" },
        ...call(),
      }),
    ).toEqual([]);
    // Community cloud has at most 4 A100 PCIe per pod.
    const eight = await provider().offers({
      query: { accelerator: { name: "A100", count: 8 }, allocation: "on-demand" },
      ...call(),
    });
    expect(eight.map((offer) => offer.id)).toEqual([
      "runpod:secure:NVIDIA A100 80GB PCIe:x8",
      "runpod:secure:NVIDIA A100-SXM4-80GB:x8",
    ]);
    const big = await provider().offers({
      query: { accelerator: { name: "RTX_4090", count: 1, memoryGb: 48 }, allocation: "cheapest" },
      ...call(),
    });
    expect(big).toEqual([]);
    const capped = await provider().offers({
      query: { ...a100Query, allocation: "on-demand", maxHourlyCost: 3 },
      ...call(),
    });
    expect(capped.map((offer) => offer.id)).toEqual(["runpod:community:NVIDIA A100 80GB PCIe:x2"]);
  });

  it("returns nothing for arm64, without asking RunPod", async () => {
    expect(await provider().offers({ query: { ...a100Query, architecture: "arm64" }, ...call() })).toEqual(
      [],
    );
    expect(fake.requests).toEqual([]);
  });

  it("offers CPU pods: the smallest size of each flavor meeting vCPUs and memory, priced by its specifics", async () => {
    const offers = await provider().offers({
      query: { accelerator: null, vcpus: 3, memoryGb: 8, allocation: "on-demand" },
      ...call(),
    });
    const [prices] = fake.operations("SkywardCpuPrices");
    expect(prices?.query).toContain(
      'f0: cpuFlavors(input: {id: "cpu3c"}) { id specifics(input: {instanceId: "cpu3c-4-8"}) { stockStatus securePrice } }',
    );
    expect(prices?.query).toContain(
      'f1: cpuFlavors(input: {id: "cpu3g"}) { id specifics(input: {instanceId: "cpu3g-4-16"})',
    );
    expect(
      offers.map((offer) => [offer.id, offer.vcpus, offer.memoryGb, offer.onDemandPrice, offer.spotPrice]),
    ).toEqual([
      ["runpod:cpu:cpu3c-4-8", 4, 8, 0.12, null],
      ["runpod:cpu:cpu3g-4-16", 4, 16, 0.16, null],
      ["runpod:cpu:cpu5c-4-8", 4, 8, 0.14, null],
    ]);
    // A size with no price (out of stock) is left out; CPU pods are never spot.
    const small = await provider().offers({
      query: { accelerator: null, allocation: "cheapest" },
      ...call(),
    });
    expect(small.map((offer) => offer.instanceType)).toEqual(["cpu3c-2-4", "cpu3g-2-8"]);
    expect(await provider().offers({ query: { accelerator: null, allocation: "spot" }, ...call() })).toEqual(
      [],
    );
    expect(
      await provider({ cpuFlavorIds: ["cpu3g"] }).offers({
        query: { accelerator: null, allocation: "cheapest" },
        ...call(),
      }),
    ).toHaveLength(1);
  });
});

describe("prepare", () => {
  it("generates the SSH key pair once (private key 0600) and carries the public key for PUBLIC_KEY", async () => {
    const { cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }) },
      (offers) => offers[0],
    );
    expect(cluster.id).toMatch(/^skyward-[0-9a-f]{8}$/);
    expect(cluster.ssh).toEqual({
      user: "root",
      identityFile: join(keysDirectory, "runpod_ed25519"),
      sudo: false,
    });
    expect(cluster.specific.publicKey).toMatch(/^ssh-ed25519 AAAA/);
    expect(cluster.specific.image).toBe(DEFAULT_RUNPOD_IMAGE);
    expect((await stat(cluster.specific.identityFile)).mode & 0o777).toBe(0o600);
    const again = await clusterFor({}, (offers) => offers[0]);
    expect(again.cluster.specific.publicKey).toBe(cluster.specific.publicKey);
    expect(again.cluster.id).not.toBe(cluster.id);
  });
});

describe("pool ids", () => {
  it("a pool id given to prepare reaches the pods' env and their skyward:pool tag", async () => {
    const runpod = provider();
    const spec = resolvePoolSpec(toSpec({ provider: runpod }), poolOptions({}));
    const [offer] = await runpod.offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() });
    const cluster = await runpod.prepare({ spec, offer: offer as Offer, ...call(), poolId: "a1b2c3d4" });
    expect(cluster.poolId).toBe("a1b2c3d4");
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    expect(fake.pods.get(created?.id ?? "")?.env.SKYWARD_POOL).toBe("a1b2c3d4");
    const [listed] = (await runpod.listInstances?.(call())) ?? [];
    expect(listed?.tags).toMatchObject({ "skyward:cluster": cluster.id, "skyward:pool": "a1b2c3d4" });
  });
});

describe("provision", () => {
  it("deploys an on-demand GPU pod with port 22/tcp, the image, disk sizes, the env and a public IP", async () => {
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }), allocation: "on-demand", diskGb: 80 },
      (offers) => offers.find((offer) => offer.id === "runpod:secure:NVIDIA A100 80GB PCIe:x1"),
    );
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    const [request] = fake.operations("SkywardDeployOnDemand");
    expect(request?.query).toContain("podFindAndDeployOnDemand(input: $input)");
    expect(request?.variables).toEqual({
      input: {
        name: `${cluster.id}-0`,
        imageName: DEFAULT_RUNPOD_IMAGE,
        gpuTypeId: "NVIDIA A100 80GB PCIe",
        gpuCount: 1,
        cloudType: "SECURE",
        containerDiskInGb: 80,
        volumeInGb: 0,
        ports: "22/tcp",
        startSsh: true,
        supportPublicIp: true,
        dockerArgs: "",
        env: [
          { key: "PUBLIC_KEY", value: cluster.specific.publicKey },
          { key: "SKYWARD_CLUSTER", value: cluster.id },
          { key: "SKYWARD_OFFER", value: cluster.offer.id },
          { key: "SKYWARD_SPOT", value: "0" },
        ],
      },
    });
    expect(instance).toMatchObject({
      status: "pending",
      ssh: null,
      spot: false,
      hourlyPrice: 1.64,
      offerId: cluster.offer.id,
      tags: { "skyward:cluster": cluster.id, "runpod:name": `${cluster.id}-0` },
    });
  });

  it("rents an interruptible pod with bidPerGpu = the spot price per GPU", async () => {
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 2 }), allocation: "spot" },
      (offers) => offers.find((offer) => offer.id === "runpod:community:NVIDIA A100 80GB PCIe:x2"),
    );
    const instances = await runpod.provision({ cluster, count: 2, ...call() });
    const rents = fake.operations("SkywardRentInterruptable");
    expect(rents).toHaveLength(2);
    expect(rents[0]?.variables?.input).toMatchObject({
      bidPerGpu: 0.6,
      gpuCount: 2,
      cloudType: "COMMUNITY",
      gpuTypeId: "NVIDIA A100 80GB PCIe",
    });
    expect(rents.map((request) => (request.variables?.input as { name?: string } | undefined)?.name)).toEqual(
      [`${cluster.id}-0`, `${cluster.id}-1`],
    );
    expect(instances.map((instance) => [instance.spot, instance.hourlyPrice])).toEqual([
      [true, 1.2],
      [true, 1.2],
    ]);
  });

  it("spot-if-available falls back to on-demand when the spot market is empty", async () => {
    fake.capacity.spot = 1;
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }) },
      (offers) => offers[0],
    );
    const instances = await runpod.provision({ cluster, count: 3, ...call() });
    expect(instances.map((instance) => instance.spot)).toEqual([true, false, false]);
    expect(fake.operations("SkywardRentInterruptable")).toHaveLength(2);
    expect(fake.operations("SkywardDeployOnDemand")).toHaveLength(2);
  });

  it("returns the pods it got when capacity runs short, and throws NoCapacityError when it got none", async () => {
    fake.capacity.onDemand = 1;
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }), allocation: "on-demand" },
      (offers) => offers[0],
    );
    expect(await runpod.provision({ cluster, count: 3, ...call() })).toHaveLength(1);
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts).toEqual([
      {
        provider: "runpod",
        offer: cluster.offer.instanceType,
        reason:
          "on-demand: There are no longer any instances available with the requested specifications. Please refresh and try again.",
      },
    ]);
  });

  it("creates CPU pods through REST v1 with computeType CPU, the flavor and vCPU count", async () => {
    const { runpod, cluster } = await clusterFor({}, (offers) =>
      offers.find((offer) => offer.instanceType === "cpu3g-2-8"),
    );
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    const request = fake.requests.find((entry) => entry.url.href === "https://rest.runpod.io/v1/pods");
    expect(request?.method).toBe("POST");
    expect(request?.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(request?.body).toEqual({
      name: `${cluster.id}-0`,
      imageName: DEFAULT_RUNPOD_IMAGE,
      computeType: "CPU",
      cloudType: "SECURE",
      cpuFlavorIds: ["cpu3g"],
      vcpuCount: 2,
      containerDiskInGb: 50,
      volumeInGb: 0,
      ports: ["22/tcp"],
      env: {
        PUBLIC_KEY: cluster.specific.publicKey,
        SKYWARD_CLUSTER: cluster.id,
        SKYWARD_OFFER: "runpod:cpu:cpu3g-2-8",
        SKYWARD_SPOT: "0",
      },
      supportPublicIp: true,
    });
    expect(instance).toMatchObject({
      status: "pending",
      hourlyPrice: 0.08,
      spot: false,
      offerId: "runpod:cpu:cpu3g-2-8",
    });
  });
});

describe("getInstance, terminate, teardown, listInstances", () => {
  let runpod: ReturnType<typeof provider>;
  let cluster: Cluster<RunPodClusterData>;

  beforeEach(async () => {
    ({ runpod, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090({ count: 1 }), allocation: "on-demand" },
      (offers) => offers[0],
    ));
  });

  it("reads the public IP and the public port mapped to 22 once the pod runs", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    const first = await runpod.getInstance({ cluster, id, ...call() });
    expect(first).toMatchObject({ id, status: "pending", ssh: null, publicIp: null });
    const second = await runpod.getInstance({ cluster, id, ...call() });
    const pod = fake.pods.get(id);
    expect(second).toMatchObject({
      id,
      status: "running",
      publicIp: pod?.publicIp,
      privateIp: pod?.publicIp,
      ssh: {
        host: pod?.publicIp,
        port: pod?.sshPort,
        user: "root",
        identityFile: cluster.specific.identityFile,
      },
      offerId: cluster.offer.id,
      tags: { "skyward:cluster": cluster.id },
    });
    expect(Date.now() - (second?.createdAt ?? 0)).toBeGreaterThanOrEqual(42_000);
    const [lookup] = fake.operations("SkywardPod");
    expect(lookup?.variables).toEqual({ podId: id });
    expect(await runpod.getInstance({ cluster, id: "nosuchpod", ...call() })).toBeNull();
  });

  it("terminates idempotently: twice, and ids RunPod does not know", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    await runpod.terminate({ cluster, ids: [id], ...call() });
    expect(fake.operations("SkywardTerminate")[0]?.variables).toEqual({ input: { podId: id } });
    expect(fake.pods.has(id)).toBe(false);
    await runpod.terminate({ cluster, ids: [id, "nosuchpod"], ...call() });
    await runpod.terminate({ cluster, ids: [], ...call() });
    expect(await runpod.getInstance({ cluster, id, ...call() })).toBeNull();
  });

  it("teardown terminates the pods the cluster still has, and only those", async () => {
    await runpod.provision({ cluster, count: 2, ...call() });
    const other = await clusterFor(
      { accelerator: accelerators.RTX_4090({ count: 1 }), allocation: "on-demand" },
      (offers) => offers[0],
    );
    const [foreign] = await other.runpod.provision({ cluster: other.cluster, count: 1, ...call() });
    await runpod.teardown({ cluster, ...call() });
    expect([...fake.pods.keys()]).toEqual([foreign?.id]);
    await runpod.teardown({ cluster, ...call() });
  });

  it("listInstances finds Skyward's pods by their env, not other pods", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    fake.pods.set("handmade", {
      ...(fake.pods.get(created?.id ?? "") as FakePod),
      id: "handmade",
      env: { JUPYTER_PASSWORD: "x" },
    });
    const listed = await runpod.listInstances?.(call());
    expect(
      listed?.map((instance) => [instance.id, instance.tags["skyward:cluster"], instance.offerId]),
    ).toEqual([[created?.id, cluster.id, cluster.offer.id]]);
  });

  it("only prepare creates the key pair: offers, listInstances, getInstance and terminate write nothing", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    const elsewhere = await mkdtemp(join(tmpdir(), "skyward-runpod-read-only-"));
    try {
      const empty = join(elsewhere, "keys");
      const reader = provider({ keysDirectory: empty });
      expect(await reader.offers({ query: a100Query, ...call() })).not.toHaveLength(0);
      await reader.getInstance({ cluster, id, ...call() }); // pending
      expect(await reader.getInstance({ cluster, id, ...call() })).toMatchObject({ status: "running" });
      const [listed] = (await reader.listInstances?.(call())) ?? [];
      // Without a key pair on this machine the pod is listed without one.
      expect(listed?.ssh).toMatchObject({ user: "root" });
      expect(listed?.ssh).not.toHaveProperty("identityFile");
      // With one (made by prepare), listing points at it.
      const [own] = (await runpod.listInstances?.(call())) ?? [];
      expect(own?.ssh).toMatchObject({ identityFile: cluster.specific.identityFile });
      await reader.terminate({ cluster, ids: [id], ...call() });
      await expect(stat(empty)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it("selfDestruct removes the pod with runpodctl and the pod-scoped key from PID 1's environment", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const op = runpod.selfDestruct({ cluster, instance: created as Instance });
    expect(op).toBe(
      `for kv in $(tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -E '^RUNPOD_API_KEY='); do export "$kv"; done; runpodctl remove pod ${created?.id}`,
    );
  });
});

describe("errors", () => {
  it("looks the API key up lazily, with a clear message when there is none", async () => {
    const saved = process.env.RUNPOD_API_KEY;
    delete process.env.RUNPOD_API_KEY;
    try {
      const runpod = RunPod({ keysDirectory });
      const error = await runpod.offers({ query: a100Query, ...call() }).catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).issues).toEqual([
        { path: "apiKey", message: "RunPod API key is missing: set RUNPOD_API_KEY or pass apiKey" },
      ]);
      expect(fake.requests).toEqual([]);
      process.env.RUNPOD_API_KEY = TEST_API_KEY;
      expect(await runpod.offers({ query: a100Query, ...call() })).toHaveLength(3);
    } finally {
      if (saved === undefined) delete process.env.RUNPOD_API_KEY;
      else process.env.RUNPOD_API_KEY = saved;
    }
  });

  it("without an API key, listing and terminating fail and create no key pair", async () => {
    const saved = process.env.RUNPOD_API_KEY;
    delete process.env.RUNPOD_API_KEY;
    const elsewhere = await mkdtemp(join(tmpdir(), "skyward-runpod-no-key-"));
    try {
      const empty = join(elsewhere, "keys");
      const runpod = RunPod({ keysDirectory: empty });
      await expect(runpod.listInstances?.(call())).rejects.toSatisfy(ConfigurationError.isInstance);
      const cluster = {} as Cluster<RunPodClusterData>;
      await expect(runpod.terminate({ cluster, ids: ["p1"], ...call() })).rejects.toThrow();
      await expect(stat(empty)).rejects.toMatchObject({ code: "ENOENT" });
      expect(fake.requests).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.RUNPOD_API_KEY;
      else process.env.RUNPOD_API_KEY = saved;
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it("a rejected key (401/403) fails at once, naming the fix and never the key", async () => {
    const error = await provider({ apiKey: "rp_wrong_key_123" })
      .offers({ query: a100Query, ...call() })
      .catch((caught: unknown) => caught);
    expect(RunPodApiError.isInstance(error) && ProvisionError.isInstance(error)).toBe(true);
    expect((error as RunPodApiError).statusCode).toBe(401);
    expect((error as RunPodApiError).isRetryable).toBe(false);
    expect((error as Error).message).toBe(
      "RunPod rejected the API key (HTTP 401) while listing GPU types and prices (POST /graphql): set RUNPOD_API_KEY to a valid key or pass apiKey",
    );
    expect(fake.requests).toHaveLength(1);
    fake.interrupt(1, () => HttpResponse.json({ error: "forbidden" }, { status: 403 }));
    const forbidden = await provider()
      .offers({ query: a100Query, ...call() })
      .catch((caught: unknown) => caught);
    expect((forbidden as RunPodApiError).statusCode).toBe(403);
    expect(JSON.stringify(forbidden)).not.toContain(TEST_API_KEY);
    expect(String((forbidden as Error).stack)).not.toContain(TEST_API_KEY);
  });

  it("rate limits (429) are retried with backoff, then fail clearly", async () => {
    fake.interrupt(2, () => HttpResponse.json({ message: "Too Many Requests" }, { status: 429 }));
    expect(await provider().offers({ query: a100Query, ...call() })).toHaveLength(3);
    expect(fake.operations("SkywardGpuTypes")).toHaveLength(3);

    fake.requests.length = 0;
    fake.interrupt(10, () => HttpResponse.json({ message: "Too Many Requests" }, { status: 429 }));
    const started = performance.now();
    const error = await provider({ maxRetries: 3, retryDelayMs: 20 })
      .offers({ query: a100Query, ...call() })
      .catch((caught: unknown) => caught);
    // 20 + 40 + 80 ms of backoff between four attempts.
    expect(performance.now() - started).toBeGreaterThanOrEqual(130);
    expect(fake.requests).toHaveLength(4);
    expect((error as RunPodApiError).statusCode).toBe(429);
    expect((error as RunPodApiError).isRetryable).toBe(true);
    expect((error as Error).message).toBe(
      "RunPod's rate limit (HTTP 429) persisted after 4 attempts while listing GPU types and prices (POST /graphql); try again later",
    );
  });

  it("a 5xx is retried for reads but never for creating a pod", async () => {
    fake.interrupt(1, () => HttpResponse.text("bad gateway", { status: 502 }));
    expect(await provider().offers({ query: a100Query, ...call() })).toHaveLength(3);
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 1 }), allocation: "on-demand" },
      (offers) => offers[0],
    );
    fake.requests.length = 0;
    fake.interrupt(1, () => HttpResponse.text("bad gateway", { status: 502 }));
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(fake.requests).toHaveLength(1);
    expect((error as RunPodApiError).statusCode).toBe(502);
    expect((error as Error).message).toBe(
      "RunPod's API answered HTTP 502 while deploying an on-demand pod (POST /graphql): bad gateway",
    );
  });

  it("an answer that is not understood fails with what was wrong", async () => {
    fake.interrupt(1, () => HttpResponse.json({ data: { gpuTypes: [{ displayName: "no id" }] } }));
    await expect(provider().offers({ query: a100Query, ...call() })).rejects.toThrow(
      "RunPod's answer to listing GPU types was not understood: gpuTypes.0.id: Invalid input: expected string, received undefined",
    );
  });

  it("an aborted call rejects with the signal's reason", async () => {
    const controller = new AbortController();
    controller.abort(new Error("pool gave up"));
    await expect(provider().offers({ query: a100Query, signal: controller.signal })).rejects.toThrow(
      "pool gave up",
    );
  });
});

describe("the test harness", () => {
  it("lets no request out of the process, and says which one it refused", async () => {
    // msw reports a request no handler matches on console.error: expected here, so checked rather
    // than printed into the test log (elsewhere it is printed, and the request fails the test).
    const reported = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      await expect(fetch("https://rest.runpod.io/v1/endpoints")).rejects.toThrow();
      expect(reported.mock.calls.flat().join("\n")).toContain("GET https://rest.runpod.io/v1/endpoints");
    } finally {
      reported.mockRestore();
    }
  });
});

describe("settings", () => {
  it("builds a v1 provider whose workers start over SSH", () => {
    const runpod = provider();
    expect(whyNotProvider(runpod)).toBeUndefined();
    expect(runpod.launchWorker).toBe(launchSshWorker);
  });

  it("rejects bad settings with the field's path", () => {
    expect(() => RunPod({ cloudType: "private" as never })).toThrow(ConfigurationError);
    try {
      RunPod({ containerDiskGb: 0, extra: 1 } as never);
    } catch (error) {
      expect((error as ConfigurationError).issues.map((issue) => issue.path)).toEqual([
        "RunPod.containerDiskGb",
        "RunPod.extra",
      ]);
    }
  });

  it("createProviderFromConfig builds it from a skyward.toml table, errors under the table's path", async () => {
    const runpod = createProviderFromConfig({ apiKey: TEST_API_KEY, cloudType: "community", keysDirectory });
    expect(runpod.name).toBe("runpod");
    const offers = await runpod.offers({ query: a100Query, ...call() });
    expect(offers.map((offer) => offer.id)).toEqual(["runpod:community:NVIDIA A100 80GB PCIe:x2"]);
    await expect(
      createProviderFromEntry({
        name: "gpus",
        type: "runpod",
        package: "@skyward/provider-runpod",
        settings: { cloudType: "moon" },
      }),
    ).rejects.toMatchObject({ issues: [{ path: "providers.gpus.cloudType" }] });
  });

  it("uses an injected fetch", async () => {
    const seen: string[] = [];
    const runpod = provider({
      fetch: async (input, init) => {
        seen.push(String(input instanceof Request ? input.url : input));
        return fetch(input, init);
      },
    });
    expect(await runpod.offers({ query: a100Query, ...call() })).toHaveLength(3);
    expect(seen).toEqual(["https://api.runpod.io/graphql"]);
  });
});

describe("container images", () => {
  async function deployedImage(containerImage: RunPodSettings["containerImage"]): Promise<unknown> {
    const runpod = provider({ containerImage });
    const spec = poolSpec({ accelerator: accelerators.A100({ count: 1 }), allocation: "on-demand" }, runpod);
    const offer = (await runpod.offers({ query: offerQuery(spec), ...call() }))[0];
    if (!offer) throw new Error("no offer");
    const cluster = await runpod.prepare({ spec, offer, ...call() });
    await runpod.provision({ cluster, count: 1, ...call() });
    const [request] = fake.operations("SkywardDeployOnDemand");
    return (request?.variables?.input as { imageName?: unknown } | undefined)?.imageName;
  }

  it("deploys pods from a sky.containers image, a DockerImage.of image or a tag string", async () => {
    expect(await deployedImage(containers.runpodPytorch("2.8"))).toBe(
      "runpod/pytorch:2.8.0-py3.13-cuda12.8.1-devel-ubuntu24.04",
    );
    fake.reset();
    expect(await deployedImage(DockerImage.of("ghcr.io/acme/trainer:1.4"))).toBe("ghcr.io/acme/trainer:1.4");
    fake.reset();
    expect(await deployedImage("runpod/base:1.0.3-cuda1281-ubuntu2204")).toBe(
      "runpod/base:1.0.3-cuda1281-ubuntu2204",
    );
  });

  it("deploys CPU pods from the image too", async () => {
    const runpod = provider({ containerImage: containers.ubuntu("22.04") });
    const spec = poolSpec({}, runpod);
    const offer = (await runpod.offers({ query: offerQuery(spec), ...call() })).find(
      (candidate) => candidate.instanceType === "cpu3g-2-8",
    );
    if (!offer) throw new Error("no offer");
    const cluster = await runpod.prepare({ spec, offer, ...call() });
    await runpod.provision({ cluster, count: 1, ...call() });
    const request = fake.requests.find((entry) => entry.url.href === "https://rest.runpod.io/v1/pods");
    expect(request?.body).toMatchObject({ imageName: "ubuntu:22.04" });
  });

  it("refuses an image that is neither a tag nor a DockerImage, naming the field", () => {
    expect(() => provider({ containerImage: "runpod/Base:latest" })).toThrow(
      /RunPod\.containerImage: expected a Docker image reference/,
    );
    expect(() => provider({ containerImage: { name: "x" } as never })).toThrow(
      /RunPod\.containerImage: expected an image tag string or a DockerImage/,
    );
  });
});
