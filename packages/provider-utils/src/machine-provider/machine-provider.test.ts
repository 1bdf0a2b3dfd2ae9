/**
 * The machine-provider base driven through a whole provider (`defineMachineProvider`) over an adapter
 * whose API is an in-memory machine store that injects the faults of real APIs: capacity refusals,
 * a create accepted but its answer lost, a batch delete answered per machine (207) with refusals while
 * provisioning, an answer in an unknown shape, prices that move after the offer, and a list that shows
 * a machine only a while after its create (an eventually consistent list).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  accelerators,
  ConfigurationError,
  NoCapacityError,
  options,
  spec as resolveSpec,
} from "@skyward/core";
import { type Cluster, type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MachineAdapter, MachineDeleteOutcome } from "./adapter.js";
import { MachineProviderError, machineErrorFactory } from "./errors.js";
import { defineMachineProvider } from "./machine-provider.js";

interface FakeMachine {
  id: string;
  name: string;
  spot: boolean;
  price: number;
  status: "provisioning" | "running" | "deleting";
}

/** Faults the fake API injects; each is consumed as it fires. */
interface Faults {
  /** Markets answering "no capacity". */
  noCapacity: Set<"spot" | "on-demand">;
  /** Creates that are carried out but whose answer is lost (a timeout after the API took them). */
  lostCreateAnswers: number;
  /** Delete refusals per machine while it provisions (the machine then runs). */
  busyDeletes: number;
  /** The price the API bills at, whatever the offer said. */
  billedPrice?: number;
  /** Answer the list without its list of machines. */
  unknownListShape: boolean;
  /** Machines per list page. */
  pageSize: number;
  /** The list ignores its cursor: every page is the whole list, and says there is a next one. */
  ignoresCursor: boolean;
  /** Lists that do not show yet the machines whose create answer was lost. */
  listLag: number;
  /** A market that made a machine has no more capacity (the last of its kind was taken, by this pool). */
  fullAfterCreate: boolean;
}

const makeError = machineErrorFactory({
  provider: "fake",
  classify: ({ message }) => (/no capacity/i.test(message) ? "capacity" : undefined),
});

