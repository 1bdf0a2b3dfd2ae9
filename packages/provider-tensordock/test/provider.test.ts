/**
 * The TensorDock provider against the fake v2 API: its settings refused by name, the requests it sends
 * (asserted on what the fake received), no capacity, and the VM's self-destruct — the boot script the
 * create request carries is decoded and really run here (with its paths moved into a scratch
 * directory), and the installed command really deletes instances through the fake's API.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { accelerators, NoCapacityError, options, spec as resolveSpec } from "@skyward/core";
// The core's offer cache itself (not exported): what pools put every offers() answer through.
import { type Cluster, cachedOffers, resolvePoolSpec } from "@skyward/core/contract";
import { expectPeerPluginRefused } from "@skyward/testing";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { TensorDock, type TensorDockClusterData, tensordockVm } from "../src/tensordock-provider.js";
import { type FakeTensorDock, startFakeTensorDock } from "./fake-tensordock.js";
import { locations } from "./fixtures.js";

const run = promisify(execFile);
const signal = () => AbortSignal.timeout(20_000);

let fake: FakeTensorDock;
let scratch: string;

beforeAll(async () => {
  fake = await startFakeTensorDock();
  scratch = await mkdtemp(join(tmpdir(), "skyward-tensordock-test-"));
});
afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await rm(scratch, { recursive: true, force: true });
});
beforeEach(() => {
  fake.requests.length = 0;
});

const provider = () =>
  TensorDock({
    apiUrl: fake.apiUrl,
    apiKey: fake.token,
    keysDirectory: join(scratch, "keys"),
    retryDelayMs: 1,
  });

async function prepared(
  accelerator = accelerators.H100({ count: 8 }),
): Promise<{ cluster: Cluster<TensorDockClusterData>; tensordock: ReturnType<typeof TensorDock> }> {
  const tensordock = provider();
  const spec = resolvePoolSpec(
    resolveSpec({ accelerator, allocation: "on-demand", region: "Austin" }),
    options({}),
  );
  const [offer] = await tensordock.offers({
    query: {
      accelerator: { name: accelerator.name, count: accelerator.count ?? 1 },
      allocation: "on-demand",
      region: "Austin",
    },
    signal: signal(),
  });
  if (!offer) throw new Error("no offer in Austin");
  const cluster = await tensordock.prepare({ spec, offer, poolId: "pool1", signal: signal() });
  return { cluster, tensordock };
}

describe("TensorDock settings", () => {
  it("are refused by name before anything is asked", () => {
    expect(() => TensorDock({ apiUrl: "not a url" })).toThrow(/apiUrl/);
    expect(() => TensorDock({ storageGb: 50 })).toThrow(/storageGb: expected at least 100 GB/);
    expect(() => TensorDock({ minVcpus: 0 })).toThrow(/minVcpus/);
    expect(() => TensorDock({ minRamGb: -1 })).toThrow(/minRamGb/);
    expect(() => TensorDock({ operatingSystem: "Ubuntu 24.04" })).toThrow(/operatingSystem/);
    expect(() => TensorDock({ location: "" })).toThrow(/location/);
    expect(() => TensorDock({ sshUser: "Bad User" })).toThrow(/sshUser/);
    expect(() => TensorDock({ apiToken: "x" } as never)).toThrow(/apiToken/);
    expect(fake.requests).toEqual([]);
  });

  it("say where the API token comes from when there is none", async () => {
    const saved = process.env.TENSORDOCK_API_TOKEN;
    delete process.env.TENSORDOCK_API_TOKEN;
    try {
      const failure = await TensorDock({ apiUrl: fake.apiUrl })
        .offers({
          query: { accelerator: { name: "H100", count: 1 }, allocation: "on-demand" },
          signal: signal(),
        })
        .catch((error: unknown) => error);
      expect(String(failure)).toMatch(/set TENSORDOCK_API_TOKEN or pass apiKey/);
    } finally {
      if (saved !== undefined) process.env.TENSORDOCK_API_TOKEN = saved;
    }
  });

  it("offers only GPU machines, on demand, and raise vCPUs, RAM and disk to the spec's", async () => {
    const tensordock = provider();
    const query = { accelerator: null, allocation: "on-demand" } as const;
    expect(await tensordock.offers({ query, signal: signal() })).toEqual([]);
    const spot = await tensordock.offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "spot" },
      signal: signal(),
    });
    expect(spot).toEqual([]);
    const [big] = await tensordock.offers({
      query: {
        accelerator: { name: "RTX_4090", count: 2 },
        allocation: "on-demand",
        vcpus: 16,
        memoryGb: 64,
        diskGb: 500,
        region: "united states",
      },
      signal: signal(),
    });
    // 2 × 0.35 + 16 × 0.003 + 64 × 0.002 + 500 × 0.00005
    expect(big).toMatchObject({ vcpus: 16, memoryGb: 64, diskGb: 500, onDemandPrice: 0.901 });
  });

  it("never offer a GPU whose vCPU, RAM or storage rate the answer leaves out: its price would be the GPUs' alone", async () => {
    // The documented answer prices every resource (`pricing`, "Fetch Hostnodes and Locations"): an
    // answer without a rate is a price not known, not a free resource, and no cap could hold it.
    const unpriced = locations.map((location) => ({
      ...location,
      gpus: location.gpus.map(({ pricing, ...gpu }) => ({
        ...gpu,
        pricing: { per_vcpu_hr: pricing.per_vcpu_hr, per_gb_ram_hr: pricing.per_gb_ram_hr },
      })),
    }));
    await using partial = await startFakeTensorDock({ locations: unpriced as typeof locations });
    const offers = await TensorDock({
      apiUrl: partial.apiUrl,
      apiKey: partial.token,
      retryDelayMs: 1,
    }).offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand", maxHourlyCost: 5 },
      signal: signal(),
    });
    expect(offers).toEqual([]);
  });
});

describe("form factors", () => {
  it("are read from the GPU's display name, and one asked for is honoured", async () => {
    const h100 = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            accelerator: { name: "H100", count: 1, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          signal: signal(),
        })
      )
        .map((offer) => [offer.instanceType, offer.accelerator?.formFactor])
        .sort();
    expect(await h100("SXM")).toEqual([["H100 SXM5 80GB", "SXM"]]);
    expect(await h100("PCIe")).toEqual([["H100 PCIe 80GB", "PCIe"]]);
    expect(await h100()).toEqual([
      ["H100 PCIe 80GB", "PCIe"],
      ["H100 SXM5 80GB", "SXM"],
    ]);
    // An RTX 4090 has no variants: "PCIe" in its name is no label.
    const rtx = await provider().offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      signal: signal(),
    });
    expect(rtx.length).toBeGreaterThan(0);
    expect(rtx.every((offer) => offer.accelerator?.formFactor === undefined)).toBe(true);
  });
});

describe("the offer cache", () => {
  // The core caches offers on disk by provider name and cacheKey (for an hour: a marketplace). A
  // provider of another API (apiUrl) must not be handed the offers cached for this one: the first
  // caches its offers, then the second is asked through the same cache (the core's own code).
  let home = "";
  beforeEach(async () => {
    home = await mkdtemp(join(scratch, "offer-cache-"));
    vi.stubEnv("SKYWARD_HOME", home);
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("is not shared by providers of another API", async () => {
    // Another TensorDock API, whose only location is Frankfurt.
    await using other = await startFakeTensorDock({
      locations: locations.filter((location) => location.city === "Frankfurt"),
    });
    const query = { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" } as const;
    const regions = async (tensordock: ReturnType<typeof TensorDock>) =>
      (await cachedOffers(tensordock, query, { signal: signal() })).map((offer) => offer.region);
    expect(await regions(provider())).toEqual(["Austin, United States", "Frankfurt, Germany"]);
    expect(
      await regions(
        TensorDock({ apiUrl: other.apiUrl, apiKey: other.token, keysDirectory: join(scratch, "keys") }),
      ),
    ).toEqual(["Frankfurt, Germany"]);
  });
});

describe("TensorDock requests", () => {
  it("provision creates VMs as documented, with the boot script in the cloud-init", async () => {
    const { cluster, tensordock } = await prepared();
    const [instance] = await tensordock.provision({ cluster, count: 1, signal: signal() });
    const create = fake.requests.find(
      (request) => request.method === "POST" && request.path === "/instances",
    );
    if (!create) throw new Error("no create request");
    const body = create.body as { data: { type: string; attributes: Record<string, unknown> } };
    const attributes = body.data.attributes;
    expect(body.data.type).toBe("virtualmachine");
    expect(attributes).toMatchObject({
      name: `${cluster.id}-0--pool1`,
      type: "virtualmachine",
      image: "ubuntu2404",
      resources: { vcpu_count: 4, ram_gb: 16, storage_gb: 100, gpus: { "h100-sxm5-80gb": { count: 8 } } },
      location_id: "1f7b3a52-6c1e-4b5e-9a51-0c2a4b0d8e11",
      useDedicatedIp: true,
      ssh_key: cluster.specific.publicKey,
    });
    const { runcmd } = attributes.cloud_init as { runcmd: string[] };
    expect(runcmd).toHaveLength(1);
    expect(runcmd[0]).not.toContain(fake.token);
    const encoded = /^echo (\S+) \| base64 -d \| sh$/.exec(runcmd[0] ?? "")?.[1] ?? "";
    const script = Buffer.from(encoded, "base64").toString("utf8");
    expect(script.split("\n").filter((line) => line.includes(fake.token))).toEqual([fake.token]);
    expect(script).toContain(`/usr/local/sbin/skyward-self-destruct ${cluster.id}-0--pool1;`);

    expect(instance).toMatchObject({ status: "pending", spot: false, offerId: cluster.offer.id });
    const id = instance?.id ?? "";
    await tensordock.getInstance({ cluster, id, signal: signal() });
    const running = await tensordock.getInstance({ cluster, id, signal: signal() });
    expect(running).toMatchObject({
      status: "running",
      ssh: { port: 22, user: "user", identityFile: cluster.specific.identityFile },
      hourlyPrice: 17.649,
      tags: { "skyward:cluster": cluster.id, "skyward:pool": "pool1", "skyward:offer": cluster.offer.id },
    });
    // The instance's name is reported as a tag of its own (the mapping's nameTag).
    expect(running?.tags["tensordock:name"]).toBe(`${cluster.id}-0--pool1`);
    expect(tensordock.selfDestruct({ cluster, instance: running as NonNullable<typeof running> })).toBe(
      `sudo -n /usr/local/sbin/skyward-self-destruct ${id}`,
    );
    await tensordock.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("a location out of GPUs is no capacity; VMs already made are handed back", async () => {
    const { cluster, tensordock } = await prepared();
    // Austin has eight H100s: one VM of eight takes them all.
    const made = await tensordock.provision({ cluster, count: 2, signal: signal() });
    expect(made).toHaveLength(1);
    const failure = await tensordock
      .provision({ cluster, count: 1, signal: signal() })
      .catch((error: unknown) => error);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect(String((failure as Error).message)).toMatch(/No available hostnode/);
    await tensordock.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });
});

describe("the price cap", () => {
  it("is checked against the price the created VM bills (read back), not the listed one: a VM over it is deleted", async () => {
    // A location whose host raised its GPU rate after the offers were read (offers are cached up to an hour).
    const repriced = structuredClone(locations);
    const own = await startFakeTensorDock({ locations: repriced });
    try {
      const tensordock = TensorDock({
        apiUrl: own.apiUrl,
        apiKey: own.token,
        keysDirectory: join(scratch, "keys"),
        retryDelayMs: 1,
      });
      const accelerator = accelerators.RTX_4090({ count: 1 });
      const [offer] = await tensordock.offers({
        query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand", region: "Austin" },
        signal: signal(),
      });
      if (!offer?.onDemandPrice) throw new Error("no priced offer in Austin");
      const maxHourlyCost = offer.onDemandPrice + 0.01;
      const spec = resolvePoolSpec(
        resolveSpec({ accelerator, allocation: "on-demand", region: "Austin", maxHourlyCost }),
        options({}),
      );
      const cluster = await tensordock.prepare({ spec, offer, poolId: "pool1", signal: signal() });
      const austin = repriced.find((location) => location.city === "Austin");
      const gpu = austin?.gpus.find((entry) => entry.v0Name === "geforcertx4090-pcie-24gb");
      if (!gpu) throw new Error("no RTX 4090 in Austin");
      gpu.price_per_hr += 0.5;
      const failure = await tensordock
        .provision({ cluster, count: 1, signal: signal() })
        .catch((error: unknown) => error);
      expect(NoCapacityError.isInstance(failure)).toBe(true);
      expect(String((failure as Error).message)).toMatch(/over maxHourlyCost/);
      // It was made, billed above the cap, and is deleted.
      expect(own.created).toHaveLength(1);
      expect(own.created[0]?.hourlyPrice).toBeGreaterThan(maxHourlyCost);
      expect(own.leftovers()).toEqual([]);
    } finally {
      await own[Symbol.asyncDispose]();
    }
  });
});

describe("the VM's self-destruct", () => {
  async function install(name: string, root: string, watchdogSeconds: number) {
    const directory = await mkdtemp(join(scratch, "node-"));
    const command = join(directory, "bin", "skyward-self-destruct");
    const tokenFile = join(directory, "etc", "token");
    const script = tensordockVm.renderBootScript({
      apiUrl: fake.apiUrl,
      apiKey: fake.token,
      vmName: name,
      root,
      watchdogSeconds,
      keyFile: tokenFile,
      commandPath: command,
    });
    await writeFile(join(directory, "boot.sh"), script);
    await run("sh", [join(directory, "boot.sh")]);
    return { command, tokenFile };
  }

  it("the boot script installs a command that deletes the VM by id or by name, the token never on a command line", async () => {
    const { cluster, tensordock } = await prepared(accelerators.RTX_4090());
    const [first, second] = await tensordock.provision({ cluster, count: 2, signal: signal() });
    const { command, tokenFile } = await install(`${cluster.id}-1--pool1`, join(scratch, "none"), 0);
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    expect((await stat(command)).mode & 0o777).toBe(0o700);
    fake.requests.length = 0;
    await run(command, [String(first?.id)]);
    await run(command, [`${cluster.id}-1--pool1`]);
    const deletes = fake.requests.filter((request) => request.method === "DELETE");
    expect(deletes.map((request) => request.path)).toEqual([
      `/instances/${first?.id}`,
      `/instances/${second?.id}`,
    ]);
    expect(deletes.every((request) => request.token === fake.token)).toBe(true);
    expect((await run("cat", [command])).stdout).not.toContain(fake.token);
    await tensordock.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("the self-destruct tries again when the API refuses for now (a 429 of the organisation's 100 a minute), and counts a VM already gone as deleted", async () => {
    const { cluster, tensordock } = await prepared(accelerators.RTX_4090());
    const [vm] = await tensordock.provision({ cluster, count: 1, signal: signal() });
    const { command } = await install(`${cluster.id}-0--pool1`, join(scratch, "none"), 0);
    const retryNow = { env: { ...process.env, SKYWARD_RETRY_SECONDS: "0" } };
    fake.rateLimitNext(2, 0);
    // By name, as the boot watchdog runs it: its first two requests meet a 429.
    await run(command, [`${cluster.id}-0--pool1`], retryNow);
    expect(fake.leftovers()).toEqual([]);
    // Deleted already (the worker's TTL and the pool both ended it): done, not a failure.
    await run(command, [String(vm?.id)], retryNow);
    await tensordock.teardown({ cluster, signal: signal() });
  });

  it("a list answer of a shape the self-destruct does not know is a failure tried again, never 'nothing to delete'", async () => {
    const { cluster, tensordock } = await prepared(accelerators.RTX_4090());
    const [vm] = await tensordock.provision({ cluster, count: 1, signal: signal() });
    const { command } = await install(`${cluster.id}-0--pool1`, join(scratch, "none"), 0);
    fake.breakListShape();
    const failed = await run(command, [`${cluster.id}-0--pool1`], {
      env: { ...process.env, SKYWARD_RETRY_SECONDS: "0" },
    }).catch((error: { code?: number; stderr?: string }) => error);
    expect("code" in failed && failed.code).toBe(1);
    expect("stderr" in failed && failed.stderr).toContain("unknown shape (no list at .data.instances)");
    expect(fake.instances.has(String(vm?.id))).toBe(true);
    fake.breakListShape(false);
    await tensordock.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("the boot watchdog deletes a VM no worker started on, and spares one whose worker did", async () => {
    const { cluster, tensordock } = await prepared(accelerators.RTX_4090());
    const [spared, ended] = await tensordock.provision({ cluster, count: 2, signal: signal() });
    const started = await mkdtemp(join(scratch, "root-"));
    await writeFile(join(started, "worker.pid"), "1\n");
    fake.requests.length = 0;
    // This machine booted long ago: each watchdog's time is up at once.
    await install(`${cluster.id}-0--pool1`, started, 1);
    await install(`${cluster.id}-1--pool1`, join(scratch, "never-started"), 1);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !fake.requests.some((request) => request.method === "DELETE"))
      await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(
      fake.requests.filter((request) => request.method === "DELETE").map((request) => request.path),
    ).toEqual([`/instances/${ended?.id}`]);
    expect(spared).toBeDefined();
    await tensordock.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });
});

describe("several nodes", () => {
  it("VMs share no private network: a distributed-training plugin on several nodes is refused before TensorDock is asked anything", () => {
    expectPeerPluginRefused(provider, accelerators.H100());
    expect(fake.requests).toEqual([]);
  });
});
