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
  type PoolSpec,
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
import { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS, imageCudaVersion } from "@skyward/provider-utils";
import { launchSshWorker } from "@skyward/ssh";
import { preparedCluster, useMswFake } from "@skyward/testing";
import { HttpResponse, http } from "msw";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type FakePod, startFakeRunPod, TEST_API_KEY } from "../test/fake-runpod.js";
import { RunPodApiError } from "./runpod-api.js";
import { bidAbove } from "./runpod-offers.js";
import { createProviderFromConfig, RunPod, type RunPodClusterData } from "./runpod-provider.js";
import { DEFAULT_RUNPOD_IMAGE, type RunPodSettings } from "./runpod-settings.js";

const fake = startFakeRunPod();
const keys = useMswFake(fake, "skyward-runpod-keys-");
const call = () => ({ signal: AbortSignal.timeout(10_000) });

function provider(settings: RunPodSettings = {}) {
  return RunPod({ apiKey: TEST_API_KEY, keysDirectory: keys.keysDirectory, retryDelayMs: 1, ...settings });
}

function poolSpec(input: Omit<SpecInput, "provider">, runpod = provider()): PoolSpec {
  return resolvePoolSpec(toSpec({ ...input, provider: runpod }), poolOptions({}));
}

/** The pod's start command: the boot watchdog (base64), then RunPod's own start script. */
const WATCHED_START = /^bash -c "echo [A-Za-z0-9+/=]+ \| base64 -d \| bash; exec \/start\.sh"$/;

const a100Query: OfferQuery = { accelerator: { name: "A100", count: 2 }, allocation: "spot-if-available" };
/** Boots a pod in the fake: it pulls its image, starts, then runs. */
async function untilRunning(
  runpod: ReturnType<typeof provider>,
  cluster: Cluster<RunPodClusterData>,
  id: string,
) {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const instance = await runpod.getInstance({ cluster, id, ...call() });
    if (instance?.status === "running") return instance;
  }
  throw new Error(`pod ${id} never ran`);
}

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
  settings: RunPodSettings = {},
) {
  const runpod = provider(settings);
  return { runpod, cluster: await preparedCluster(runpod, input, pick) };
}