function fakeApi(idempotencyToken = false) {
  const machines = new Map<string, FakeMachine>();
  const byIdempotencyKey = new Map<string, string>();
  const calls: string[] = [];
  const faults: Faults = {
    noCapacity: new Set(),
    lostCreateAnswers: 0,
    busyDeletes: 0,
    unknownListShape: false,
    pageSize: 100,
    ignoresCursor: false,
    listLag: 0,
    fullAfterCreate: false,
  };
  /** Machines whose create answer was lost, not listed while `listLag` lasts. */
  const lagging = new Set<string>();
  let made = 0;
  const adapter: MachineAdapter<FakeMachine> = {
    name: "fake",
    label: "Fake",
    capabilities: {
      spot: true,
      offerCache: "marketplace",
      peerNetwork: "none",
    },
    sshUser: "root",
    keyName: "fake_ed25519",
    keysDirectory: "",
    idempotencyToken,
    bootWatchdog: "boot-command",
    deleteRetryDelayMs: 5,
    deleteTimeoutMs: 2000,
    lostCreateWaitMs: 200,
    checkCredentials: () => {},
    offers: async () => [],
    async create({ spot, name, hourlyPrice, idempotencyKey }) {
      calls.push(`create ${spot ? "spot" : "on-demand"} ${name}`);
      const full = faults.fullAfterCreate && [...machines.values()].some((machine) => machine.spot === spot);
      if (faults.noCapacity.has(spot ? "spot" : "on-demand") || full)
        throw makeError({ statusCode: 400, message: "Fake: no capacity" });
      const known = idempotencyToken ? byIdempotencyKey.get(idempotencyKey) : undefined;
      const machine = (known && machines.get(known)) || {
        id: `m-${++made}`,
        name,
        spot,
        price: faults.billedPrice ?? hourlyPrice,
        status: "provisioning" as const,
      };
      machines.set(machine.id, machine);
      byIdempotencyKey.set(idempotencyKey, machine.id);
      if (faults.lostCreateAnswers > 0) {
        faults.lostCreateAnswers -= 1;
        lagging.add(machine.id);
        throw makeError({ message: "Fake's API could not be reached: ETIMEDOUT" });
      }
      return machine;
    },
    async get(id) {
      calls.push(`get ${id}`);
      return machines.get(id) ?? null;
    },
    async listPage(cursor) {
      calls.push(`list ${cursor ?? "first"}`);
      if (faults.unknownListShape) return { machines: undefined } as never;
      const lags = faults.listLag > 0;
      if (lags) faults.listLag -= 1;
      const all = [...machines.values()].filter((machine) => !lags || !lagging.has(machine.id));
      const start = Number(cursor ?? 0);
      if (faults.ignoresCursor) return { machines: all, next: String(start + faults.pageSize) };
      const next = start + faults.pageSize < all.length ? String(start + faults.pageSize) : undefined;
      return { machines: all.slice(start, start + faults.pageSize), next };
    },
    delete: {
      // A batch delete answering per machine, as Verda's 207 does.
      async batch(ids) {
        calls.push(`delete ${ids.join(",")}`);
        const outcomes = new Map<string, MachineDeleteOutcome>();
        for (const id of ids) {
          const machine = machines.get(id);
          if (!machine) outcomes.set(id, "gone");
          else if (id === "m-refused") outcomes.set(id, { error: new Error("protected") });
          else if (machine.status === "provisioning" && faults.busyDeletes > 0) {
            faults.busyDeletes -= 1;
            outcomes.set(id, "busy");
          } else {
            machines.delete(id);
            outcomes.set(id, "deleted");
          }
        }
        return outcomes;
      },
    },
    idOf: (machine) => machine.id,
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (machine) => machine.name,
      read: (machine): Record<string, string> => {
        const cluster = /^(skyward-[0-9a-f]{8})-\d+$/.exec(machine.name)?.[1];
        return cluster ? { "skyward:cluster": cluster } : {};
      },
    },
    describe: (machine) => ({
      id: machine.id,
      status: machine.status === "running" ? "running" : "pending",
      publicIp: null,
      privateIp: null,
      ssh: null,
      spot: machine.spot,
      hourlyPrice: machine.price,
      offerId: "",
      createdAt: 0,
      tags: {},
    }),
    selfDestruct: (instance) => `fake-delete ${instance.id}`,
  };
  return { adapter, machines, calls, faults };
}

let keys = "";
beforeAll(async () => {
  keys = await mkdtemp(join(tmpdir(), "skyward-machine-provider-"));
});
afterAll(async () => {
  await rm(keys, { recursive: true, force: true });
});

const offer = (spotPrice: number | null, onDemandPrice: number | null): Offer => ({
  id: "fake:gpu",
  provider: "fake",
  instanceType: "gpu.1",
  accelerator: { name: "H100", count: 1, memoryGb: 80 },
  vcpus: 8,
  memoryGb: 64,
  diskGb: 100,
  architecture: "x86_64",
  region: "here",
  spotPrice,
  onDemandPrice,
  billingUnit: "second",
  pricesAsOf: new Date().toISOString(),
  specific: {},
});

async function setUp(
  allocation: "cheapest" | "spot-if-available" | "on-demand",
  prices: Offer,
  maxHourlyCost?: number,
  idempotencyToken = false,
) {
  const api = fakeApi(idempotencyToken);
  const provider = defineMachineProvider({ ...api.adapter, keysDirectory: keys });
  const spec = resolvePoolSpec(
    resolveSpec({
      accelerator: accelerators.H100(),
      allocation,
      ...(maxHourlyCost ? { maxHourlyCost } : {}),
    }),
    options({}),
  );
  const cluster = (await provider.prepare({
    spec,
    offer: prices,
    poolId: "pool1",
    signal: AbortSignal.timeout(5000),
  })) as Cluster<{ publicKey: string; identityFile: string }>;
  return { ...api, provider, cluster, signal: AbortSignal.timeout(10_000) };
}

