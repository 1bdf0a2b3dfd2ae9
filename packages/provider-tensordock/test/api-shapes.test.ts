/**
 * TensorDock's API as documented, where the provider once read it wrong: `GET /instances/{id}` answers
 * the bare instance (an envelope is accepted too), a VM stopped with its GPUs released is
 * `StoppedDisassociated`, sizes go in steps (2 vCPUs, 8 GB of RAM, 50 GB of storage), the API allows
 * 100 requests a minute and answers 429 with `Retry-After` past it, and a list it does not know is an
 * error rather than "no instances".
 */
import { join } from "node:path";
import { accelerators, options, spec as resolveSpec } from "@skyward/core";
import { resolvePoolSpec } from "@skyward/core/contract";
import { MachineProviderError, rateLimitFor } from "@skyward/provider-utils";
import { useFakeApi } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { TENSORDOCK_RATE_LIMITS } from "../src/tensordock-api.js";
import { TensorDock } from "../src/tensordock-provider.js";
import { startFakeTensorDock } from "./fake-tensordock.js";

const signal = () => AbortSignal.timeout(20_000);
const bare = useFakeApi({ start: () => startFakeTensorDock(), prefix: "skyward-tensordock-shapes-" });
const envelope = useFakeApi({
  start: () => startFakeTensorDock({ instanceAnswer: "envelope" }),
  prefix: "skyward-tensordock-envelope-",
});

function providerFor(api: typeof bare, settings: Parameters<typeof TensorDock>[0] = {}) {
  return TensorDock({
    apiUrl: api.fake.apiUrl,
    apiKey: api.fake.token,
    keysDirectory: api.keysDirectory,
    retryDelayMs: 1,
    ...settings,
  });
}

async function provisioned(api: typeof bare) {
  const tensordock = providerFor(api);
  const spec = resolvePoolSpec(
    resolveSpec({ accelerator: accelerators.RTX_4090(), allocation: "on-demand", region: "Austin" }),
    options({}),
  );
  const [offer] = await tensordock.offers({
    query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand", region: "Austin" },
    signal: signal(),
  });
  if (!offer) throw new Error("no offer in Austin");
  const cluster = await tensordock.prepare({ spec, offer, poolId: "pool1", signal: signal() });
  const [instance] = await tensordock.provision({ cluster, count: 1, signal: signal() });
  if (!instance) throw new Error("nothing provisioned");
  return { tensordock, cluster, instance };
}

describe("GET /instances/{id}", () => {
  it.each([
    ["bare, as documented", bare],
    ["in an envelope", envelope],
  ] as [string, typeof bare][])("is read %s", async (_shape, api) => {
    const { tensordock, cluster, instance } = await provisioned(api);
    await tensordock.getInstance({ cluster, id: instance.id, signal: signal() });
    const running = await tensordock.getInstance({ cluster, id: instance.id, signal: signal() });
    expect(running).toMatchObject({
      id: instance.id,
      status: "running",
      ssh: { port: 22, user: "user" },
      tags: { "skyward:cluster": cluster.id, "skyward:pool": "pool1" },
    });
    await tensordock.teardown({ cluster, signal: signal() });
    expect(api.fake.leftovers()).toEqual([]);
  });
});

describe("statuses", () => {
  it("a StoppedDisassociated VM is a lost node, and teardown still deletes it (it bills its storage)", async () => {
    const { tensordock, cluster, instance } = await provisioned(bare);
    const stored = bare.fake.instances.get(instance.id);
    if (!stored) throw new Error("the fake has no such instance");
    stored.status = "StoppedDisassociated";
    expect(await tensordock.getInstance({ cluster, id: instance.id, signal: signal() })).toMatchObject({
      status: "terminated",
      ssh: null,
    });
    await tensordock.teardown({ cluster, signal: signal() });
    expect(bare.fake.leftovers()).toEqual([]);
  });
});

describe("sizes", () => {
  it("are rounded up to TensorDock's steps in the offer and the create request", async () => {
    const tensordock = providerFor(bare, { minVcpus: 3, minRamGb: 10, storageGb: 120 });
    const [offer] = await tensordock.offers({
      query: {
        accelerator: { name: "RTX_4090", count: 1 },
        allocation: "on-demand",
        region: "Austin",
        vcpus: 5,
      },
      signal: signal(),
    });
    expect(offer).toMatchObject({ vcpus: 6, memoryGb: 16, diskGb: 150 });
    const spec = resolvePoolSpec(
      resolveSpec({ accelerator: accelerators.RTX_4090(), allocation: "on-demand", diskGb: 170 }),
      options({}),
    );
    if (!offer) throw new Error("no offer");
    const cluster = await tensordock.prepare({ spec, offer, poolId: "", signal: signal() });
    bare.fake.requests.length = 0;
    await tensordock.provision({ cluster, count: 1, signal: signal() });
    const create = bare.fake.requests.find((request) => request.method === "POST");
    if (!create) throw new Error("no create request");
    expect(
      (create.body as { data: { attributes: { resources: unknown } } }).data.attributes.resources,
    ).toMatchObject({
      vcpu_count: 6,
      ram_gb: 16,
      storage_gb: 200,
    });
    await tensordock.teardown({ cluster, signal: signal() });
    expect(bare.fake.leftovers()).toEqual([]);
  });
});

describe("the rate limit", () => {
  it("is 100 requests a minute per organisation, and a 429's Retry-After is waited out", async () => {
    expect(rateLimitFor(TENSORDOCK_RATE_LIMITS, "create")).toMatchObject({
      key: "account",
      burst: 100,
      minIntervalMs: 600,
    });
    bare.fake.rateLimitNext(1, 1);
    const started = Date.now();
    const offers = await providerFor(bare).offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      signal: signal(),
    });
    expect(offers.length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
  });
});

describe("lists", () => {
  it("an answer without its list of instances fails teardown and listInstances loudly", async () => {
    await using broken = await startFakeTensorDock();
    const tensordock = TensorDock({
      apiUrl: broken.apiUrl,
      apiKey: broken.token,
      keysDirectory: join(bare.keysDirectory, "broken"),
    });
    broken.breakListShape();
    const failure = await tensordock.listInstances?.({ signal: signal() }).catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure) && failure.kind).toBe("unknown-answer");
    expect(String(failure)).toMatch(
      /TensorDock's answer to listing instances was not understood: data\.instances: expected a list/,
    );
  });
});