describe("offers", () => {
  it("reads the v2 catalog per cloud with pod stock, the GPU count and the image's CUDA, with the bearer key", async () => {
    await provider().offers({ query: { ...a100Query, allocation: "on-demand" }, ...call() });
    const requests = fake.to("/v2/catalog/gpus", "GET");
    expect(requests.map((request) => Object.fromEntries(request.url.searchParams))).toEqual([
      { include: "AVAILABILITY", product: "POD", count: "2", cloud: "SECURE", minCudaVersion: "12.9" },
      { include: "AVAILABILITY", product: "POD", count: "2", cloud: "COMMUNITY", minCudaVersion: "12.9" },
    ]);
    expect(requests[0]?.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    // On demand needs no GraphQL at all.
    expect(fake.operations("SkywardSpotPrices")).toEqual([]);
  });

  it("one offer per GPU type and cloud, priced per pod; spot = a bid a margin above the minimum", async () => {
    const offers = await provider().offers({ query: a100Query, ...call() });
    expect(
      offers.map((offer) => [
        offer.id,
        offer.spotPrice,
        offer.onDemandPrice,
        (offer.specific as { bidPerGpu: number | null }).bidPerGpu,
      ]),
    ).toEqual([
      // Minimum bid 0.82 per GPU: the bid is 0.861 (5 % above), never the exact minimum.
      ["runpod:secure:NVIDIA A100 80GB PCIe:x2", 1.722, 3.28, 0.861],
      // Spot sold out (no stock status): on demand only.
      ["runpod:secure:NVIDIA A100-SXM4-80GB:x2", null, 3.78, null],
      // Community: interruptible only (v2 cannot ask an on-demand community pod for a public IP).
      ["runpod:community:NVIDIA A100 80GB PCIe:x2", 1.26, null, 0.63],
    ]);
    expect(offers[0]).toMatchObject({
      provider: "runpod",
      instanceType: "2x NVIDIA A100 80GB PCIe (secure cloud)",
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
      architecture: "x86_64",
      region: "any",
      specific: { kind: "gpu", gpuTypeId: "NVIDIA A100 80GB PCIe", gpuCount: 2, cloudType: "SECURE" },
    });
    expect(fake.operations("SkywardSpotPrices")[0]?.query).toContain(
      "secureLowest: lowestPrice(input: {gpuCount: 2, secureCloud: true}) { minimumBidPrice stockStatus }",
    );
    expect(bidAbove(0.82, 0.05)).toBe(0.861);
    expect(bidAbove(0.5, 0.01)).toBe(0.505);
    expect(bidAbove(0.001, 0.01)).toBe(0.002);
    expect(
      (await provider({ spotBidMargin: 0.1 }).offers({ query: a100Query, ...call() }))[0]?.spotPrice,
    ).toBe(1.804);
  });

  it("labels each GPU type's form factor from its id or name, and honours one asked for", async () => {
    // The catalog fixture (https://docs.runpod.io/api-reference-v2/catalog/list-gpu-types) has the
    // A100 80GB twice: "NVIDIA A100 80GB PCIe" and "NVIDIA A100-SXM4-80GB".
    const ask = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            ...a100Query,
            accelerator: { name: "A100", count: 2, ...(formFactor ? { formFactor } : {}) },
          },
          ...call(),
        })
      ).map((offer) => [offer.id, offer.accelerator?.formFactor]);
    expect(await ask("SXM")).toEqual([["runpod:secure:NVIDIA A100-SXM4-80GB:x2", "SXM"]]);
    expect(await ask("PCIe")).toEqual([
      ["runpod:secure:NVIDIA A100 80GB PCIe:x2", "PCIe"],
      ["runpod:community:NVIDIA A100 80GB PCIe:x2", "PCIe"],
    ]);
    expect(await ask()).toEqual([
      ["runpod:secure:NVIDIA A100 80GB PCIe:x2", "PCIe"],
      ["runpod:secure:NVIDIA A100-SXM4-80GB:x2", "SXM"],
      ["runpod:community:NVIDIA A100 80GB PCIe:x2", "PCIe"],
    ]);
    // "NVIDIA H100 80GB HBM3" does not say its board; its display name "H100 SXM" does. (Its only
    // host runs CUDA 12.8, under the default image's minimum.)
    const h100 = await provider({ allowedCudaVersions: ["12.8"] }).offers({
      query: { accelerator: { name: "H100", count: 1, formFactor: "SXM" }, allocation: "on-demand" },
      ...call(),
    });
    expect(h100.map((offer) => [offer.specific.gpuTypeId, offer.accelerator?.formFactor])).toEqual([
      ["NVIDIA H100 80GB HBM3", "SXM"],
    ]);
  });

  it("does not offer sold-out types, nor types with no free host on a CUDA version the image runs", async () => {
    // L40S: its only machine is full (availability NONE).
    expect(
      await provider().offers({
        query: { accelerator: { name: "L40S", count: 1 }, allocation: "on-demand" },
        ...call(),
      }),
    ).toEqual([]);
    // H100: its machines run CUDA 12.8; the default image needs 12.9.
    const h100: OfferQuery = { accelerator: { name: "H100", count: 1 }, allocation: "on-demand" };
    expect(await provider().offers({ query: h100, ...call() })).toEqual([]);
    expect(
      await provider({ containerImage: "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404" }).offers({
        query: h100,
        ...call(),
      }),
    ).toHaveLength(1);
    // A pinned data center with no stock of the type: not offered.
    expect(
      await provider({ dataCenterId: "EU-SE-1" }).offers({
        query: { ...a100Query, allocation: "on-demand" },
        ...call(),
      }),
    ).toEqual([]);
  });

  it("honours the cloud type, the allocation, GPU memory, the count limit per cloud and the price cap", async () => {
    const secure = await provider({ cloudType: "secure" }).offers({ query: a100Query, ...call() });
    expect(secure.every((offer) => offer.id.startsWith("runpod:secure:"))).toBe(true);
    // Community cloud has at most 4 A100 PCIe per pod.
    const eight = await provider().offers({
      query: { accelerator: { name: "A100", count: 8 }, allocation: "on-demand" },
      ...call(),
    });
    expect(eight.map((offer) => offer.id)).toEqual([
      "runpod:secure:NVIDIA A100 80GB PCIe:x8",
      "runpod:secure:NVIDIA A100-SXM4-80GB:x8",
    ]);
    expect(
      await provider().offers({
        query: { accelerator: { name: "RTX_4090", count: 1, memoryGb: 48 }, allocation: "cheapest" },
        ...call(),
      }),
    ).toEqual([]);
    const capped = await provider().offers({
      query: { ...a100Query, allocation: "on-demand", maxHourlyCost: 3 },
      ...call(),
    });
    expect(capped.map((offer) => offer.id)).toEqual([]);
    const cappedSpot = await provider().offers({ query: { ...a100Query, maxHourlyCost: 1.5 }, ...call() });
    expect(cappedSpot.map((offer) => offer.id)).toEqual(["runpod:community:NVIDIA A100 80GB PCIe:x2"]);
  });

  it("when GraphQL is gone (retired), offers on demand only, unless the allocation is spot", async () => {
    fake.interrupt(1, () => HttpResponse.json({ error: "Not Found" }, { status: 404 }));
    const offers = await provider().offers({ query: a100Query, ...call() });
    expect(offers.map((offer) => [offer.spotPrice, offer.onDemandPrice])).toEqual([
      [null, 3.28],
      [null, 3.78],
    ]);
    fake.interrupt(1, () => HttpResponse.json({ error: "Not Found" }, { status: 404 }));
    await expect(
      provider().offers({ query: { ...a100Query, allocation: "spot" }, ...call() }),
    ).rejects.toMatchObject({
      statusCode: 404,
    });
  });

  it("refuses a vCPU or memory minimum for GPU pods, which v2 cannot ask for, by name", async () => {
    const error = await provider()
      .offers({ query: { ...a100Query, vcpus: 8 }, ...call() })
      .catch((caught: unknown) => caught);
    expect((error as ConfigurationError).issues).toEqual([
      {
        path: "vcpus",
        message: expect.stringContaining("cannot ask a GPU pod for a vCPU or memory minimum"),
      },
    ]);
    expect(fake.requests).toEqual([]);
  });

  it("returns nothing for arm64, without asking RunPod", async () => {
    expect(await provider().offers({ query: { ...a100Query, architecture: "arm64" }, ...call() })).toEqual(
      [],
    );
    expect(fake.requests).toEqual([]);
  });

  it("offers CPU pods: the smallest power-of-two size of each flavor in stock meeting vCPUs and memory", async () => {
    const offers = await provider().offers({
      query: { accelerator: null, allocation: "on-demand", vcpus: 4, memoryGb: 8 },
      ...call(),
    });
    expect(offers.map((offer) => [offer.id, offer.vcpus, offer.memoryGb, offer.onDemandPrice])).toEqual([
      ["runpod:cpu:cpu3c-4-8", 4, 8, 0.12],
      ["runpod:cpu:cpu3g-4-16", 4, 16, 0.16],
    ]);
    const [request] = fake.to("/v2/catalog/cpus");
    expect(Object.fromEntries(request?.url.searchParams ?? [])).toEqual({
      include: "AVAILABILITY",
      product: "POD",
    });
    expect(
      await provider({ cpuFlavorIds: ["cpu3g"] }).offers({
        query: { accelerator: null, allocation: "spot" },
        ...call(),
      }),
    ).toEqual([]);
  });
});