describe("the market loop", () => {
  it("checks the cap on the market actually launched: spot full, on-demand over the cap is never created", async () => {
    // The pool judged the offer by its $1.17 spot price; on demand costs $3.67, over the $2 cap.
    const { provider, cluster, calls, faults, signal, machines } = await setUp(
      "cheapest",
      offer(1.17, 3.67),
      2,
    );
    faults.noCapacity.add("spot");
    const failure = await provider.provision({ cluster, count: 1, signal }).catch((error: unknown) => error);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect(String(failure)).toMatch(/spot: Fake: no capacity/);
    expect(String(failure)).toMatch(/on-demand: \$3\.67\/h is over maxHourlyCost \$2\/h/);
    expect(calls.filter((call) => call.startsWith("create"))).toEqual([`create spot ${cluster.id}-0`]);
    expect(machines.size).toBe(0);
  });

  it("falls back to on demand within the cap, and never launches where the price is unknown", async () => {
    const within = await setUp("cheapest", offer(1, 1.5), 2);
    within.faults.noCapacity.add("spot");
    const [made] = await within.provider.provision({
      cluster: within.cluster,
      count: 1,
      signal: within.signal,
    });
    expect(made).toMatchObject({ spot: false, hourlyPrice: 1.5, offerId: "fake:gpu" });

    const unknown = await setUp("on-demand", offer(1, null));
    const failure = await unknown.provider
      .provision({ cluster: unknown.cluster, count: 1, signal: unknown.signal })
      .catch((error: unknown) => error);
    expect(String(failure)).toMatch(/on-demand: no known price, never launched/);
    expect(unknown.calls).toEqual([]);
  });

  it("deletes a machine the API bills above the cap (the price moved) and says so", async () => {
    const { provider, cluster, faults, signal, machines } = await setUp("on-demand", offer(null, 1.8), 2);
    faults.billedPrice = 2.4;
    const failure = await provider.provision({ cluster, count: 1, signal }).catch((error: unknown) => error);
    expect(String(failure)).toMatch(/launched at \$2\.4\/h, over maxHourlyCost \$2\/h; deleted/);
    expect(machines.size).toBe(0);
  });
});

