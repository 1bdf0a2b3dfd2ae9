import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  accelerators,
  ConfigurationError,
  NoCapacityError,
  options as poolOptions,
  type SpecInput,
  spec as toSpec,
} from "@skyward/core";
import { createProviderFromEntry } from "@skyward/core/config";
import { type Offer, offerQuery, resolvePoolSpec } from "@skyward/core/contract";
import { tagsFromDescription, tagsToDescription } from "@skyward/provider-utils";
import { expectPeerPluginRefused } from "@skyward/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type FakeVerda,
  INSTANCE_TYPES,
  startFakeVerda,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
} from "../test/fake-verda.js";
import { VerdaApiError } from "./verda-api.js";
import { Verda, type VerdaSettings } from "./verda-provider.js";

let fake: FakeVerda;
let keysDirectory: string;
const call = () => ({ signal: AbortSignal.timeout(10_000) });

beforeAll(async () => {
  fake = await startFakeVerda();
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-verda-keys-"));
});
afterAll(async () => {
  await fake[Symbol.asyncDispose]();
  await rm(keysDirectory, { recursive: true, force: true });
});
beforeEach(() => fake.reset());

function provider(settings: VerdaSettings = {}) {
  return Verda({
    clientId: TEST_CLIENT_ID,
    clientSecret: TEST_CLIENT_SECRET,
    apiUrl: fake.apiUrl,
    keysDirectory,
    retryDelayMs: 1,
    ...settings,
  });
}

async function clusterFor(
  input: Omit<SpecInput, "provider">,
  settings: VerdaSettings = {},
  pick: (offers: readonly Offer[]) => Offer | undefined = (offers) => offers[0],
) {
  const verda = provider(settings);
  const spec = resolvePoolSpec(toSpec({ ...input, provider: verda }), poolOptions({}));
  const offer = pick(await verda.offers({ query: offerQuery(spec), ...call() }));
  if (!offer) throw new Error("no offer picked");
  const cluster = await verda.prepare({ spec, offer, poolId: "p1a2b3c4", ...call() });
  return { verda, cluster };
}

const deploys = () =>
  fake.requests.filter((request) => request.method === "POST" && request.path === "/v1/instances");

describe("offers", () => {
  it("one offer per instance type and location with capacity, spot and on-demand prices from /instance-types", async () => {
    const offers = await provider().offers({
      query: { accelerator: { name: "H100", count: 1 }, allocation: "spot-if-available" },
      ...call(),
    });
    expect(offers).toHaveLength(1);
    expect(offers[0]).toMatchObject({
      id: "verda:FIN-01:1H100.80S.30V",
      provider: "verda",
      instanceType: "1H100.80S.30V",
      accelerator: { name: "H100", count: 1, memoryGb: 80, formFactor: "SXM" },
      vcpus: 30,
      memoryGb: 120,
      architecture: "x86_64",
      region: "FIN-01",
      spotPrice: 0.95,
      onDemandPrice: 2.19,
      specific: { instanceType: "1H100.80S.30V", location: "FIN-01" },
    });
    // Prices in USD; availability asked for both markets.
    const asked = fake.requests.map((request) => `${request.method} ${request.path}?${request.query}`);
    expect(asked).toContain("GET /v1/instance-types?currency=usd");
    expect(asked).toContain("GET /v1/instance-availability?is_spot=true");
    expect(asked).toContain("GET /v1/instance-availability?is_spot=false");
  });

  it("labels the form factor the GPU description says (`1x A100 SXM4 80GB`) and honours one asked for", async () => {
    const a100 = async (formFactor?: string) =>
      (
        await provider().offers({
          query: {
            accelerator: { name: "A100", count: 1, ...(formFactor ? { formFactor } : {}) },
            allocation: "on-demand",
          },
          ...call(),
        })
      ).map((offer) => [offer.id, offer.accelerator?.formFactor]);
    expect(await a100("SXM")).toEqual([["verda:ICE-01:1A100.80S.22V", "SXM"]]);
    // Verda's instance types (the fixture follows its documented answer) have no PCIe A100.
    expect(await a100("PCIe")).toEqual([]);
    expect(await a100()).toEqual([["verda:ICE-01:1A100.80S.22V", "SXM"]]);
  });

  it("counts GPUs per instance: two A100s are another type; a location is kept to the spec's region or the setting", async () => {
    const two = await provider().offers({
      query: { accelerator: { name: "A100", count: 2 }, allocation: "on-demand" },
      ...call(),
    });
    expect(
      two.map((offer) => [offer.id, offer.accelerator?.memoryGb, offer.spotPrice, offer.onDemandPrice]),
    ).toEqual([["verda:ICE-01:2A100.80S.44V", 80, null, 2.58]]);
    // On-demand only: the spot market is not asked.
    expect(fake.requests.some((request) => request.query.get("is_spot") === "true")).toBe(false);
    const cpu = { accelerator: null, allocation: "on-demand" } as const;
    expect(
      (await provider({ location: "ICE-01" }).offers({ query: cpu, ...call() })).map((offer) => offer.id),
    ).toEqual(["verda:ICE-01:CPU.4V.16G"]);
    expect(
      (await provider({ location: "ICE-01" }).offers({ query: { ...cpu, region: "FIN-01" }, ...call() })).map(
        (offer) => offer.id,
      ),
    ).toEqual(["verda:FIN-01:CPU.4V.16G", "verda:FIN-01:CPU.8V.32G"]);
  });
});

