import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  accelerators,
  ConfigurationError,
  compute,
  containers,
  DockerImage,
  NoCapacityError,
  options as poolOptions,
  type SpecInput,
  spec as toSpec,
} from "@skyward/core";
import { createProviderFromEntry } from "@skyward/core/config";
import { type Offer, offerQuery, resolvePoolSpec } from "@skyward/core/contract";
import { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS } from "@skyward/provider-utils";
import { expectPeerPluginRefused } from "@skyward/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type FakeNovita,
  type FakeNovitaInstance,
  startFakeNovita,
  TEST_API_KEY,
} from "../test/fake-novita.js";
import { DEFAULT_NOVITA_IMAGE, Novita, type NovitaSettings, STARTUP_COMMAND } from "./novita-provider.js";

let fake: FakeNovita;
let keysDirectory: string;
const call = () => ({ signal: AbortSignal.timeout(10_000) });

beforeAll(async () => {
  fake = await startFakeNovita();
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-novita-keys-"));
});
afterAll(async () => {
  await fake[Symbol.asyncDispose]();
  await rm(keysDirectory, { recursive: true, force: true });
});
beforeEach(() => fake.reset());

function provider(settings: NovitaSettings = {}) {
  return Novita({ apiKey: TEST_API_KEY, apiUrl: fake.apiUrl, keysDirectory, retryDelayMs: 1, ...settings });
}

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  settings: NovitaSettings = {},
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
) {
  const novita = provider(settings);
  const spec = resolvePoolSpec(toSpec({ ...input, provider: novita }), poolOptions({}));
  const offer = pick(await novita.offers({ query: offerQuery(spec), ...call() }));
  if (!offer) throw new Error("no offer picked");
  const cluster = await novita.prepare({ spec, offer, poolId: "p1a2b3c4", ...call() });
  return { novita, cluster };
}

const creates = () =>
  fake.requests.filter(
    (request) => request.method === "POST" && request.path.endsWith("/gpu/instance/create"),
  );