describe("idempotent create", () => {
  it("finds the machine by its name after a lost answer instead of creating a second", async () => {
    const { provider, cluster, faults, calls, signal, machines } = await setUp("on-demand", offer(null, 1));
    faults.lostCreateAnswers = 1;
    const made = await provider.provision({ cluster, count: 1, signal });
    expect(made.map((instance) => instance.id)).toEqual(["m-1"]);
    expect(machines.size).toBe(1);
    expect(calls).toEqual([`create on-demand ${cluster.id}-0`, "list first"]);
  });

  it("names a machine after those the cluster has when another provider object made them (an attached pool growing)", async () => {
    const { provider, adapter, cluster, faults, signal, machines } = await setUp("on-demand", offer(null, 1));
    const [first] = await provider.provision({ cluster, count: 1, signal });
    // Another process attaches to the pool and grows it: a new provider object over the same API.
    const attached = defineMachineProvider({ ...adapter, keysDirectory: keys });
    faults.lostCreateAnswers = 1;
    const [added] = await attached.provision({ cluster, count: 1, signal });
    // The lost answer's machine is found by a name of its own, never taken for the pool's first node.
    expect(added?.id).toBe("m-2");
    expect(added?.id).not.toBe(first?.id);
    expect([...machines.values()].map((machine) => machine.name).sort()).toEqual([
      `${cluster.id}-0`,
      `${cluster.id}-1`,
    ]);
  });

  /** Spot first; its create carried out but its answer lost, the list `listLag` answers behind, spot full then. */
  async function lostBehindTheList(listLag: number) {
    const api = await setUp("spot-if-available", offer(1, 1.5));
    Object.assign(api.faults, { lostCreateAnswers: 1, listLag, fullAfterCreate: true });
    return api;
  }

  it("a lost answer, the list not showing the machine yet and the retry refused for capacity: waits for the machine, never makes a second", async () => {
    const { provider, cluster, calls, signal, machines } = await lostBehindTheList(2);
    const made = await provider.provision({ cluster, count: 1, signal });
    expect(made.map((instance) => instance.id)).toEqual(["m-1"]);
    expect(machines.size).toBe(1);
    expect(calls.filter((call) => call.startsWith("create"))).toEqual([
      `create spot ${cluster.id}-0`,
      `create spot ${cluster.id}-0`,
    ]);
  });

  it("a lost answer whose machine is still not listed after the wait stops the market loop, naming the machine", async () => {
    const { provider, cluster, calls, signal, machines } = await lostBehindTheList(1_000);
    const failure = await provider.provision({ cluster, count: 1, signal }).catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure) && failure.kind).toBe("unavailable");
    expect(String(failure)).toMatch(new RegExp(`${cluster.id}-0.*not listed`));
    // No machine on demand in its place: the lost one is the only one, and teardown finds it by name.
    expect(calls.filter((call) => call.startsWith("create on-demand"))).toEqual([]);
    expect(machines.size).toBe(1);
  });

  it("sends the same idempotency token again where the API takes one", async () => {
    const { provider, cluster, faults, calls, signal, machines } = await setUp(
      "on-demand",
      offer(null, 1),
      undefined,
      true,
    );
    faults.lostCreateAnswers = 2;
    const made = await provider.provision({ cluster, count: 1, signal });
    expect(made.map((instance) => instance.id)).toEqual(["m-1"]);
    expect(machines.size).toBe(1);
    expect(calls.filter((call) => call.startsWith("create"))).toHaveLength(3);
  });

  it("gives up after the attempts of one machine, looking for it one last time", async () => {
    const { provider, cluster, faults, signal, machines } = await setUp(
      "on-demand",
      offer(null, 1),
      undefined,
      true,
    );
    faults.lostCreateAnswers = 5;
    const failure = await provider.provision({ cluster, count: 1, signal }).catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure) && failure.kind).toBe("unavailable");
    expect(machines.size).toBe(1); // the one machine the token kept unique; teardown finds it
  });
});

describe("delete until gone", () => {
  it("retries refusals while provisioning, counts already-gone as gone, reads each batch result", async () => {
    const { provider, cluster, faults, signal, machines, calls } = await setUp("on-demand", offer(null, 1));
    const made = await provider.provision({ cluster, count: 2, signal });
    faults.busyDeletes = 2;
    await provider.terminate({ cluster, ids: [...made.map((instance) => instance.id), "m-never"], signal });
    expect(machines.size).toBe(0);
    expect(calls.filter((call) => call.startsWith("delete"))).toEqual([
      "delete m-1,m-2,m-never",
      "delete m-1,m-2",
    ]);
  });

  it("forgets each machine (its test-seam stand-in) once it is deleted or gone, not while refused", async () => {
    const api = fakeApi();
    const forgotten: string[] = [];
    const forget = (id: string) => void forgotten.push(id);
    const provider = defineMachineProvider({ ...api.adapter, keysDirectory: keys, forget });
    const spec = resolvePoolSpec(resolveSpec({ accelerator: accelerators.H100() }), options({}));
    const signal = AbortSignal.timeout(10_000);
    const cluster = await provider.prepare({ spec, offer: offer(null, 1), poolId: "p", signal });
    const made = await provider.provision({ cluster, count: 2, signal });
    api.faults.busyDeletes = 1;
    await provider.terminate({ cluster, ids: [...made.map((instance) => instance.id), "m-never"], signal });
    expect(forgotten.sort()).toEqual(["m-1", "m-2", "m-never"]);
  });

  it("reports a machine the batch refused, after deleting the others", async () => {
    const { provider, cluster, signal, machines } = await setUp("on-demand", offer(null, 1));
    const [made] = await provider.provision({ cluster, count: 1, signal });
    machines.set("m-refused", {
      id: "m-refused",
      name: `${cluster.id}-9`,
      spot: false,
      price: 1,
      status: "running",
    });
    const failure = await provider.teardown({ cluster, signal }).catch((error: unknown) => error);
    expect(String(failure)).toMatch(/did not delete 1 instance, which may still bill.*m-refused: protected/);
    expect([...machines.keys()]).toEqual(["m-refused"]);
    expect(made).toBeDefined();
  });
});