describe("the offer cache", () => {
  // The core caches offers on disk by provider name and cacheKey (for an hour: a marketplace). Two
  // providers that differ in one setting the offers depend on must not share them: each test lets the
  // first cache its offers, then asks the second through the same cache (the core's own code).
  let home = "";
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "skyward-runpod-offer-cache-"));
    vi.stubEnv("SKYWARD_HOME", home);
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(home, { recursive: true, force: true });
  });
  const cached = async (settings: RunPodSettings, query: OfferQuery) =>
    (await cachedOffers(provider(settings), query, call())).map((offer) => [offer.id, offer.region]);

  it("is not shared by providers pinned to another data center", async () => {
    const onDemand: OfferQuery = { ...a100Query, allocation: "on-demand" };
    expect(await cached({}, onDemand)).toEqual([
      ["runpod:secure:NVIDIA A100 80GB PCIe:x2", "any"],
      ["runpod:secure:NVIDIA A100-SXM4-80GB:x2", "any"],
    ]);
    // EU-SE-1 has no A100 in stock.
    expect(await cached({ dataCenterId: "EU-SE-1" }, onDemand)).toEqual([]);
  });

  it("is not shared by providers limited to other CPU flavors", async () => {
    const cpu: OfferQuery = { accelerator: null, allocation: "on-demand", vcpus: 4, memoryGb: 8 };
    expect(await cached({}, cpu)).toEqual([
      ["runpod:cpu:cpu3c-4-8", "any"],
      ["runpod:cpu:cpu3g-4-16", "any"],
    ]);
    expect(await cached({ cpuFlavorIds: ["cpu3g"] }, cpu)).toEqual([["runpod:cpu:cpu3g-4-16", "any"]]);
  });

  it("is shared by equal settings", async () => {
    const onDemand: OfferQuery = { ...a100Query, allocation: "on-demand" };
    await cached({ dataCenterId: "US-KS-2" }, onDemand);
    const asked = fake.to("/v2/catalog/gpus").length;
    await cached({ dataCenterId: "US-KS-2" }, onDemand);
    expect(fake.to("/v2/catalog/gpus")).toHaveLength(asked);
  });
});

describe("the image's CUDA", () => {
  it("is read from the image's tag, or set, or listed", () => {
    expect(imageCudaVersion(DEFAULT_RUNPOD_IMAGE)).toBe("12.9");
    expect(imageCudaVersion("runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404")).toBe("12.8");
    expect(imageCudaVersion("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04")).toBe("12.4");
    expect(imageCudaVersion("runpod/pytorch:2.1.0-py3.10-cuda11.8.0-devel-ubuntu22.04")).toBe("11.8");
    expect(imageCudaVersion("python:3.12-slim")).toBeUndefined();
    expect(() => RunPod({ minCudaVersion: "12" })).toThrow(/RunPod\.minCudaVersion.*major\.minor/);
    expect(() => RunPod({ minCudaVersion: "12.8", allowedCudaVersions: ["12.8"] })).toThrow(
      /either minCudaVersion or allowedCudaVersions/,
    );
  });

  it("is asked of the host: without it the default image lands on an old-driver host and never starts", async () => {
    // What RunPod does without a filter (reproduced by the fake): the first free RTX 4090 runs CUDA 12.2.
    const response = await fetch("https://api.runpod.io/v2/pods", {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({
        name: "raw",
        image: DEFAULT_RUNPOD_IMAGE,
        cloud: "COMMUNITY",
        gpu: { id: "NVIDIA GeForce RTX 4090", count: 1 },
        ports: ["22/tcp"],
      }),
    });
    const raw = (await response.json()) as { id: string };
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      (offers) => offers.find((offer) => offer.id.startsWith("runpod:secure:")),
    );
    for (let lookup = 0; lookup < 6; lookup += 1)
      await runpod.getInstance({ cluster, id: raw.id, ...call() });
    expect(fake.pods.get(raw.id)?.status).toBe("RUNNING");
    expect(await runpod.getInstance({ cluster, id: raw.id, ...call() })).toMatchObject({
      status: "pending",
      ssh: null,
    });
    // With the filter the pod goes to a 12.9 host, and starts.
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const body = fake.to("/v2/pods", "POST").at(-1)?.body as { gpu: unknown };
    expect(body.gpu).toEqual({ id: "NVIDIA GeForce RTX 4090", count: 1, minCudaVersion: "12.9" });
    expect(fake.pods.get(created?.id ?? "")?.machine?.cudaVersion).toBe("12.9");
    expect(await untilRunning(runpod, cluster, created?.id ?? "")).toMatchObject({ status: "running" });
  });

  it("allowedCudaVersions asks for exactly those versions", async () => {
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      (offers) => offers[0],
      { allowedCudaVersions: ["12.9", "13.0"] },
    );
    expect(fake.to("/v2/catalog/gpus")[0]?.url.searchParams.get("cudaVersions")).toBe("12.9,13.0");
    await runpod.provision({ cluster, count: 1, ...call() });
    expect(fake.to("/v2/pods", "POST")[0]?.body).toMatchObject({
      gpu: { allowedCudaVersions: ["12.9", "13.0"] },
    });
  });
});