describe("offers", () => {
  it("prices from /products, per GPU in 1/100,000 USD, times the GPU count; spot from the spot listing", async () => {
    const offers = await provider().offers({
      query: { accelerator: { name: "A100", count: 2 }, allocation: "spot-if-available" },
      ...call(),
    });
    expect(offers).toHaveLength(1);
    expect(offers[0]).toMatchObject({
      id: "novita:8:x2",
      provider: "novita",
      instanceType: "2x A100 SXM 80GB",
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
      vcpus: 32,
      memoryGb: 240,
      region: "any",
      spotPrice: 1.5,
      onDemandPrice: 2.98,
      specific: { productId: "8", productName: "A100 SXM 80GB", gpuNum: 2 },
    });
    const listings = fake.requests.filter((request) => request.path.endsWith("/products"));
    expect(listings.map((request) => request.query.toString()).sort()).toEqual([
      "gpuNum=2&billingMethod=onDemand",
      "gpuNum=2&billingMethod=spot",
    ]);
    expect(listings.every((request) => request.authorization === `Bearer ${TEST_API_KEY}`)).toBe(true);
  });

  it("labels the form factor the product name says (`A100 SXM 80GB`) and honours one asked for", async () => {
    const a100 = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            accelerator: { name: "A100", count: 1, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          ...call(),
        })
      ).map((offer) => [offer.instanceType, offer.accelerator?.formFactor]);
    expect(await a100("SXM")).toEqual([["A100 SXM 80GB", "SXM"]]);
    // The fixture (Novita's documented /products answer) has no PCIe A100.
    expect(await a100("PCIe")).toEqual([]);
    expect(await a100()).toEqual([["A100 SXM 80GB", "SXM"]]);
    // An RTX 4090 has no variants: no label.
    const rtx = await provider().offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(rtx.map((offer) => offer.accelerator)).toEqual([{ name: "RTX_4090", count: 1, memoryGb: 24 }]);
  });

  it("leaves out products that cannot be deployed, CPU-only queries, and other clusters", async () => {
    const h100 = await provider().offers({
      query: { accelerator: { name: "H100", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(h100).toEqual([]);
    expect(
      await provider().offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() }),
    ).toEqual([]);
    const inHongKong = await provider({ clusterId: "CN-HK-01" }).offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(inHongKong.map((offer) => [offer.id, offer.region, offer.onDemandPrice])).toEqual([
      ["novita:1:x1", "CN-HK-01", 0.35],
    ]);
    const elsewhere = await provider({ clusterId: "CN-HK-01" }).offers({
      query: { accelerator: { name: "A100", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(elsewhere).toEqual([]);
  });
});

describe("provision", () => {
  it("image pulls: the pool waits the image-pull provisioning timeout unless the options set one", () => {
    // Novita pulls the image before the container starts (List Instances' status `pulling`): a large
    // CUDA image on a host without it takes far longer than the default 300 s.
    const novita = provider();
    expect(novita.capabilities.provisionTimeout).toBe(IMAGE_PULL_PROVISION_TIMEOUT_SECONDS);
    expect(resolvePoolSpec(toSpec({ provider: novita }), poolOptions({})).provisionTimeout).toBe(1800);
    const short = poolOptions({ provisionTimeout: 120 });
    expect(resolvePoolSpec(toSpec({ provider: novita }), short).provisionTimeout).toBe(120);
  });

  it("creates a container of the image with 22/tcp, PUBLIC_KEY and the tags in its env, and the sshd start command", async () => {
    const { novita, cluster } = await clusterFor(
      { accelerator: accelerators.RTX_4090(), allocation: "on-demand", diskGb: 80 },
      { env: { HF_HOME: "/data/hf" }, clusterId: "US-CA-06" },
    );
    const [instance] = await novita.provision({ cluster, count: 1, ...call() });
    expect(creates()[0]?.body).toEqual({
      name: `${cluster.id}-0`,
      productId: "1",
      gpuNum: 1,
      rootfsSize: 80,
      imageUrl: DEFAULT_NOVITA_IMAGE,
      ports: "22/tcp",
      envs: [
        { key: "HF_HOME", value: "/data/hf" },
        { key: "PUBLIC_KEY", value: cluster.specific.publicKey },
        { key: "SKYWARD_CLUSTER", value: cluster.id },
        { key: "SKYWARD_POOL", value: "p1a2b3c4" },
        { key: "SKYWARD_OFFER", value: "novita:1:x1" },
        { key: "SKYWARD_SPOT", value: "0" },
        // What the start command arms the boot watchdog and the self-destruct with.
        { key: "SKYWARD_INSTANCE_NAME", value: `${cluster.id}-0` },
        {
          key: "SKYWARD_WATCHDOG_SECONDS",
          value: String(
            Math.ceil(cluster.spec.ttl + cluster.spec.sshTimeout + cluster.spec.bootstrapTimeout),
          ),
        },
        { key: "SKYWARD_SELF_DESTRUCT", value: expect.any(String) },
        { key: "SKYWARD_NOVITA_API_KEY", value: TEST_API_KEY },
      ],
      command: STARTUP_COMMAND,
      kind: "gpu",
      billingMode: "onDemand",
      clusterId: "US-CA-06",
    });
    expect(instance).toMatchObject({ status: "pending", ssh: null, spot: false, hourlyPrice: 0.35 });
    const running = await novita.getInstance({ cluster, id: instance?.id ?? "", ...call() });
    expect(running).toMatchObject({
      status: "running",
      ssh: { host: "203.0.113.7", port: 30000, user: "root", identityFile: cluster.specific.identityFile },
      tags: { "skyward:cluster": cluster.id, "skyward:pool": "p1a2b3c4" },
    });
  });

  it("passes a sky.containers image, a DockerImage.of image or a tag string through as imageUrl", async () => {
    for (const [dockerImage, tag] of [
      [containers.pytorch("2.8"), "nvcr.io/nvidia/pytorch:25.04-py3"],
      [DockerImage.of("ghcr.io/acme/trainer:1.4", { cuda: "12.8" }), "ghcr.io/acme/trainer:1.4"],
      ["ubuntu:24.04", "ubuntu:24.04"],
    ] as const) {
      fake.reset();
      const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() }, { dockerImage });
      await novita.provision({ cluster, count: 1, ...call() });
      expect(creates()[0]?.body).toMatchObject({ imageUrl: tag });
    }
    expect(() => provider({ dockerImage: "Not An Image" })).toThrow(
      /Novita\.dockerImage: expected a Docker image reference/,
    );
  });

  it("spot-if-available falls back to on-demand when spot is out of stock; NoCapacityError says why when both are", async () => {
    fake.capacity.spot = 1;
    fake.capacity.onDemand = 1;
    const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    const instances = await novita.provision({ cluster, count: 3, ...call() });
    expect(instances.map((instance) => instance.spot)).toEqual([true, false]);
    const error = await novita.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      expect.stringMatching(/^spot: .*not enough gpu resources/),
      expect.stringMatching(/^on-demand: .*not enough gpu resources/),
    ]);
  });

  it("the start command is valid bash within Novita's 2,047 characters, and drops the key from the environment", () => {
    const inner = /^bash -c '(.*)'$/.exec(STARTUP_COMMAND)?.[1] ?? "";
    expect(inner).toContain('"$PUBLIC_KEY" >> /root/.ssh/authorized_keys');
    expect(inner).toContain("unset SKYWARD_NOVITA_API_KEY");
    expect(STARTUP_COMMAND.length).toBeLessThanOrEqual(2047);
    execFileSync("bash", ["-n", "-c", inner]);
  });

  it("the self-destruct deletes through the API (not `kill 1`, which a namespace's init ignores), by id or, for the boot watchdog, by name", async () => {
    const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    const [first, second] = await novita.provision({ cluster, count: 2, ...call() });
    if (!first || !second) throw new Error("no instances");
    const command = novita.selfDestruct({ cluster, instance: first });
    expect(command.replaceAll("'", "")).toBe(`/usr/local/sbin/skyward-self-destruct ${first.id}`);
    // The script the start command installs, run as the container would run it (the header file it writes).
    const env = (creates()[1]?.body as { envs?: { key: string; value: string }[] } | undefined)?.envs ?? [];
    const encoded = env.find((entry) => entry.key === "SKYWARD_SELF_DESTRUCT")?.value ?? "";
    const script = join(keysDirectory, "self-destruct.sh");
    await writeFile(script, Buffer.from(encoded, "base64"));
    await writeFile(join(keysDirectory, "auth"), `Authorization: Bearer ${TEST_API_KEY}\n`);
    const run = (target: string) =>
      promisify(execFile)("sh", [script, target], {
        env: { ...process.env, SKYWARD_AUTH_FILE: join(keysDirectory, "auth"), SKYWARD_RETRY_SECONDS: "0" },
      });
    expect((await run(first.id)).stdout).toBe(`skyward: deleted instance ${first.id}\n`);
    // The watchdog knows only the instance's name.
    expect((await run(`${cluster.id}-1`)).stdout).toBe(`skyward: deleted instance ${second.id}\n`);
    expect(fake.leftovers()).toEqual([]);
    const deletes = fake.requests.filter((request) => request.path.endsWith("/gpu/instance/delete"));
    expect(deletes.map((request) => request.body)).toEqual([
      { instanceId: first.id },
      { instanceId: second.id },
    ]);
  });

  it("the boot watchdog finds its instance by name on an account with more instances than one page holds", async () => {
    const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    const [instance] = await novita.provision({ cluster, count: 1, ...call() });
    // A hundred instances of others on the account come first in the list: the pool's is on page 2.
    const made = fake.instances.get(instance?.id ?? "") as FakeNovitaInstance;
    fake.instances.delete(made.id);
    for (let index = 0; index < 100; index += 1) {
      const id = `f${String(index).padStart(15, "0")}`;
      fake.instances.set(id, { ...made, id, name: `someone-else-${index}`, envs: [] });
    }
    fake.instances.set(made.id, made);
    const env =
      (creates().at(-1)?.body as { envs?: { key: string; value: string }[] } | undefined)?.envs ?? [];
    const encoded = env.find((entry) => entry.key === "SKYWARD_SELF_DESTRUCT")?.value ?? "";
    const script = join(keysDirectory, "self-destruct.sh");
    await writeFile(script, Buffer.from(encoded, "base64"));
    await writeFile(join(keysDirectory, "auth"), `Authorization: Bearer ${TEST_API_KEY}\n`);
    const run = promisify(execFile)("sh", [script, `${cluster.id}-0`], {
      env: { ...process.env, SKYWARD_AUTH_FILE: join(keysDirectory, "auth"), SKYWARD_RETRY_SECONDS: "0" },
    });
    expect((await run).stdout).toBe(`skyward: deleted instance ${instance?.id}\n`);
    expect(fake.instances.has(instance?.id ?? "")).toBe(false);
    expect(fake.instances.size).toBe(100);
  });

  it("the price cap holds on the market launched: spot out of stock, on demand over the cap is never created", async () => {
    fake.capacity.spot = 0;
    // Spot $0.17/h is under the cap, on demand $0.35/h is over it.
    const { novita, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      maxHourlyCost: 0.3,
    });
    const error = await novita.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "on-demand: $0.35/h is over maxHourlyCost $0.3/h",
      expect.stringMatching(/^spot: .*not enough gpu resources/),
    ]);
    expect(creates().map((request) => (request.body as { billingMode: string }).billingMode)).toEqual([
      "spot",
    ]);
  });

  it("prices are per GPU times gpuNum; an instance billing above the cap (a per-node price read as per GPU, a moved price) is deleted at once", async () => {
    fake.faults.priceFactor = 2;
    const { novita, cluster } = await clusterFor({
      accelerator: accelerators.A100({ count: 2 }),
      allocation: "on-demand",
      maxHourlyCost: 4,
    });
    expect(cluster.offer.onDemandPrice).toBe(2.98);
    const error = await novita.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "on-demand: launched at $5.96/h, over maxHourlyCost $4/h; deleted",
    ]);
    expect(fake.leftovers()).toEqual([]);
  });

  it("the root filesystem stays within the product's maxRootFS: products below it are not offered, a larger diskGb is refused by name", async () => {
    const big = await provider({ rootfsSize: 800 }).offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(big).toEqual([]);
    // The spec's disk counts too: a product whose maxRootFS is below it is not offered (the pool picks
    // another), rather than offered and then refused in prepare naming a setting the user never gave.
    const query = { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" } as const;
    expect(await provider().offers({ query: { ...query, diskGb: 600 }, ...call() })).toEqual([]);
    expect(await provider().offers({ query: { ...query, diskGb: 500 }, ...call() })).toHaveLength(1);
    // An offer read without the disk (a cache, another spec) is still refused in prepare, by name.
    const novita = provider();
    const [offer] = await novita.offers({ query, ...call() });
    if (!offer) throw new Error("no RTX 4090 offer");
    const spec = resolvePoolSpec(
      toSpec({ accelerator: accelerators.RTX_4090(), diskGb: 600, provider: novita }),
      poolOptions({}),
    );
    const error = await novita
      .prepare({ spec, offer, poolId: "p1a2b3c4", ...call() })
      .catch((caught: unknown) => caught);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).issues[0]?.message).toBe(
      "600 GB is more root filesystem than Novita's RTX 4090 24GB takes (maxRootFS 500 GB)",
    );
    expect(creates()).toEqual([]);
  });

  it("an instance Novita cannot read yet right after its create is kept, not lost", async () => {
    const { novita, cluster } = await clusterFor({
      accelerator: accelerators.RTX_4090(),
      allocation: "on-demand",
    });
    fake.faults.notFoundReads = 1;
    const instances = await novita.provision({ cluster, count: 1, ...call() });
    // Described from the create itself: its id, the offer's price, the tags it was sent with.
    expect(instances.map((instance) => [instance.id, instance.status, instance.hourlyPrice])).toEqual([
      [[...fake.instances.keys()][0], "pending", 0.35],
    ]);
    expect(instances[0]?.tags["skyward:cluster"]).toBe(cluster.id);
  });

  it("a create whose answer was lost is found by its name, never created twice", async () => {
    const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    fake.faults.loseNextCreateAnswer = true;
    const [instance] = await novita.provision({ cluster, count: 1, ...call() });
    expect(creates()).toHaveLength(1);
    expect([...fake.instances.keys()]).toEqual([instance?.id]);
  });
});