describe("lists", () => {
  it("read every page, and an answer of unknown shape is an error, never 'no instances'", async () => {
    const { provider, cluster, faults, signal, calls } = await setUp("on-demand", offer(null, 1));
    await provider.provision({ cluster, count: 3, signal });
    faults.pageSize = 2;
    expect((await provider.listInstances?.({ signal }))?.map((instance) => instance.id)).toEqual([
      "m-1",
      "m-2",
      "m-3",
    ]);
    expect(calls.filter((call) => call.startsWith("list"))).toEqual(["list first", "list 2"]);
    faults.unknownListShape = true;
    const failure = await provider.teardown({ cluster, signal }).catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure) && failure.kind).toBe("unknown-answer");
    expect(String(failure)).toMatch(/list of instances was not understood/);
  });

  it("end at a page of machines all listed before (an API that ignores the page asked), each machine once", async () => {
    const { provider, cluster, faults, signal, calls } = await setUp("on-demand", offer(null, 1));
    await provider.provision({ cluster, count: 3, signal });
    faults.pageSize = 2;
    faults.ignoresCursor = true;
    calls.length = 0;
    expect((await provider.listInstances?.({ signal }))?.map((instance) => instance.id)).toEqual([
      "m-1",
      "m-2",
      "m-3",
    ]);
    expect(calls.filter((call) => call.startsWith("list"))).toEqual(["list first", "list 2"]);
  });
});

describe("containers without FUSE", () => {
  it("refuses the spec's volumes, naming each, before the adapter's prepare makes anything", async () => {
    const { adapter } = fakeApi();
    const prepared: string[] = [];
    const provider = defineMachineProvider({
      ...adapter,
      keysDirectory: keys,
      containersWithoutFuse: "boxes",
      async prepare({ clusterId, keys: pair }) {
        prepared.push(clusterId);
        return pair;
      },
    });
    const storage = { endpoint: "https://s3.example.com" };
    const volumes = [{ bucket: "data", mount: "/data", storage }];
    const withVolumes = resolveSpec({ accelerator: accelerators.H100(), volumes });
    const signal = AbortSignal.timeout(5000);
    const prepare = (spec: typeof withVolumes) =>
      provider.prepare({ spec: resolvePoolSpec(spec, options({})), offer: offer(null, 1), signal });
    const failure = await prepare(withVolumes).catch((error: unknown) => error);
    expect(ConfigurationError.isInstance(failure) && failure.issues.map((issue) => issue.path)).toEqual([
      "volumes[0]",
    ]);
    expect(String((failure as ConfigurationError).issues[0]?.message)).toMatch(
      /^the Fake provider does not mount volumes \(data on \/data\): its boxes are containers without FUSE/,
    );
    expect(prepared).toEqual([]);
    await prepare(resolveSpec({ accelerator: accelerators.H100() }));
    expect(prepared).toHaveLength(1);
  });
});