describe("prepare", () => {
  it("generates the SSH key pair once (private key 0600) and carries the public key for PUBLIC_KEY", async () => {
    const { cluster } = await clusterFor({ accelerator: accelerators.A100({ count: 1 }) });
    expect(cluster.id).toMatch(/^skyward-[0-9a-f]{8}$/);
    expect(cluster.ssh).toEqual({
      user: "root",
      identityFile: join(keys.keysDirectory, "runpod_ed25519"),
      sudo: false,
    });
    expect(cluster.specific.publicKey).toMatch(/^ssh-ed25519 AAAA/);
    expect(cluster.specific.image).toBe(DEFAULT_RUNPOD_IMAGE);
    expect(cluster.specific).toMatchObject({
      globalNetworking: false,
      dataCenterIds: [],
      cuda: { minCudaVersion: "12.9" },
    });
    expect((await stat(cluster.specific.identityFile)).mode & 0o777).toBe(0o600);
    const again = await clusterFor({});
    expect(again.cluster.specific.publicKey).toBe(cluster.specific.publicKey);
    expect(again.cluster.id).not.toBe(cluster.id);
  });

  it("image pulls: the pool waits RunPod's own provisioning timeout unless the options set one", () => {
    const runpod = provider();
    expect(runpod.capabilities.provisionTimeout).toBe(IMAGE_PULL_PROVISION_TIMEOUT_SECONDS);
    expect(resolvePoolSpec(toSpec({ provider: runpod }), poolOptions({})).provisionTimeout).toBe(1800);
    expect(
      resolvePoolSpec(toSpec({ provider: runpod }), poolOptions({ provisionTimeout: 120 })).provisionTimeout,
    ).toBe(120);
  });

  it("a volume on a CPU pod is refused by name before anything is created", async () => {
    const runpod = provider({ volumeGb: 20 });
    const spec = poolSpec({}, runpod);
    const [offer] = await runpod.offers({ query: offerQuery(spec), ...call() });
    await expect(runpod.prepare({ spec, offer: offer as Offer, ...call() })).rejects.toMatchObject({
      issues: [{ path: "volumeGb", message: expect.stringContaining("CPU pods take no pod volume") }],
    });
    expect(() => RunPod({ volumeGb: 5 })).toThrow(/RunPod\.volumeGb.*at least 10/);
  });

  it("volumes (buckets mounted with s3fs) are refused through sky.compute, naming each, before any pod is created", async () => {
    const error = await compute({
      provider: provider(),
      accelerator: accelerators.A100({ count: 1 }),
      volumes: [
        { bucket: "datasets", mount: "/data", storage: { endpoint: "https://s3.example.com" } },
        {
          bucket: "checkpoints",
          mount: "/ckpt",
          readOnly: false,
          storage: { endpoint: "https://s3.example.com" },
        },
      ],
      options: { console: false },
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(ConfigurationError.isInstance(error)).toBe(true);
    const issues = (error as ConfigurationError).issues;
    expect(issues.map((issue) => issue.path)).toEqual(["volumes[0]", "volumes[1]"]);
    expect(issues[0]?.message).toMatch(
      /^the RunPod provider does not mount volumes \(datasets on \/data\): its pods are containers without FUSE \(no \/dev\/fuse, no CAP_SYS_ADMIN\)/,
    );
    expect(issues[0]?.message).toContain("@skyward/storage");
    expect(fake.to("/v2/pods", "POST")).toEqual([]);
    expect(fake.pods.size).toBe(0);
  });
});

describe("multi-node pools", () => {
  const ddp = Plugin.create("ddp").withPeerNetwork();

  it("GPU pods of a pool of several nodes join global networking, in data centers that have it; peers get the private address", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 1 }),
      allocation: "on-demand",
      nodes: 2,
      plugins: [ddp],
    });
    expect(cluster.specific.globalNetworking).toBe(true);
    expect(cluster.specific.spotAllowed).toBe(false);
    // Those with global networking where the type is in stock (on a CUDA 12.9 host): US-KS-2 only.
    expect(cluster.specific.dataCenterIds).toEqual(["US-KS-2"]);
    expect(Object.fromEntries(fake.to("/v2/catalog/datacenters")[0]?.url.searchParams ?? [])).toEqual({
      globalNetwork: "true",
    });
    const created = await runpod.provision({ cluster, count: 2, ...call() });
    for (const request of fake.to("/v2/pods", "POST"))
      expect(request.body).toMatchObject({
        globalNetworking: true,
        dataCenterIds: cluster.specific.dataCenterIds,
      });
    const running = await Promise.all(created.map((instance) => untilRunning(runpod, cluster, instance.id)));
    for (const instance of running) {
      const pod = fake.pods.get(instance.id);
      expect(instance.privateIp).toBe(pod?.privateIp);
      expect(instance.privateIp).toMatch(/^10\.65\./);
      expect(instance.publicIp).toBe(pod?.publicIp);
    }
  });

  it("spot-if-available rents on demand when the pods must join the network; spot alone is refused, before anything starts", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 1 }),
      allocation: "spot-if-available",
      nodes: 2,
      plugins: [ddp],
    });
    await runpod.provision({ cluster, count: 1, ...call() });
    expect(fake.operations("SkywardRentInterruptable")).toEqual([]);
    expect(fake.to("/v2/pods", "POST")).toHaveLength(1);
    const refused = await clusterFor({
      accelerator: accelerators.A100({ count: 1 }),
      allocation: "spot",
      nodes: 2,
      plugins: [ddp],
    }).catch((caught: unknown) => caught);
    expect((refused as ConfigurationError).issues).toEqual([
      { path: "allocation", message: expect.stringContaining("interruptible pods cannot join") },
    ]);
  });

  it("an offer in stock only where there is no global networking gives way to the next offer at prepare", async () => {
    // Community A100 PCIe (offered interruptible only): in stock in CA-MTL-1 only, which has no global networking.
    const error = await clusterFor(
      {
        accelerator: accelerators.A100({ count: 1 }),
        allocation: "spot-if-available",
        nodes: 2,
        plugins: [ddp],
      },
      (offers) => offers.find((offer) => offer.id.startsWith("runpod:community:")),
    ).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts[0]?.reason).toMatch(
      /in stock only in data centers without global networking \(CA-MTL-1\)/,
    );
    expect(fake.to("/v2/pods", "POST")).toEqual([]);
  });

  it("a pinned data center without global networking is refused for a plugin that needs it", async () => {
    const refused = await clusterFor(
      {
        accelerator: accelerators.A100({ count: 1 }),
        allocation: "spot-if-available",
        nodes: 2,
        plugins: [ddp],
      },
      (offers) => offers[0],
      { dataCenterId: "CA-MTL-1", cloudType: "community" },
    ).catch((caught: unknown) => caught);
    expect((refused as ConfigurationError).issues).toEqual([
      {
        path: "dataCenterId",
        message: expect.stringMatching(/CA-MTL-1 has no global networking.*plugin "ddp"/),
      },
    ]);
    expect(fake.to("/v2/pods", "POST")).toEqual([]);
  });

  it("CPU pods cannot join global networking: such a plugin on several CPU nodes is refused at validation", () => {
    expect(provider().capabilities.peerNetwork).toBe("accelerated");
    expect(() => toSpec({ provider: provider(), nodes: 2, plugins: [ddp] })).toThrow(
      /plugin "ddp".*runpod's instances reach one another only with an accelerator/,
    );
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
  it("creates an on-demand GPU pod through v2: image, disk, volume, env with PUBLIC_KEY, port 22/tcp", async () => {
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.A100({ count: 2 }), allocation: "on-demand", diskGb: 80 },
      (offers) => offers[0],
      { volumeGb: 20, env: { HF_HOME: "/workspace/hf" } },
    );
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    const [request] = fake.to("/v2/pods", "POST");
    expect(request?.url.href).toBe("https://api.runpod.io/v2/pods");
    expect(request?.body).toEqual({
      name: `${cluster.id}-0`,
      image: DEFAULT_RUNPOD_IMAGE,
      cloud: "SECURE",
      disk: 80,
      env: {
        HF_HOME: "/workspace/hf",
        PUBLIC_KEY: cluster.specific.publicKey,
        SKYWARD_CLUSTER: cluster.id,
        SKYWARD_OFFER: cluster.offer.id,
        SKYWARD_SPOT: "0",
      },
      ports: ["22/tcp"],
      args: expect.stringMatching(WATCHED_START),
      gpu: { id: "NVIDIA A100 80GB PCIe", count: 2, minCudaVersion: "12.9" },
      mounts: { persistent: { size: 20, path: "/workspace" } },
    });
    expect(instance).toMatchObject({
      status: "pending",
      spot: false,
      hourlyPrice: 3.28,
      offerId: cluster.offer.id,
    });
  });

  it("rents an interruptible pod through GraphQL at the bid above the minimum, with the CUDA versions the image runs on", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "spot",
    });
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    const [rent] = fake.operations("SkywardRentInterruptable");
    expect(rent?.variables?.input).toMatchObject({
      gpuTypeId: "NVIDIA A100 80GB PCIe",
      gpuCount: 2,
      cloudType: "SECURE",
      bidPerGpu: 0.861,
      // The versions of the catalog's free hosts that run the image: here only 12.9.
      allowedCudaVersions: ["12.9"],
      ports: "22/tcp",
    });
    expect(instance).toMatchObject({ spot: true, hourlyPrice: 1.722, status: "pending" });
    expect(fake.pods.get(instance?.id ?? "")?.env.SKYWARD_SPOT).toBe("1");
    expect(await untilRunning(runpod, cluster, instance?.id ?? "")).toMatchObject({ spot: true });
  });

  it("spot-if-available falls back to on-demand when the spot market is empty; the cap applies to the market rented", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "spot-if-available",
    });
    fake.capacity.spot = 0;
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    expect(instance).toMatchObject({ spot: false, hourlyPrice: 3.28 });
    // With a cap between the two prices, no on-demand pod above it.
    fake.reset();
    const capped = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "spot-if-available",
      maxHourlyCost: 2,
    });
    fake.capacity.spot = 0;
    const error = await capped.runpod
      .provision({ cluster: capped.cluster, count: 1, ...call() })
      .catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    // The market refused by the cap before anything is asked, then the one that had nothing.
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "on-demand: $3.28/h is over maxHourlyCost $2/h",
      expect.stringMatching(
        /^spot: RunPod's API refused renting an interruptible pod: There are no longer any instances available/,
      ),
    ]);
    expect(fake.to("/v2/pods", "POST")).toEqual([]);
  });

  it("returns the pods it got when capacity runs short, and throws NoCapacityError when it got none", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
    });
    fake.capacity.onDemand = 1;
    const got = await runpod.provision({ cluster, count: 3, ...call() });
    expect(got).toHaveLength(1);
    const error = await runpod.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts[0]?.reason).toMatch(
      /^on-demand: RunPod's API answered HTTP 400 while creating a GPU pod \(POST \/v2\/pods\): This GPU and data center combination could not be placed/,
    );
  });

  it("creates CPU pods through v2 with the flavor and vCPU count, secure cloud", async () => {
    const runpod = provider();
    const spec = poolSpec({ vcpus: 4 }, runpod);
    const [offer] = await runpod.offers({ query: offerQuery(spec), ...call() });
    const cluster = await runpod.prepare({ spec, offer: offer as Offer, ...call() });
    const [instance] = await runpod.provision({ cluster, count: 1, ...call() });
    const [request] = fake.to("/v2/pods", "POST");
    expect(request?.body).toEqual({
      name: `${cluster.id}-0`,
      image: DEFAULT_RUNPOD_IMAGE,
      cloud: "SECURE",
      disk: 50,
      env: expect.objectContaining({ PUBLIC_KEY: cluster.specific.publicKey }),
      ports: ["22/tcp"],
      args: expect.stringMatching(WATCHED_START),
      cpu: { id: "cpu3c", vcpuCount: 4 },
    });
    expect(instance).toMatchObject({ spot: false, hourlyPrice: 0.12 });
    expect(fake.to(/^\/v1\//)).toEqual([]);
  });
});