describe("listing, termination, teardown", () => {
  it("lists only Skyward's instances; terminate and teardown delete them", async () => {
    const { novita, cluster } = await clusterFor({ accelerator: accelerators.RTX_4090() });
    const [first, second] = await novita.provision({ cluster, count: 2, ...call() });
    expect(((await novita.listInstances?.(call())) ?? []).map((instance) => instance.id).sort()).toEqual(
      [first?.id, second?.id].sort(),
    );
    await novita.terminate({ cluster, ids: [first?.id ?? "", "ffffffffffffffff"], ...call() });
    expect(await novita.getInstance({ cluster, id: first?.id ?? "", ...call() })).toBeNull();
    await novita.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });
});

describe("settings", () => {
  it("are refused by name before anything is asked", () => {
    expect(() => Novita({ rootfsSize: 5 })).toThrow(/Novita\.rootfsSize: expected at least 10 GB/);
    expect(() => Novita({ env: { "1BAD": "x" } })).toThrow(/Novita\.env/);
    expect(() => Novita({ cluster: "x" } as never)).toThrow(/Novita\.cluster: unknown field/);
  });

  it("say where the API key comes from when there is none", async () => {
    const saved = process.env.NOVITA_API_KEY;
    delete process.env.NOVITA_API_KEY;
    try {
      const error = await Novita({ apiUrl: fake.apiUrl })
        .offers({ query: { accelerator: { name: "A100", count: 1 }, allocation: "on-demand" }, ...call() })
        .catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect(String(error)).toMatch(/set NOVITA_API_KEY or pass apiKey/);
    } finally {
      if (saved !== undefined) process.env.NOVITA_API_KEY = saved;
    }
  });

  it('load from a skyward.toml table of type = "novita", errors under the table\'s path', async () => {
    const loaded = await createProviderFromEntry({
      name: "gpus",
      type: "novita",
      package: "@skyward/provider-novita",
      settings: { apiUrl: fake.apiUrl, apiKey: TEST_API_KEY, dockerImage: "ubuntu:24.04", rootfsSize: 100 },
    });
    expect(loaded.name).toBe("novita");
    const offers = await loaded.offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "spot" },
      ...call(),
    });
    expect(offers.map((offer) => [offer.id, offer.spotPrice])).toEqual([["novita:1:x1", 0.17]]);
    await expect(
      createProviderFromEntry({
        name: "gpus",
        type: "novita",
        package: "@skyward/provider-novita",
        settings: { dockerImage: 3 },
      }),
    ).rejects.toMatchObject({ issues: [{ path: "providers.gpus.dockerImage" }] });
  });
});

describe("several nodes", () => {
  it("instances share no network: a distributed-training plugin on several nodes is refused before Novita is asked anything", async () => {
    expectPeerPluginRefused(provider, accelerators.A100());
    expect(fake.requests).toEqual([]);
  });
});

describe("volumes", () => {
  it("are refused through sky.compute, naming each, before any instance is created", async () => {
    const error = await compute({
      provider: provider(),
      accelerator: accelerators.A100({ count: 2 }),
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
      /^the Novita provider does not mount volumes \(datasets on \/data\): its instances are containers without FUSE/,
    );
    expect(fake.requests.some((request) => request.path.endsWith("/gpu/instance/create"))).toBe(false);
    expect(fake.instances.size).toBe(0);
  });
});