describe("prepare and provision", () => {
  it("registers the key pair as an SSH key named after the cluster and pool, and deploys with it", async () => {
    const { verda, cluster } = await clusterFor({
      accelerator: accelerators.H100(),
      allocation: "spot",
      diskGb: 200,
    });
    const [key] = [...fake.sshKeys.values()];
    expect(key?.name).toBe(`${cluster.id}_p1a2b3c4`);
    expect(key?.key).toMatch(/^ssh-ed25519 /);
    expect(cluster.specific).toMatchObject({
      sshKeyId: key?.id,
      image: "ubuntu-24.04-cuda-13.0-open",
      osVolumeGb: 200,
    });
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    const [script] = [...fake.scripts.values()];
    expect(script?.name).toBe(`${cluster.id}_p1a2b3c4`);
    expect(deploys()[0]?.body).toEqual({
      instance_type: "1H100.80S.30V",
      image: "ubuntu-24.04-cuda-13.0-open",
      ssh_key_ids: [key?.id],
      startup_script_id: script?.id,
      hostname: `${cluster.id}-0`,
      description: `skyward skyward:cluster=${cluster.id} skyward:pool=p1a2b3c4 skyward:offer=verda:FIN-01:1H100.80S.30V skyward:spot=1 skyward:region=FIN-01`,
      location_code: "FIN-01",
      is_spot: true,
      // The offer's fixed price, never one that moves; a discontinued spot instance's volume deleted.
      pricing: "FIXED_PRICE",
      os_volume: { name: `${cluster.id}-0-os`, size: 200, on_spot_discontinue: "delete_permanently" },
    });
    expect(instance).toMatchObject({
      status: "pending",
      ssh: null,
      spot: true,
      hourlyPrice: 0.95,
      offerId: "verda:FIN-01:1H100.80S.30V",
      tags: { "skyward:cluster": cluster.id, "skyward:pool": "p1a2b3c4" },
    });
    // Booted: reachable as root on its address with the key pair.
    const running = await verda.getInstance({ cluster, id: instance?.id ?? "", ...call() });
    expect(running).toMatchObject({
      status: "running",
      ssh: { host: running?.publicIp, port: 22, user: "root", identityFile: cluster.specific.identityFile },
    });
  });

  it("CPU instances get plain Ubuntu; `image` and `cuda` choose the OS image among the type's `supported_os`", async () => {
    const cpu = await clusterFor({});
    expect(cpu.cluster.specific.image).toBe("ubuntu-24.04");
    expect(
      (await clusterFor({ accelerator: accelerators.H100() }, { cuda: "12.8" })).cluster.specific.image,
    ).toBe("ubuntu-24.04-cuda-12.8-open");
    // The A100 types list no CUDA 12.8 image: the type's newest CUDA image instead.
    expect(
      (await clusterFor({ accelerator: accelerators.A100() }, { cuda: "12.8" })).cluster.specific.image,
    ).toBe("ubuntu-24.04-cuda-13.0-open");
    const custom = await clusterFor({}, { image: "ubuntu-22.04", osVolumeGb: 120 });
    await custom.verda.provision({ cluster: custom.cluster, count: 1, ...call() });
    expect(deploys().at(-1)?.body).toMatchObject({ image: "ubuntu-22.04", os_volume: { size: 120 } });
    // An image the type does not take is refused by name before anything is registered.
    const error = await clusterFor({}, { image: "ubuntu-22.04-cuda-12.4-docker" }).catch(
      (caught: unknown) => caught,
    );
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(String((error as ConfigurationError).issues[0]?.message)).toMatch(
      /ubuntu-22\.04-cuda-12\.4-docker is not an OS image of Verda's CPU\.4V\.16G \(it takes ubuntu-24\.04, ubuntu-22\.04\)/,
    );
  });

  it("the type's newest CUDA image compares versions by number: CUDA 12.10 is newer than 12.9", async () => {
    // The A100 types' `supported_os` (the instance-types answer's list of image names) with two CUDA 12 images.
    const a100 = INSTANCE_TYPES.filter((type) => type.model === "A100");
    const listed = a100.map((type) => type.supported_os);
    for (const type of a100)
      type.supported_os = ["ubuntu-24.04-cuda-12.9-open", "ubuntu-24.04-cuda-12.10-open", "ubuntu-24.04"];
    try {
      const { cluster } = await clusterFor({ accelerator: accelerators.A100() }, { cuda: "12.8" });
      expect(cluster.specific.image).toBe("ubuntu-24.04-cuda-12.10-open");
    } finally {
      a100.forEach((type, index) => {
        type.supported_os = listed[index] ?? [];
      });
    }
  });

  it('"Operating system is not valid for this instance type" is a bad request, not "no capacity"', async () => {
    const { verda, cluster } = await clusterFor({
      accelerator: accelerators.H100(),
      allocation: "on-demand",
    });
    const type = INSTANCE_TYPES[0];
    const supported = type?.supported_os ?? [];
    if (type) type.supported_os = ["ubuntu-24.04-cuda-12.8-open-docker"];
    try {
      const error = await verda
        .provision({ cluster, count: 1, ...call() })
        .catch((caught: unknown) => caught);
      expect(VerdaApiError.isInstance(error) && error.kind).toBe("bad-request");
      expect(String(error)).toMatch(/Operating system is not valid for this instance type/);
      expect(deploys()).toHaveLength(1);
    } finally {
      if (type) type.supported_os = supported;
    }
  });

  it("the price cap holds on the market launched: spot out of capacity, on demand over the cap is never deployed", async () => {
    fake.capacity.spot = 0;
    // Spot $0.95/h is under the cap, on demand $2.19/h is over it.
    const { verda, cluster } = await clusterFor({ accelerator: accelerators.H100(), maxHourlyCost: 1.5 });
    const error = await verda.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      "on-demand: $2.19/h is over maxHourlyCost $1.5/h",
      expect.stringMatching(/^spot: .*Not enough resources/),
    ]);
    expect(deploys().map((request) => (request.body as { is_spot: boolean }).is_spot)).toEqual([true]);
  });

  it("an instance Verda cannot read yet right after its deploy is kept, not lost", async () => {
    const { verda, cluster } = await clusterFor({});
    fake.faults.notFoundReads = 1;
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    expect(instance).toMatchObject({
      id: [...fake.instances.keys()][0],
      status: "pending",
      hourlyPrice: 0.0155,
    });
    expect(instance?.tags).toMatchObject({ "skyward:cluster": cluster.id });
  });

  it("a deploy whose answer was lost is found by its hostname, never deployed twice", async () => {
    const { verda, cluster } = await clusterFor({});
    fake.faults.loseNextDeployAnswer = true;
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    expect(deploys()).toHaveLength(1);
    expect([...fake.instances.keys()]).toEqual([instance?.id]);
  });

  it("spot-if-available falls back to on-demand when the spot market is out, and NoCapacityError says why when both are", async () => {
    fake.capacity.spot = 1;
    fake.capacity.onDemand = 1;
    const { verda, cluster } = await clusterFor({ accelerator: accelerators.H100() });
    const instances = await verda.provision({ cluster, count: 3, ...call() });
    expect(instances.map((instance) => instance.spot)).toEqual([true, false]);
    expect(deploys().map((request) => (request.body as { is_spot: boolean }).is_spot)).toEqual([
      true,
      true,
      false,
      false,
    ]);
    const error = await verda.provision({ cluster, count: 1, ...call() }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts.map((attempt) => attempt.reason)).toEqual([
      expect.stringMatching(/^spot: .*Not enough resources/),
      expect.stringMatching(/^on-demand: .*Not enough resources/),
    ]);
  });
});