describe("getInstance, terminate, teardown, listInstances", () => {
  let runpod: ReturnType<typeof provider>;
  let cluster: Cluster<RunPodClusterData>;

  beforeEach(async () => {
    ({ runpod, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090({ count: 1 }),
      allocation: "on-demand",
    }));
  });

  it("is pending while the image is pulled and the container starts, then running with RunPod's direct SSH endpoint", async () => {
    fake.imagePullLookups = 4;
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    const statuses: string[] = [];
    for (let lookup = 0; lookup < 6; lookup += 1) {
      const instance = await runpod.getInstance({ cluster, id, ...call() });
      statuses.push(`${fake.pods.get(id)?.status} ${instance?.status}`);
    }
    expect(statuses).toEqual([
      "PROVISIONING pending",
      "PROVISIONING pending",
      "PROVISIONING pending",
      "PROVISIONING pending",
      "STARTING pending",
      "RUNNING running",
    ]);
    const pod = fake.pods.get(id);
    expect(await runpod.getInstance({ cluster, id, ...call() })).toMatchObject({
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
      hourlyPrice: 0.69,
      createdAt: Date.parse("2026-11-24T12:00:00Z"),
      tags: { "skyward:cluster": cluster.id },
    });
    expect(fake.to(`/v2/pods/${id}`, "GET")).toHaveLength(7);
    expect(await runpod.getInstance({ cluster, id: "nosuchpod", ...call() })).toBeNull();
  });

  it("terminates idempotently: twice, and ids RunPod does not know", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    await runpod.terminate({ cluster, ids: [id], ...call() });
    expect(fake.to(`/v2/pods/${id}`, "DELETE")).toHaveLength(1);
    expect(fake.pods.has(id)).toBe(false);
    await runpod.terminate({ cluster, ids: [id, "nosuchpod"], ...call() });
    await runpod.terminate({ cluster, ids: [], ...call() });
    expect(await runpod.getInstance({ cluster, id, ...call() })).toBeNull();
  });

  it("teardown terminates the pods the cluster still has, and only those", async () => {
    await runpod.provision({ cluster, count: 2, ...call() });
    const other = await clusterFor({
      accelerator: accelerators.RTX_4090({ count: 1 }),
      allocation: "on-demand",
    });
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
    expect(fake.to("/v2/pods", "GET")).toHaveLength(1);
  });

  it("only prepare creates the key pair: offers, listInstances, getInstance and terminate write nothing", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const id = created?.id ?? "";
    const elsewhere = await mkdtemp(join(tmpdir(), "skyward-runpod-read-only-"));
    try {
      const empty = join(elsewhere, "keys");
      const reader = provider({ keysDirectory: empty });
      expect(await reader.offers({ query: a100Query, ...call() })).not.toHaveLength(0);
      expect(await untilRunning(reader, cluster, id)).toMatchObject({ status: "running" });
      const [listed] = (await reader.listInstances?.(call())) ?? [];
      expect(listed?.ssh).toMatchObject({ user: "root" });
      expect(listed?.ssh).not.toHaveProperty("identityFile");
      const [own] = (await runpod.listInstances?.(call())) ?? [];
      expect(own?.ssh).toMatchObject({ identityFile: cluster.specific.identityFile });
      await reader.terminate({ cluster, ids: [id], ...call() });
      await expect(stat(empty)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it("selfDestruct deletes the pod with runpodctl v2's `pod delete` (else the API) and the pod-scoped key from PID 1's environment", async () => {
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const op = runpod.selfDestruct({ cluster, instance: created as Instance }) as string;
    expect(op).toMatch(
      /^for kv in \$\(tr '\\0' '\\n' < \/proc\/1\/environ 2>\/dev\/null \| grep -E '\^RUNPOD_API_KEY='\); do export "\$kv"; done; export RUNPOD_POD_ID=\S+; deleted=1; for attempt in 1 2 .* 20; do if \{ .*; \}; then deleted=0; break; fi; \[ "\$attempt" = 20 \] \|\| sleep .*; done; \[ "\$deleted" = 0 \]$/s,
    );
    expect(op).toContain(`export RUNPOD_POD_ID=${created?.id};`);
    // Else `DELETE /v2/pods/{id}` from Python, the key on its standard input, never among its arguments.
    expect(op).toContain(
      `{ runpodctl pod delete "$RUNPOD_POD_ID" || printf '%s%s\\n' 'Authorization: Bearer ' "$RUNPOD_API_KEY" | python3 -c '`,
    );
    expect(op).toContain(`' DELETE "https://api.runpod.io/v2/pods/$RUNPOD_POD_ID"; }`);
    // Never runpodctl v1's `remove pod`, a hidden deprecated alias in v2.
    expect(op).not.toContain("remove pod");
  });
});

describe("errors", () => {
  it("looks the API key up lazily, with a clear message when there is none", async () => {
    const saved = process.env.RUNPOD_API_KEY;
    delete process.env.RUNPOD_API_KEY;
    try {
      const runpod = RunPod({ keysDirectory: keys.keysDirectory });
      const error = await runpod.offers({ query: a100Query, ...call() }).catch((caught: unknown) => caught);
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

  it("a rejected key (401/403) fails at once, naming the fix and never the key", async () => {
    const error = await provider({ apiKey: "rp_wrong_key" })
      .offers({ query: { ...a100Query, allocation: "on-demand" }, ...call() })
      .catch((caught: unknown) => caught);
    expect(RunPodApiError.isInstance(error) && ProvisionError.isInstance(error)).toBe(true);
    expect((error as RunPodApiError).statusCode).toBe(401);
    expect((error as Error).message).toBe(
      "RunPod rejected the API key (HTTP 401) while listing GPU types (secure cloud) (GET /v2/catalog/gpus): set RUNPOD_API_KEY to a valid key or pass apiKey",
    );
    expect(`${String((error as Error).stack)} ${JSON.stringify(error)}`).not.toContain("rp_wrong_key");
  });

  it("rate limits (429) are retried with backoff, then fail clearly", async () => {
    fake.interrupt(2, () =>
      HttpResponse.json({ title: "Too Many Requests", status: 429, detail: "slow down" }, { status: 429 }),
    );
    expect(
      await provider().offers({ query: { ...a100Query, allocation: "on-demand" }, ...call() }),
    ).toHaveLength(2);
    expect(fake.to("/v2/catalog/gpus")).toHaveLength(4);
    fake.reset();
    fake.interrupt(10, () =>
      HttpResponse.json({ title: "Too Many Requests", status: 429, detail: "slow down" }, { status: 429 }),
    );
    const error = await provider({ maxRetries: 2 })
      .offers({ query: { ...a100Query, allocation: "on-demand" }, ...call() })
      .catch((caught: unknown) => caught);
    expect((error as Error).message).toBe(
      "RunPod's rate limit (HTTP 429) persisted after 3 attempts while listing GPU types (secure cloud) (GET /v2/catalog/gpus); try again later",
    );
  });

  it("a 5xx on create is never sent again blindly: the pod is looked for by its name first, and a create accepted whose answer was lost is found, not made twice", async () => {
    const { runpod, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
    });
    // Refused before anything was made: looked for (not there), then created once.
    fake.interrupt(1, () =>
      HttpResponse.json({ title: "Bad Gateway", status: 502, detail: "bad gateway" }, { status: 502 }),
    );
    const [first] = await runpod.provision({ cluster, count: 1, ...call() });
    expect(fake.requests.map((request) => `${request.method} ${request.url.pathname}`).slice(-3)).toEqual([
      "POST /v2/pods",
      "GET /v2/pods",
      "POST /v2/pods",
    ]);
    expect(fake.pods.size).toBe(1);
    // Accepted, but the answer lost on the way back: the pod is found by its name, never made twice.
    fake.server.use(
      http.post(
        "https://api.runpod.io/v2/pods",
        async ({ request }) => {
          await fetch(request.url, { method: "POST", headers: request.headers, body: await request.text() });
          return HttpResponse.json(
            { title: "Bad Gateway", status: 502, detail: "bad gateway" },
            { status: 502 },
          );
        },
        { once: true },
      ),
    );
    const [second] = await runpod.provision({ cluster, count: 1, ...call() });
    expect(fake.pods.size).toBe(2);
    expect(second?.id).not.toBe(first?.id);
    expect(fake.pods.get(second?.id ?? "")?.name).toBe(`${cluster.id}-1`);
    // A read is retried.
    fake.interrupt(1, () =>
      HttpResponse.json({ title: "Bad Gateway", status: 502, detail: "bad gateway" }, { status: 502 }),
    );
    expect(await runpod.listInstances?.(call())).toHaveLength(2);
  });

  it("an answer that is not understood fails with what was wrong", async () => {
    fake.interrupt(1, () => HttpResponse.json({ gpus: [{ name: "no id" }] }));
    await expect(
      provider().offers({ query: { ...a100Query, allocation: "on-demand" }, ...call() }),
    ).rejects.toThrow(
      "RunPod's answer to listing GPU types (secure cloud) was not understood: gpus.0.id: Invalid input: expected string, received undefined",
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
      expect.unreachable("RunPod accepted containerDiskGb: 0 and an unknown field");
    } catch (error) {
      expect((error as ConfigurationError).issues.map((issue) => issue.path)).toEqual([
        "RunPod.containerDiskGb",
        "RunPod.extra",
      ]);
    }
    expect(() => RunPod({ spotBidMargin: 0 })).toThrow(/RunPod\.spotBidMargin.*exact minimum/);
  });

  it("createProviderFromConfig builds it from a skyward.toml table, errors under the table's path", async () => {
    const runpod = createProviderFromConfig({
      apiKey: TEST_API_KEY,
      cloudType: "community",
      keysDirectory: keys.keysDirectory,
    });
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
        seen.push(String(input instanceof Request ? input.url : input).replace(/\?.*/, ""));
        return fetch(input, init);
      },
    });
    expect(await runpod.offers({ query: a100Query, ...call() })).toHaveLength(3);
    expect(seen).toEqual([
      "https://api.runpod.io/graphql",
      "https://api.runpod.io/v2/catalog/gpus",
      "https://api.runpod.io/v2/catalog/gpus",
    ]);
  });
});

