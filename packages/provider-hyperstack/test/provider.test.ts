/**
 * The Hyperstack provider against the fake Infrahub API: its settings refused by name, the requests it
 * sends (asserted on what the fake received), no capacity, the private-network rule, and the VM's
 * self-destruct — the user data is really run here (with its paths moved into a scratch directory), and
 * the installed command really deletes the VM through the fake's API.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { accelerators, NoCapacityError, options, type PoolSpec, spec as resolveSpec } from "@skyward/core";
// The core's offer cache itself (not exported): what pools put every offers() answer through.
import { type Cluster, cachedOffers, resolvePoolSpec } from "@skyward/core/contract";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { HyperstackClusterData } from "../src/hyperstack-environments.js";
import { acceleratorOfGpu } from "../src/hyperstack-offers.js";
import { Hyperstack, hyperstackVm } from "../src/hyperstack-provider.js";
import { type FakeHyperstack, startFakeHyperstack } from "./fake-hyperstack.js";

const run = promisify(execFile);
const signal = () => AbortSignal.timeout(20_000);

let fake: FakeHyperstack;
let scratch: string;

beforeAll(async () => {
  fake = await startFakeHyperstack();
  scratch = await mkdtemp(join(tmpdir(), "skyward-hyperstack-test-"));
});
afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await rm(scratch, { recursive: true, force: true });
});
beforeEach(() => {
  fake.requests.length = 0;
  fake.outOfStock.clear();
});

const provider = () =>
  Hyperstack({
    apiUrl: fake.apiUrl,
    apiKey: fake.apiKey,
    keysDirectory: join(scratch, "keys"),
    retryDelayMs: 1,
  });

async function poolSpec(region: string): Promise<PoolSpec> {
  return resolvePoolSpec(
    resolveSpec({ accelerator: accelerators.A100(), allocation: "on-demand", region }),
    options({}),
  );
}

async function prepared(): Promise<{
  cluster: Cluster<HyperstackClusterData>;
  hyperstack: ReturnType<typeof Hyperstack>;
}> {
  const hyperstack = provider();
  const offers = await hyperstack.offers({
    query: { accelerator: { name: "A100", count: 1 }, allocation: "on-demand", region: "CANADA-1" },
    signal: signal(),
  });
  const offer = offers.find((entry) => entry.instanceType === "n3-A100x1");
  if (!offer) throw new Error("no n3-A100x1 offer");
  const cluster = await hyperstack.prepare({
    spec: await poolSpec("CANADA-1"),
    offer,
    poolId: "pool1",
    signal: signal(),
  });
  return { cluster, hyperstack };
}

describe("Hyperstack settings", () => {
  it("are refused by name before anything is asked", () => {
    expect(() => Hyperstack({ apiUrl: "not a url" })).toThrow(/apiUrl/);
    expect(() => Hyperstack({ region: "" })).toThrow(/region/);
    expect(() => Hyperstack({ region: [] })).toThrow(/at least one region/);
    expect(() => Hyperstack({ sshUser: "Bad User" })).toThrow(/sshUser: expected a user name/);
    expect(() => Hyperstack({ image: "" })).toThrow(/image/);
    expect(() => Hyperstack({ maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => Hyperstack({ networkOptimised: true } as never)).toThrow(/networkOptimised/);
    expect(() => Hyperstack({ sshAddress: "10.0.0.1" } as never)).toThrow(/sshAddress/);
    expect(fake.requests).toEqual([]);
  });

  it("say where the API key comes from when there is none", async () => {
    const saved = process.env.HYPERSTACK_API_KEY;
    delete process.env.HYPERSTACK_API_KEY;
    try {
      const failure = await Hyperstack({ apiUrl: fake.apiUrl })
        .offers({ query: { accelerator: null, allocation: "on-demand" }, signal: signal() })
        .catch((error: unknown) => error);
      expect(String(failure)).toMatch(/set HYPERSTACK_API_KEY or pass apiKey/);
    } finally {
      if (saved !== undefined) process.env.HYPERSTACK_API_KEY = saved;
    }
  });

  it("region narrows the offers to the regions given", async () => {
    const offers = await Hyperstack({ apiUrl: fake.apiUrl, apiKey: fake.apiKey, region: "norway-1" }).offers({
      query: { accelerator: { name: "A100", count: 2 }, allocation: "on-demand" },
      signal: signal(),
    });
    expect(offers.map((offer) => offer.id)).toEqual(["hyperstack:NORWAY-1:n3-A100x2-NVLink"]);
    expect(offers[0]).toMatchObject({
      onDemandPrice: 2.8,
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
    });
  });
});

describe("form factors", () => {
  it("are read from the flavor's GPU name, and one asked for is honoured", async () => {
    const h100 = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            accelerator: { name: "H100", count: 1, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          signal: signal(),
        })
      ).map((offer) => [offer.instanceType, offer.accelerator?.formFactor]);
    expect(await h100("SXM")).toEqual([["n3-H100-SXM5x1", "SXM"]]);
    expect(await h100("PCIe")).toEqual([["n3-H100x1", "PCIe"]]);
    expect((await h100()).sort()).toEqual([
      ["n3-H100-SXM5x1", "SXM"],
      ["n3-H100x1", "PCIe"],
    ]);
    // PCIe A100s with an NVLink bridge are still PCIe boards.
    expect(acceleratorOfGpu("A100-80G-PCIe-w-NVLink")).toEqual({
      name: "A100",
      memoryGb: 80,
      formFactor: "PCIe",
    });
    expect(acceleratorOfGpu("H100-80G-PCIe-NVLink")).toEqual({
      name: "H100",
      memoryGb: 80,
      formFactor: "PCIe",
    });
    expect(acceleratorOfGpu("RTX-A6000-spot")).toEqual({ name: "RTX_A6000", memoryGb: 48 });
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
    // Another Infrahub API, out of n3-A100x1.
    await using other = await startFakeHyperstack();
    other.outOfStock.add("n3-A100x1");
    const query = { accelerator: { name: "A100", count: 1 }, allocation: "on-demand" } as const;
    const flavors = async (hyperstack: ReturnType<typeof Hyperstack>) =>
      (await cachedOffers(hyperstack, query, { signal: signal() })).map((offer) => offer.instanceType);
    expect(await flavors(provider())).toEqual(["n3-A100x1"]);
    expect(await flavors(Hyperstack({ apiUrl: other.apiUrl, apiKey: other.apiKey }))).toEqual([]);
  });
});

describe("Hyperstack spot flavors", () => {
  it("a flavor whose GPU ends in -spot is offered at a spot price only, and its VMs are tagged spot", async () => {
    const hyperstack = provider();
    const query = { accelerator: { name: "RTX_A6000", count: 1 }, region: "NORWAY-1" } as const;
    const spot = await hyperstack.offers({ query: { ...query, allocation: "spot" }, signal: signal() });
    expect(spot.map((offer) => [offer.instanceType, offer.spotPrice, offer.onDemandPrice])).toEqual([
      ["n3-RTX-A6000x1-spot", 0.25, null],
    ]);
    const onDemand = await hyperstack.offers({
      query: { ...query, allocation: "on-demand" },
      signal: signal(),
    });
    expect(onDemand.map((offer) => offer.instanceType)).toEqual(["n3-RTX-A6000x1"]);
    const offer = spot[0];
    if (!offer) throw new Error("no spot offer");
    const spec = resolvePoolSpec(
      resolveSpec({ accelerator: accelerators.RTX_A6000(), allocation: "spot", region: "NORWAY-1" }),
      options({}),
    );
    const cluster = await hyperstack.prepare({ spec, offer, poolId: "spotpool", signal: signal() });
    const [instance] = await hyperstack.provision({ cluster, count: 1, signal: signal() });
    expect(instance).toMatchObject({ spot: true, hourlyPrice: 0.25 });
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });
});

describe("Hyperstack requests", () => {
  it("prepare makes an environment and a key pair; provision creates VMs as documented", async () => {
    const { cluster, hyperstack } = await prepared();
    expect(cluster.specific.environmentName).toBe(`${cluster.id}--pool1`);
    // The newest Ubuntu image with CUDA in the region.
    expect(cluster.specific.imageName).toBe("Ubuntu Server 24.04 LTS R570 CUDA 12.8");
    const environment = fake.requests.find(
      (request) => request.method === "POST" && request.path === "/core/environments",
    );
    expect(environment?.body).toEqual({ name: `${cluster.id}--pool1`, region: "CANADA-1" });
    const keypair = fake.requests.find(
      (request) => request.path === "/core/keypairs" && request.method === "POST",
    );
    expect(keypair?.body).toMatchObject({ name: cluster.id, environment_name: `${cluster.id}--pool1` });
    expect(String((keypair?.body as { public_key?: string } | undefined)?.public_key)).toMatch(
      /^ssh-ed25519 /,
    );

    const [instance] = await hyperstack.provision({ cluster, count: 1, signal: signal() });
    const create = fake.requests.find(
      (request) => request.method === "POST" && request.path === "/core/virtual-machines",
    );
    const body = create?.body as Record<string, unknown>;
    expect(body).toMatchObject({
      name: `${cluster.id}-0`,
      environment_name: `${cluster.id}--pool1`,
      image_name: "Ubuntu Server 24.04 LTS R570 CUDA 12.8",
      flavor_name: "n3-A100x1",
      key_name: cluster.id,
      count: 1,
      assign_floating_ip: true,
      enable_port_randomization: false,
      security_rules: [
        {
          direction: "ingress",
          ethertype: "IPv4",
          protocol: "tcp",
          remote_ip_prefix: "0.0.0.0/0",
          port_range_min: 22,
          port_range_max: 22,
        },
      ],
    });
    expect(body.labels).toEqual(
      expect.arrayContaining([
        `skyward:cluster=${cluster.id}`,
        "skyward:pool=pool1",
        "skyward:offer=hyperstack:CANADA-1:n3-A100x1",
        "skyward:hourly-price=1.35",
        "skyward:spot=0",
      ]),
    );
    // The key is in the user data only as the content of its 0600 file.
    const userData = String(body.user_data);
    expect(userData.split("\n").filter((line) => line.includes(fake.apiKey))).toEqual([fake.apiKey]);
    expect(userData).toContain(`/usr/local/sbin/skyward-self-destruct ${cluster.id}-0;`);

    expect(instance).toMatchObject({ status: "pending", spot: false, hourlyPrice: 1.35 });
    const id = instance?.id ?? "";
    expect(await hyperstack.getInstance({ cluster, id, signal: signal() })).toMatchObject({
      status: "pending",
    });
    const running = await hyperstack.getInstance({ cluster, id, signal: signal() });
    expect(running).toMatchObject({
      status: "running",
      ssh: { port: 22, user: "ubuntu", identityFile: cluster.specific.identityFile },
    });
    // Once it has its private address, its private network is opened to it — once.
    await hyperstack.getInstance({ cluster, id, signal: signal() });
    const rules = fake.requests.filter((request) => request.path === `/core/virtual-machines/${id}/sg-rules`);
    expect(rules.map((request) => request.body)).toEqual([
      {
        direction: "ingress",
        ethertype: "IPv4",
        protocol: "any",
        remote_ip_prefix: expect.stringMatching(/\.0\/24$/),
      },
    ]);
    expect(hyperstack.selfDestruct({ cluster, instance: running as NonNullable<typeof running> })).toBe(
      `sudo -n /usr/local/sbin/skyward-self-destruct ${id}`,
    );

    await hyperstack.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("a flavor out of stock is no capacity, and nothing is left", async () => {
    const { cluster, hyperstack } = await prepared();
    fake.outOfStock.add("n3-A100x1");
    const failure = await hyperstack
      .provision({ cluster, count: 2, signal: signal() })
      .catch((error: unknown) => error);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect(String((failure as NoCapacityError).message)).toMatch(/stock/i);
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });
});

describe("the VM's self-destruct", () => {
  it("the user data installs a command that deletes the VM by id or by name, the key never on a command line", async () => {
    const { cluster, hyperstack } = await prepared();
    const [first, second] = await hyperstack.provision({ cluster, count: 2, signal: signal() });
    const directory = await mkdtemp(join(scratch, "node-"));
    const keyFile = join(directory, "etc", "hyperstack-api-key");
    const command = join(directory, "bin", "skyward-self-destruct");
    const script = hyperstackVm.renderBootScript({
      apiUrl: fake.apiUrl,
      apiKey: fake.apiKey,
      vmName: `${cluster.id}-1`,
      root: join(directory, "root"),
      watchdogSeconds: 0,
      keyFile,
      commandPath: command,
    });
    await writeFile(join(directory, "user-data.sh"), script);
    await run("sh", [join(directory, "user-data.sh")]);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect((await stat(command)).mode & 0o777).toBe(0o700);

    fake.requests.length = 0;
    await run(command, [String(first?.id)]);
    await run(command, [`${cluster.id}-1`]);
    const deletes = fake.requests.filter((request) => request.method === "DELETE");
    expect(deletes.map((request) => request.path)).toEqual([
      `/core/virtual-machines/${first?.id}`,
      `/core/virtual-machines/${second?.id}`,
    ]);
    expect(deletes.every((request) => request.apiKey === fake.apiKey)).toBe(true);
    const installed = (await run("cat", [command])).stdout;
    expect(installed).not.toContain(fake.apiKey);
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("the boot watchdog deletes a VM no worker started on, and spares one whose worker did", async () => {
    const { cluster, hyperstack } = await prepared();
    const [spared, ended] = await hyperstack.provision({ cluster, count: 2, signal: signal() });
    const boot = async (name: string, workerStarted: boolean) => {
      const directory = await mkdtemp(join(scratch, "boot-"));
      const root = join(directory, "root");
      await run("mkdir", ["-p", root]);
      if (workerStarted) await writeFile(join(root, "worker.pid"), "1\n");
      const script = hyperstackVm.renderBootScript({
        apiUrl: fake.apiUrl,
        apiKey: fake.apiKey,
        vmName: name,
        root,
        // This machine booted long ago: the watchdog's time is up at once.
        watchdogSeconds: 1,
        keyFile: join(directory, "key"),
        commandPath: join(directory, "skyward-self-destruct"),
      });
      await writeFile(join(directory, "user-data.sh"), script);
      await run("sh", [join(directory, "user-data.sh")]);
    };
    fake.requests.length = 0;
    await boot(`${cluster.id}-0`, true);
    await boot(`${cluster.id}-1`, false);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !fake.requests.some((request) => request.method === "DELETE"))
      await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(
      fake.requests.filter((request) => request.method === "DELETE").map((request) => request.path),
    ).toEqual([`/core/virtual-machines/${ended?.id}`]);
    expect(spared).toBeDefined();
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(fake.leftovers()).toEqual([]);
  });
});