describe("listing, termination, teardown, cleanup", () => {
  it("lists only Skyward's instances, by the tags in their description; terminate and teardown delete them and the key", async () => {
    const { verda, cluster } = await clusterFor({});
    const [first, second] = await verda.provision({ cluster, count: 2, ...call() });
    const listed = (await verda.listInstances?.(call())) ?? [];
    expect(listed.map((instance) => instance.id).sort()).toEqual([first?.id, second?.id].sort());
    expect(listed[0]?.tags).toMatchObject({ "skyward:cluster": cluster.id, "skyward:pool": "p1a2b3c4" });
    await verda.terminate({
      cluster,
      ids: [first?.id ?? "", "00000000-0000-4000-8000-000000000000"],
      ...call(),
    });
    const deletion = fake.requests.find((request) => request.method === "PUT");
    // With its OS volume, past the trash: a deleted instance leaves nothing billing.
    expect(deletion?.body).toEqual({
      action: "delete",
      id: [first?.id],
      volume_ids: [fake.instances.size === 1 ? expect.any(String) : ""],
      delete_permanently: true,
    });
    expect(await verda.getInstance({ cluster, id: first?.id ?? "", ...call() })).toBeNull();
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("cleanup removes the SSH keys and startup scripts of pools without instances, keeps those of live pools", async () => {
    const live = await clusterFor({});
    await live.verda.provision({ cluster: live.cluster, count: 1, ...call() });
    const dead = await clusterFor({});
    await fake.sshKeys.set("someone-elses", {
      id: "someone-elses",
      name: "laptop",
      key: "ssh-ed25519 AAAA",
      fingerprint: "x",
    });
    const result = await live.verda.cleanup?.({ pools: "all", ...call() });
    expect(result?.removed).toEqual(
      ["SSH key", "startup script"].map((kind) => ({
        poolId: "p1a2b3c4",
        kind,
        id: `${dead.cluster.id}_p1a2b3c4`,
      })),
    );
    expect(result?.left).toEqual(
      ["SSH key", "startup script"].map((kind) => ({
        poolId: "p1a2b3c4",
        kind,
        id: `${live.cluster.id}_p1a2b3c4`,
        reason: "pool p1a2b3c4 still has instances",
      })),
    );
    expect([...fake.sshKeys.values()].map((key) => key.name).sort()).toEqual(
      [`${live.cluster.id}_p1a2b3c4`, "laptop"].sort(),
    );
  });

  it("cleanup reads every page of the startup scripts (GET /scripts is paged, 100 at most a page)", async () => {
    const { verda } = await clusterFor({});
    // Others' scripts fill the first page: a pool's script on the second must still be found.
    for (let index = 0; index < 120; index += 1)
      fake.scripts.set(`other-${index}`, {
        id: `other-${index}`,
        name: `script ${index}`,
        script: "#!/bin/sh",
      });
    fake.scripts.set("late", { id: "late", name: "verda-0badcafe_late", script: "#!/bin/sh" });
    const result = await verda.cleanup?.({ pools: ["late"], ...call() });
    expect(result?.removed).toEqual([{ poolId: "late", kind: "startup script", id: "verda-0badcafe_late" }]);
    const reads = fake.requests.filter(
      (request) => request.method === "GET" && request.path.endsWith("/scripts"),
    );
    expect(reads.map((request) => request.query.get("page"))).toEqual(["1", "2"]);
    expect(fake.scripts.has("late")).toBe(false);
  });

  it("a delete answered 207 is read per instance: one refused while provisioning is deleted again until gone", async () => {
    const { verda, cluster } = await clusterFor({});
    const [provisioning, running] = await verda.provision({ cluster, count: 2, ...call() });
    await verda.getInstance({ cluster, id: running?.id ?? "", ...call() });
    fake.faults.refuseDeleteWhileProvisioning = true;
    const booted = setTimeout(() => {
      const instance = fake.instances.get(provisioning?.id ?? "");
      if (instance) instance.status = "running";
    }, 200);
    try {
      await verda.terminate({ cluster, ids: [provisioning?.id ?? "", running?.id ?? ""], ...call() });
    } finally {
      clearTimeout(booted);
    }
    const deletes = fake.requests
      .filter((request) => request.method === "PUT")
      .map((request) => request.body);
    expect(deletes[0]).toMatchObject({ id: [provisioning?.id, running?.id] });
    expect(deletes.slice(1).every((body) => (body as { id: string[] }).id.join() === provisioning?.id)).toBe(
      true,
    );
    expect(deletes.length).toBeGreaterThan(1);
    expect(fake.instances.size).toBe(0);
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("an instance the list does not show yet is looked up by id and deleted, not counted gone", async () => {
    const { verda, cluster } = await clusterFor({});
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    fake.faults.unlisted.add(instance?.id ?? "");
    await verda.terminate({ cluster, ids: [instance?.id ?? ""], ...call() });
    expect(fake.instances.size).toBe(0);
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("a spot instance Verda discontinues leaves no OS volume behind", async () => {
    const { verda, cluster } = await clusterFor({ allocation: "spot" });
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    expect(deploys()[0]?.body).toMatchObject({
      os_volume: { size: 100, on_spot_discontinue: "delete_permanently" },
    });
    fake.discontinue(instance?.id ?? "");
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("the startup script arms a boot watchdog and a self-destruct that deletes the instance and its volume through the API", async () => {
    const { verda, cluster } = await clusterFor({ ttl: 600 });
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    if (!instance) throw new Error("no instance");
    const script = [...fake.scripts.values()][0]?.script ?? "";
    // The watchdog: no worker within ttl + sshTimeout + bootstrapTimeout of boot, and the instance ends itself.
    const seconds = Math.ceil(cluster.spec.ttl + cluster.spec.sshTimeout + cluster.spec.bootstrapTimeout);
    expect(script).toContain(`remaining=$((${seconds} - up))`);
    expect(script).toMatch(/then \/usr\/local\/sbin\/skyward-self-destruct '?--self'?; fi/);
    const command = verda.selfDestruct({ cluster, instance });
    expect(command.replaceAll("'", "")).toBe(`/usr/local/sbin/skyward-self-destruct ${instance.id}`);
    // The program the script installs, run against the fake as the instance would run it.
    const program = /cat > '?[^'\s]+\.py'? <<'SKYWARD_PY'\n([\s\S]*?)\nSKYWARD_PY/.exec(script)?.[1] ?? "";
    expect(script).not.toMatch(new RegExp(`skyward-self-destruct[^\n]*${TEST_CLIENT_SECRET}`));
    await writeFile(join(keysDirectory, "self-destruct.py"), program);
    await writeFile(join(keysDirectory, "credentials"), `${TEST_CLIENT_ID}\n${TEST_CLIENT_SECRET}\n`);
    const ran = await promisify(execFile)("python3", [
      join(keysDirectory, "self-destruct.py"),
      fake.apiUrl,
      join(keysDirectory, "credentials"),
      instance.id,
    ]);
    expect(ran.stdout).toBe(`skyward: deleted instance ${instance.id}\n`);
    expect(fake.instances.size).toBe(0);
    expect(fake.requests.find((request) => request.method === "PUT")?.body).toMatchObject({
      id: [instance.id],
      delete_permanently: true,
    });
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("the self-destruct takes a list answer of an unknown shape for a failure tried again, never 'nothing to delete'", async () => {
    const { verda, cluster } = await clusterFor({});
    const [instance] = await verda.provision({ cluster, count: 1, ...call() });
    const script = [...fake.scripts.values()][0]?.script ?? "";
    const program = /cat > '?[^'\s]+\.py'? <<'SKYWARD_PY'\n([\s\S]*?)\nSKYWARD_PY/.exec(script)?.[1] ?? "";
    await writeFile(join(keysDirectory, "self-destruct.py"), program);
    await writeFile(join(keysDirectory, "credentials"), `${TEST_CLIENT_ID}\n${TEST_CLIENT_SECRET}\n`);
    fake.switches.breakListShape(true);
    const programArguments = [
      join(keysDirectory, "self-destruct.py"),
      fake.apiUrl,
      join(keysDirectory, "credentials"),
    ];
    const failed = await promisify(execFile)("python3", [...programArguments, "--self"], {
      env: { ...process.env, SKYWARD_RETRY_SECONDS: "0" },
    }).catch((error: { code?: number; stderr?: string }) => error);
    expect("code" in failed && failed.code).toBe(1);
    expect("stderr" in failed && failed.stderr).toContain("the list answer is of an unknown shape");
    expect(fake.instances.has(instance?.id ?? "")).toBe(true);
    fake.switches.breakListShape(false);
    await verda.teardown({ cluster, ...call() });
    expect(fake.leftovers()).toEqual([]);
  });

  it("tags survive the description round trip", () => {
    const tags = { "skyward:cluster": "verda-0a1b2c3d", "skyward:pool": "p1", "skyward:spot": "0" };
    expect(tagsFromDescription(tagsToDescription(tags))).toEqual(tags);
    expect(tagsFromDescription("my own machine")).toEqual({});
  });
});

describe("credentials and tokens", () => {
  it("gets one token for many calls, and a revoked token is renewed once", async () => {
    const verda = provider();
    const query = { accelerator: null, allocation: "on-demand" } as const;
    await verda.offers({ query, ...call() });
    await verda.offers({ query, ...call() });
    const tokenRequests = () => fake.requests.filter((request) => request.path === "/v1/oauth2/token");
    expect(tokenRequests()).toHaveLength(1);
    fake.tokens.clear();
    expect(await verda.offers({ query, ...call() })).not.toHaveLength(0);
    expect(tokenRequests()).toHaveLength(2);
  });

  it("asks for a token again when the token service fails for a moment (5xx), as every other call is", async () => {
    // Every call needs a token: a token request failed once failed the call with it — a teardown, say,
    // whose instances then billed on until `skyward down` was run again.
    fake.faults.tokenFailures = 2;
    const offers = await provider().offers({
      query: { accelerator: null, allocation: "on-demand" },
      ...call(),
    });
    expect(offers).not.toHaveLength(0);
    expect(fake.requests.filter((request) => request.path === "/v1/oauth2/token")).toHaveLength(3);
  });

  it("refuses wrong credentials by name, without the secret", async () => {
    const error = await provider({ clientSecret: "wrong-secret-value" })
      .offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() })
      .catch((caught: unknown) => caught);
    expect(VerdaApiError.isInstance(error)).toBe(true);
    expect(String(error)).toMatch(
      /Verda rejected the client credentials \(HTTP 401\).*VERDA_CLIENT_ID and VERDA_CLIENT_SECRET/,
    );
    expect(String(error)).not.toContain("wrong-secret-value");
  });

  it("says which credential is missing before anything is created", async () => {
    const saved = { id: process.env.VERDA_CLIENT_ID, secret: process.env.VERDA_CLIENT_SECRET };
    delete process.env.VERDA_CLIENT_ID;
    delete process.env.VERDA_CLIENT_SECRET;
    try {
      const error = await Verda({ apiUrl: fake.apiUrl, keysDirectory })
        .offers({ query: { accelerator: null, allocation: "on-demand" }, ...call() })
        .catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).issues).toEqual([
        { path: "clientId", message: "Verda client id is missing: set VERDA_CLIENT_ID or pass clientId" },
        {
          path: "clientSecret",
          message: "Verda client secret is missing: set VERDA_CLIENT_SECRET or pass clientSecret",
        },
      ]);
      expect(fake.requests).toEqual([]);
    } finally {
      if (saved.id !== undefined) process.env.VERDA_CLIENT_ID = saved.id;
      if (saved.secret !== undefined) process.env.VERDA_CLIENT_SECRET = saved.secret;
    }
  });
});

describe("settings", () => {
  it("are refused by name before anything is asked", () => {
    expect(() => Verda({ cuda: "thirteen" })).toThrow(/Verda\.cuda: expected a CUDA version like "12\.8"/);
    expect(() => Verda({ osVolumeGb: 1.5 })).toThrow(/Verda\.osVolumeGb/);
    expect(() => Verda({ apiUrl: "not a url" })).toThrow(/Verda\.apiUrl/);
    expect(() => Verda({ region: "FIN-01" } as never)).toThrow(/Verda\.region: unknown field/);
  });

  it('load from a skyward.toml table of type = "verda", errors under the table\'s path', async () => {
    const loaded = await createProviderFromEntry({
      name: "fin",
      type: "verda",
      package: "@skyward/provider-verda",
      settings: {
        apiUrl: fake.apiUrl,
        location: "FIN-01",
        clientId: TEST_CLIENT_ID,
        clientSecret: TEST_CLIENT_SECRET,
      },
    });
    expect(loaded.name).toBe("verda");
    const offers = await loaded.offers({ query: { accelerator: null, allocation: "spot" }, ...call() });
    expect(offers.map((offer) => offer.id)).toEqual(["verda:FIN-01:CPU.4V.16G"]);
    await expect(
      createProviderFromEntry({
        name: "fin",
        type: "verda",
        package: "@skyward/provider-verda",
        settings: { osVolumeGb: "big" },
      }),
    ).rejects.toMatchObject({ issues: [{ path: "providers.fin.osVolumeGb" }] });
  });
});

describe("several nodes", () => {
  it("Verda documents no network between instances: a distributed-training plugin on several nodes is refused before Verda is asked anything", async () => {
    fake.reset();
    expectPeerPluginRefused(provider, accelerators.H100());
    expect(fake.requests).toEqual([]);
  });
});