describe("root", () => {
  it("is Skyward's directory on each pod, {id} its id; default none given (the pool's /opt/skyward)", async () => {
    const { runpod, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
      (offers) => offers[0],
      { root: "/scratch/skyward-{id}" },
    );
    const [created] = await runpod.provision({ cluster, count: 1, ...call() });
    const running = await untilRunning(runpod, cluster, created?.id ?? "");
    expect(running.ssh?.root).toBe(`/scratch/skyward-${created?.id}`);
    const [listed] = (await provider().listInstances?.(call())) ?? [];
    expect(listed?.ssh).not.toHaveProperty("root");
    expect(() => RunPod({ root: "relative" })).toThrow(/RunPod\.root/);
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
    const [request] = fake.to("/v2/pods", "POST");
    return (request?.body as { image?: unknown } | undefined)?.image;
  }

  it("deploys pods from a sky.containers image, a DockerImage.of image or a tag string", async () => {
    expect(await deployedImage(containers.runpodPytorch("2.8"))).toBe(
      "runpod/pytorch:2.8.0-py3.13-cuda12.8.1-devel-ubuntu24.04",
    );
    // The CUDA version in the image's tag asks the host for it.
    expect(fake.to("/v2/pods", "POST")[0]?.body).toMatchObject({ gpu: { minCudaVersion: "12.8" } });
    fake.reset();
    expect(await deployedImage(DockerImage.of("ghcr.io/acme/trainer:1.4"))).toBe("ghcr.io/acme/trainer:1.4");
    // A tag that names no CUDA: no constraint, unless the DockerImage says which CUDA it was built for.
    expect(fake.to("/v2/pods", "POST")[0]?.body).toMatchObject({
      gpu: { id: "NVIDIA A100 80GB PCIe", count: 1 },
    });
    expect(fake.to("/v2/pods", "POST")[0]?.body).not.toHaveProperty("gpu.minCudaVersion");
    fake.reset();
    expect(await deployedImage(DockerImage.of("ghcr.io/acme/trainer:1.4", { cuda: "12.9" }))).toBe(
      "ghcr.io/acme/trainer:1.4",
    );
    expect(fake.to("/v2/pods", "POST")[0]?.body).toMatchObject({ gpu: { minCudaVersion: "12.9" } });
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
    const [request] = fake.to("/v2/pods", "POST");
    expect(request?.body).toMatchObject({ image: "ubuntu:22.04", cpu: { id: "cpu3g", vcpuCount: 2 } });
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
