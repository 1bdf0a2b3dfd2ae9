/**
 * `sky.attach(id)`: picks up a pool another process (or this one) detached with `pool.detach()`.
 * It reads the pool's state file, reconnects to the same workers, collects the results of the tasks
 * that were on them when the pool was detached (those that finished meanwhile, and those still
 * running, as they finish) — each handed over once — and returns a working pool around those
 * workers: more tasks run on it, and closing it stops the workers and removes what the pool left
 * on disk.
 */

import { rm } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { CollectionStore } from "../collections/store.js";
import { createProviderFromEntry, loadConfig } from "../config/config-file.js";
import type {
  Cluster,
  Instance,
  Offer,
  ProviderV1,
  RecordedCluster,
  WorkerEndpoint,
} from "../contract/types.js";
import { ConfigurationError } from "../errors/errors.js";
import { compute, type Pool, poolInternals } from "../pool/pool.js";
import type { SubtaskRunner } from "../pool/task-manager.js";
import { WorkerConnection } from "../pool/worker-connection.js";
import type { WorkerMessage } from "../protocol/protocol.js";
import { RemoteRef } from "../protocol/values.js";
import type { OptionsInput } from "../spec/options.js";
import { openCollections, serveCollections } from "./collections-state.js";
import { type CollectedResult, carryOver, openOutcomes } from "./outcomes-state.js";
import {
  type DetachedPoolState,
  type DetachedTask,
  listPoolStates,
  openToken,
  readPoolState,
  removePoolState,
} from "./state.js";

export type { CollectedResult } from "./outcomes-state.js";

/** A pool picked up again: a {@link Pool}, plus the results of the tasks it was detached with. */
export type AttachedPool = Pool & {
  /**
   * Settles once every task that was on a worker at detach time has an outcome: finished while
   * detached, or finished since. Each outcome is delivered once (the workers drop them as they hand
   * them over). Detached again before this settled, the pool hands them over at the next attach
   * (with those of its own tasks then running). A streaming task's outcome is its end (`value` undefined) with the items no client
   * received (`items`, and `dropped` for those over the workers' byte cap).
   */
  collected(): Promise<readonly CollectedResult[]>;
  /**
   * The remote references (`withKeep()` results) the pool's nodes held when it was detached, usable
   * as before: passed to tasks, fetched, released; closing the pool releases them. Those the
   * picked-up tasks return come in {@link collected}.
   */
  keptRefs(): readonly RemoteRef[];
};

/** Options for {@link attach}. */
export interface AttachOptions {
  /**
   * The attached pool's options (console, logging, budget…), as for `compute`; not `worker` nor
   * `cluster`: the workers run with the detached pool's (they are refused here).
   */
  readonly options?: Omit<OptionsInput, "worker" | "cluster">;
  /** Aborts reconnecting. */
  readonly signal?: AbortSignal;
  /**
   * For a pool on a provider other than `Local`: the provider to reach its nodes through — the same
   * kind, with the settings and credentials to reach them (the state file records none). Default:
   * the `[providers.*]` entry of `skyward.toml` (or `~/.skyward/defaults.toml`) of the pool's
   * provider type, when there is exactly one.
   */
  // biome-ignore lint/suspicious/noExplicitAny: any provider, whatever its cluster data.
  readonly provider?: ProviderV1<any>;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function attachedOffer(state: DetachedPoolState): Offer {
  return Object.freeze({
    id: "local",
    provider: "local",
    instanceType: state.instanceType,
    accelerator: null,
    vcpus: cpus().length,
    memoryGb: Math.round(totalmem() / 1024 ** 3),
    architecture: process.arch === "arm64" ? "arm64" : "x86_64",
    region: state.region,
    spotPrice: null,
    onDemandPrice: 0,
    billingUnit: "second",
    pricesAsOf: new Date().toISOString().slice(0, 10),
    specific: Object.freeze({}),
  });
}

/**
 * A provider over the running workers of a detached `Local` pool: it provisions nothing and starts
 * nothing — its instances are the pool's, its workers' endpoints the recorded ones — and
 * terminating stops those workers.
 */
function attachedLocal(
  state: DetachedPoolState,
  token: string,
): ProviderV1<{ root: string; workdir: string }> {
  const instances = state.nodes.map((node) =>
    Object.freeze({
      id: node.instanceId,
      status: "running" as const,
      publicIp: null,
      privateIp: "127.0.0.1",
      ssh: null,
      spot: false,
      hourlyPrice: node.hourlyPrice,
      offerId: "local",
      createdAt: state.detachedAt,
      tags: Object.freeze({ "skyward:cluster": state.clusterId }),
    } satisfies Instance),
  );
  let handedOut = 0;
  const node = (id: string) => state.nodes.find((entry) => entry.instanceId === id);
  return {
    specificationVersion: "v1",
    name: "local",
    capabilities: Object.freeze({
      spot: false,
      volumes: false,
      images: false,
      maxInstances: state.nodes.length,
    }),
    async offers() {
      return [attachedOffer(state)];
    },
    async prepare({ spec, offer }) {
      return Object.freeze({
        id: state.clusterId,
        provider: "local",
        poolId: state.id,
        region: state.region,
        spec,
        offer,
        ssh: null,
        specific: Object.freeze({ root: state.root ?? "", workdir: state.workdir ?? "" }),
      });
    },
    async provision({ count }) {
      const batch = instances.slice(handedOut, handedOut + count);
      handedOut += batch.length;
      if (batch.length < count)
        throw new Error(`pool ${state.id} has ${state.nodes.length} nodes and can grow no more`);
      return batch;
    },
    async getInstance({ id }) {
      const entry = node(id);
      return entry && processAlive(entry.pid)
        ? (instances.find((instance) => instance.id === id) ?? null)
        : null;
    },
    async launchWorker({ instance }): Promise<WorkerEndpoint> {
      const entry = node(instance.id);
      if (!entry || !processAlive(entry.pid)) {
        throw new Error(`the worker of ${instance.id} (pool ${state.id}) is no longer running`);
      }
      return { host: entry.host, port: entry.port, pid: entry.pid, token, warm: true };
    },
    async terminate({ ids }) {
      await Promise.all(
        ids.map(async (id) => {
          const entry = node(id);
          if (!entry) return;
          // Released by the pool's close: give it a moment, then make sure.
          for (const [signal, wait] of [
            [null, 2000],
            ["SIGTERM", 3000],
            ["SIGKILL", 2000],
          ] as const) {
            if (signal !== null && processAlive(entry.pid)) {
              try {
                process.kill(entry.pid, signal);
              } catch {
                // gone
              }
            }
            const deadline = Date.now() + wait;
            while (processAlive(entry.pid) && Date.now() < deadline)
              await new Promise((r) => setTimeout(r, 50));
            if (!processAlive(entry.pid)) return;
          }
        }),
      );
    },
    async teardown() {
      if (state.root) await rm(state.root, { recursive: true, force: true });
      await removePoolState(state.id);
    },
    selfDestruct() {
      return "";
    },
  } as ProviderV1<{ root: string; workdir: string }>;
}

const TERMINAL = new Set(["result", "error", "end"]);

/** How the collector reaches a node's worker: by TCP, or through a stream (an SSH tunnel). */
type Reach = (
  node: DetachedPoolState["nodes"][number],
) => Promise<{ host: string; port: number } | { host: string; stream: import("node:stream").Duplex }>;

/** What {@link collectDetached} returns: the outcomes, and how to close its connections. */
interface Collector {
  readonly results: Promise<CollectedResult[]>;
  readonly close: () => Promise<void>;
  /** Runs the picked-up tasks' nested tasks on the attached pool from now on (undefined: it did not start). */
  readonly runNested: (run: SubtaskRunner | undefined) => void;
  /**
   * What is not handed over yet, for a detach after this attach: the outcomes received, and the
   * tasks still without one (they go on, or wait, on their workers).
   */
  readonly pending: () => { outcomes: CollectedResult[]; tasks: DetachedTask[] };
}

/**
 * Reconnects to each node's worker on a connection of its own, before the pool's: it adopts the
 * detached tasks still running, collects those that finished, with the stream items the workers
 * kept meanwhile, and answers the adopted tasks' collection calls from `collections` (restored
 * from the state file) until they end.
 */
async function collectDetached(
  state: DetachedPoolState,
  token: string,
  reach: Reach,
  signal: AbortSignal | undefined,
  collections: CollectionStore,
): Promise<Collector> {
  // Outcomes an earlier attach received and never handed over (detached again before that).
  const carried = await openOutcomes(state);
  const expected = new Map<string, DetachedTask>(state.tasks.map((task) => [task.taskId, task]));
  let runNested: (run: SubtaskRunner | undefined) => void = () => {};
  const nested = new Promise<SubtaskRunner | undefined>((resolve) => {
    runNested = resolve;
  });
  // A task's wire id is its id, or `id.attempt` for a retry; its locks are held under its id.
  const ownerOf = (wireId: string) => (expected.has(wireId) ? wireId : wireId.replace(/\.\d+$/, ""));
  const stillRunning = new Set<string>();
  const outcomes = new Map<string, CollectedResult>();
  const items = new Map<string, Map<number, unknown>>();
  const connections: WorkerConnection[] = [];
  let settle: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const check = () => {
    if (outcomes.size === expected.size) settle();
  };
  const close = async () => {
    await Promise.all(connections.map((connection) => connection.close({ timeoutMs: 2000 })));
  };
  // The tasks these connections adopted (wire ids): those of the state file, and any still running
  // from an earlier detach. The connections stay until they have all ended, since they answer the
  // tasks' collection calls.
  const adopted = new Set<string>();
  let collectedAll = false;
  const closeIfIdle = () => {
    if (collectedAll && adopted.size === 0) void close();
  };
  const extra = (taskId: string, dropped = 0) => {
    const received = items.get(taskId);
    return {
      items: received ? [...received.entries()].sort((a, b) => a[0] - b[0]).map(([, value]) => value) : [],
      dropped,
    };
  };
  try {
    for (const node of state.nodes) {
      const connection = await WorkerConnection.connect(await reach(node), {
        token,
        node: node.index,
        timeoutMs: 30_000,
        ...(signal ? { signal } : {}),
      });
      connections.push(connection);
      const mine = [...expected.values()].filter((task) => task.node === node.index);
      const finished = new Set(connection.welcome.results);
      const running = new Set((connection.welcome as { running?: string[] }).running ?? []);
      for (const id of running) {
        stillRunning.add(ownerOf(id));
        adopted.add(id);
      }
      serveCollections(connection, collections, ownerOf, nested);
      connection.onMessage((message: WorkerMessage) => {
        const id = (message as { id?: string | null }).id;
        if (TERMINAL.has(message.t) && typeof id === "string" && adopted.delete(id)) {
          collections.ownerEnded(ownerOf(id));
          closeIfIdle();
        }
        const task = typeof id === "string" ? expected.get(id) : undefined;
        if (!task || outcomes.has(task.taskId)) return;
        if (message.t === "item") {
          const received = items.get(task.taskId) ?? new Map<number, unknown>();
          items.set(task.taskId, received);
          received.set(message.seq, message.value);
          return;
        }
        if (!TERMINAL.has(message.t)) return;
        const base = { taskId: task.taskId, name: task.name, node: task.node };
        const dropped = (message as { dropped?: number }).dropped ?? 0;
        if (message.t === "error") {
          const error = message as { type?: string; message?: string };
          outcomes.set(task.taskId, {
            ...base,
            ...extra(task.taskId, dropped),
            ok: false,
            errorType: error.type ?? "Error",
            message: error.message ?? "",
          });
        } else {
          outcomes.set(task.taskId, {
            ...base,
            ...extra(task.taskId, dropped),
            ok: true,
            value: (message as { value?: unknown }).value,
          });
        }
        check();
      });
      connection.onLost((loss) => {
        for (const id of running) {
          collections.ownerEnded(ownerOf(id));
          adopted.delete(id);
        }
        for (const task of mine) {
          if (outcomes.has(task.taskId)) continue;
          outcomes.set(task.taskId, {
            taskId: task.taskId,
            name: task.name,
            node: task.node,
            ...extra(task.taskId),
            ok: false,
            errorType: "lost",
            message: `the connection to node ${node.index} was lost: ${loss.error.message}`,
          });
        }
        check();
      });
      for (const task of mine) {
        if (finished.has(task.taskId) || running.has(task.taskId)) continue;
        outcomes.set(task.taskId, {
          taskId: task.taskId,
          name: task.name,
          node: task.node,
          items: [],
          dropped: 0,
          ok: false,
          errorType: "lost",
          message: `the worker of node ${node.index} no longer knows task ${task.taskId}`,
        });
      }
      // Finished tasks resend their outcome; running ones hand over the items they kept meanwhile.
      const collect = mine
        .filter((task) => finished.has(task.taskId) || running.has(task.taskId))
        .map((task) => task.taskId);
      if (collect.length > 0) connection.send({ t: "collect", ids: collect });
    }
  } catch (error) {
    void close();
    throw error;
  }
  // Locks held by tasks that ended while nobody was attached are free again.
  for (const holder of collections.holders()) if (!stillRunning.has(holder)) collections.ownerEnded(holder);
  check();
  const results = done.then(() => {
    collectedAll = true;
    closeIfIdle();
    return [...carried, ...state.tasks.map((task) => outcomes.get(task.taskId) as CollectedResult)];
  });
  const pending = () => ({
    outcomes: [
      ...carried,
      ...state.tasks.flatMap((task) => {
        const outcome = outcomes.get(task.taskId);
        return outcome ? [outcome] : [];
      }),
    ],
    tasks: state.tasks.filter((task) => !outcomes.has(task.taskId)),
  });
  return { results, close, runNested, pending };
}

/** The provider a non-`Local` pool is attached through: the one given, else skyward.toml's of its type. */
async function providerFor(
  state: DetachedPoolState,
  // biome-ignore lint/suspicious/noExplicitAny: any provider, whatever its cluster data.
  given: ProviderV1<any> | undefined,
): Promise<ProviderV1> {
  const refuse = (message: string) => new ConfigurationError({ issues: [{ path: "provider", message }] });
  let provider: ProviderV1 | undefined = given;
  if (!provider) {
    const config = await loadConfig();
    const entries = Object.values(config.providers).filter((entry) => entry.type === state.provider);
    if (entries.length !== 1) {
      throw refuse(
        `pool ${state.id} runs on "${state.provider}": expected the provider to reach it through (attach(id, { provider })), or exactly one [providers.*] entry of type "${state.provider}" in skyward.toml (found ${entries.length})`,
      );
    }
    provider = await createProviderFromEntry(entries[0] as (typeof entries)[number]);
  }
  if (provider.name !== state.provider) {
    throw refuse(
      `expected a "${state.provider}" provider (pool ${state.id} runs there), received "${provider.name}"`,
    );
  }
  if (typeof provider.reconnectWorker !== "function") {
    throw refuse(
      `the "${provider.name}" provider cannot reach a detached pool's workers (it has no reconnectWorker)`,
    );
  }
  return provider;
}

/**
 * A provider over the running workers of a detached pool on `provider` (SSH-reached): it provisions
 * nothing and starts nothing — its instances are the pool's, its workers' endpoints those
 * `reconnectWorker` reached — while `getInstance`, `terminate`, `teardown` and the self-destruct
 * are the real provider's: closing the pool terminates its instances, as for any pool.
 */
function attachedRemote(
  state: DetachedPoolState,
  provider: ProviderV1,
  token: string,
  cluster: RecordedCluster,
  endpoints: readonly WorkerEndpoint[],
): ProviderV1 {
  const instances = (state.instances ?? []).map((instance) =>
    Object.freeze({ ...instance, status: "running" as const }),
  );
  let handedOut = 0;
  const launched = new Set<number>();
  return {
    specificationVersion: "v1",
    name: provider.name,
    capabilities: Object.freeze({ ...provider.capabilities, maxInstances: state.nodes.length }),
    async offers() {
      return [cluster.offer];
    },
    async prepare({ spec }) {
      return Object.freeze({ ...cluster, spec }) satisfies Cluster;
    },
    async provision({ count }) {
      const batch = instances.slice(handedOut, handedOut + count);
      handedOut += batch.length;
      if (batch.length < count)
        throw new Error(`pool ${state.id} has ${state.nodes.length} nodes and can grow no more`);
      return batch;
    },
    getInstance: (options) => provider.getInstance(options),
    async launchWorker({ instance, nodeId }): Promise<WorkerEndpoint> {
      const index = state.nodes.findIndex((node) => node.instanceId === instance.id);
      const endpoint = endpoints[index];
      if (!endpoint || launched.has(index)) {
        throw new Error(`pool ${state.id}: node ${nodeId} (${instance.id}) has no worker to attach to`);
      }
      launched.add(index);
      return { ...endpoint, token, warm: true };
    },
    terminate: (options) => provider.terminate(options),
    async teardown(options) {
      try {
        await provider.teardown(options);
      } finally {
        await removePoolState(state.id);
      }
    },
    selfDestruct: (options) => provider.selfDestruct(options),
    // Detached again (`skyward attach` without --close does): the real provider reaches it next time.
    reconnectWorker: (options) =>
      (provider as Required<Pick<ProviderV1, "reconnectWorker">>).reconnectWorker(options),
    ...(provider.interruptionNotice
      ? { interruptionNotice: provider.interruptionNotice.bind(provider) }
      : {}),
  } as ProviderV1;
}

/**
 * `options.worker` and `options.cluster` are the running workers' (recorded at detach): an attach
 * cannot change them, so it refuses them rather than ignore them.
 */
function refuseWorkerSettings(options: AttachOptions): void {
  const given = (options.options ?? {}) as Record<string, unknown>;
  const issues = (["worker", "cluster"] as const)
    .filter((field) => given[field] !== undefined)
    .map((field) => ({
      path: `options.${field}`,
      message:
        field === "worker"
          ? "the workers keep the settings they were started with (concurrency, executor, buffer): an attached pool cannot change them"
          : "distributed collections stay as the detached pool had them: an attached pool cannot turn them on or off",
    }));
  if (issues.length > 0) throw new ConfigurationError({ issues });
}

/** The USD a detached pool has cost by `now`: its total at detach plus its nodes' time since. */
function costSoFar(state: DetachedPoolState, now: number): number {
  if (!state.cost) return 0;
  return state.cost.total + (state.cost.hourlyRate * Math.max(0, now - state.detachedAt)) / 3_600_000;
}

/**
 * Picks up pool `id`, detached by `pool.detach()` in this or another process of the same user:
 * reconnects to its workers, collects what its tasks did meanwhile ({@link AttachedPool.collected}),
 * and returns the pool, ready for more tasks. Its cost goes on from the detached pool's
 * (`pool.cost()`), and its `options.budget` keeps applying unless `options` gives another. Close it
 * (or `await using`) to stop its workers and terminate its instances. A pool on a provider other than
 * `Local` is reached through `options.provider` (credentials are read again, never from the state
 * file).
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const pool = await sky.attach("1a2b3c4d");
 * const outcomes = await pool.collected();
 * await pool.close();
 * ```
 *
 * @throws Error when there is no such detached pool, or its workers are gone (their TTL ran out).
 * @throws {ConfigurationError} naming `provider` when no provider of the pool's kind is given or configured.
 */
export async function attach(id: string, options: AttachOptions = {}): Promise<AttachedPool> {
  refuseWorkerSettings(options);
  const state = await readPoolState(id);
  if (!state) throw new Error(`no detached pool ${JSON.stringify(id)}: nothing in the pools directory`);
  if (state.provider !== "local") return attachRemote(state, options);
  const gone = state.nodes.filter((node) => !processAlive(node.pid));
  if (gone.length > 0) {
    await removePoolState(id);
    if (state.root && gone.length === state.nodes.length)
      await rm(state.root, { recursive: true, force: true });
    throw new Error(
      `pool ${id}'s workers are gone (node${gone.length === 1 ? "" : "s"} ${gone.map((node) => node.index).join(", ")}): their TTL ran out or they were stopped`,
    );
  }
  const token = await openToken(state.token);
  const collections = await restoredCollections(state);
  const collector = await collectDetached(
    state,
    token,
    async (node) => ({ host: node.host, port: node.port }),
    options.signal,
    collections,
  );
  return attached(state, token, attachedLocal(state, token), collector, collections, options);
}

/** The detached pool's distributed collections, restored from its state file before any worker is reached. */
async function restoredCollections(state: DetachedPoolState): Promise<CollectionStore> {
  const collections = new CollectionStore({ enabled: state.collectionsEnabled !== false });
  collections.restore(await openCollections(state));
  return collections;
}

async function attachRemote(state: DetachedPoolState, options: AttachOptions): Promise<AttachedPool> {
  const provider = await providerFor(state, options.provider);
  if (!state.cluster || !state.instances) throw new Error(`${state.id}: the state file records no cluster`);
  const cluster: RecordedCluster = state.cluster;
  const token = await openToken(state.token);
  const collections = await restoredCollections(state);
  const signal = options.signal ?? new AbortController().signal;
  const endpoints: WorkerEndpoint[] = [];
  const closeAll = () => {
    for (const endpoint of endpoints) endpoint.close?.();
  };
  try {
    const instances = state.instances;
    const reached = await Promise.allSettled(
      state.nodes.map(async (node) => {
        const instance = instances.find((entry) => entry.id === node.instanceId);
        if (!instance) throw new Error(`the state file has no instance ${node.instanceId}`);
        // Called on the provider: its methods may use `this`.
        return (provider as Required<Pick<ProviderV1, "reconnectWorker">>).reconnectWorker({
          cluster,
          instance,
          nodeId: node.index,
          worker: { port: node.port, pid: node.pid },
          connectTimeoutSeconds: 30,
          signal,
          poolId: state.id,
        });
      }),
    );
    for (const outcome of reached) if (outcome.status === "fulfilled") endpoints.push(outcome.value);
    const failed = reached.findIndex((outcome) => outcome.status === "rejected");
    if (failed >= 0) {
      const node = state.nodes[failed] as DetachedPoolState["nodes"][number];
      const error = (reached[failed] as PromiseRejectedResult).reason as Error;
      // No worker answers, and its TTL (or the budget) has run out since the detach: they stopped.
      const now = Date.now();
      const expired =
        now > state.detachedAt + state.ttl * 1000 ||
        (state.budgetDeadline !== null && state.budgetDeadline !== undefined && now > state.budgetDeadline);
      const gone = endpoints.length === 0 && expired;
      if (gone) await removePoolState(state.id);
      throw new Error(
        `pool ${state.id}'s worker on node ${node.index} (${node.instanceId}) cannot be reached again: ${error.message}${gone ? " (no worker answers and their TTL or budget has run out: the pool's state was removed)" : ""}`,
        { cause: error },
      );
    }
    const reach: Reach = async (node) => {
      const endpoint = endpoints[state.nodes.indexOf(node)] as WorkerEndpoint;
      return endpoint.openStream
        ? { host: endpoint.host, stream: await endpoint.openStream() }
        : { host: endpoint.host, port: endpoint.port };
    };
    const collector = await collectDetached(state, token, reach, options.signal, collections);
    return await attached(
      state,
      token,
      attachedRemote(state, provider, token, cluster, endpoints),
      collector,
      collections,
      options,
    );
  } catch (error) {
    closeAll();
    throw error;
  }
}

/** The attached pool around `provider`, with the collector's results and the restored collections. */
async function attached(
  state: DetachedPoolState,
  token: string,
  provider: ProviderV1,
  collector: Collector,
  collections: CollectionStore,
  options: AttachOptions,
): Promise<AttachedPool> {
  let pool: Pool;
  try {
    const budget = state.budget ?? undefined;
    pool = await compute(
      {
        provider,
        nodes: state.nodes.length,
        ttl: state.ttl,
        // The budget keeps applying (counting what was spent), unless the caller gives another; the
        // workers' settings are theirs.
        options: {
          ...(budget ? { budget } : {}),
          ...options.options,
          ...(state.worker ? { worker: state.worker } : {}),
          ...(state.collectionsEnabled !== undefined ? { cluster: state.collectionsEnabled } : {}),
        },
      },
      {
        id: state.id,
        taskIdPrefix: `a${Date.now().toString(36)}-`,
        carriedCost: costSoFar(state, Date.now()),
        token,
        collections,
        attached: true,
        ...(options.signal ? { signal: options.signal } : {}),
      },
    );
  } catch (error) {
    collector.runNested(undefined);
    void collector.close();
    throw error;
  }
  const inside = poolInternals(pool);
  // The picked-up tasks' nested tasks run on this pool, as its own tasks' do.
  collector.runNested(inside.runSubtask);
  // The references the nodes kept across the detach are this pool's, as are those the picked-up
  // tasks return (`withKeep()`).
  const keptRefs = inside.restoreRefs(state.refs ?? []);
  const adoptRefs = (results: readonly CollectedResult[]) => {
    for (const result of results)
      if (result.ok && result.value instanceof RemoteRef) inside.adoptRef(result.value);
  };
  const results = collector.results.then((all) => {
    adoptRefs(all);
    return all;
  });
  results.catch(() => undefined);
  let handedOver = false;
  // Detached again: the connections that adopted the first detach's tasks go too, so that their
  // workers keep those tasks' unanswered collection calls for the next client; and what the user
  // was not handed yet goes into the state file, for the next attach's `collected()`.
  const detach = pool.detach.bind(pool);
  return Object.assign(pool, {
    collected: () =>
      results.then((all) => {
        handedOver = true;
        return all;
      }),
    keptRefs: () => keptRefs,
    detach: async (detachOptions?: Parameters<Pool["detach"]>[0]) => {
      const id = await detach(detachOptions);
      // Closed before this returns: the workers have let go of them when the next client attaches.
      await collector.close();
      if (!handedOver) await carryOver(id, collector.pending());
      return id;
    },
  }) as AttachedPool;
}

/** A detached pool as `skyward pools` shows it: its state file less the token, and what is alive. */
export interface DetachedPool {
  readonly id: string;
  readonly provider: string;
  readonly instanceType: string;
  readonly region: string;
  /**
   * Its nodes, each with whether its worker process still runs (`null` on a remote node: known only
   * by reaching it, as `attach` does).
   */
  readonly nodes: readonly {
    readonly index: number;
    readonly instanceId: string;
    readonly pid: number;
    readonly alive: boolean | null;
  }[];
  /** Tasks that were on its workers when it was detached (their outcomes wait for `attach`). */
  readonly tasks: number;
  /** When it was detached, milliseconds since the epoch. */
  readonly detachedAt: number;
  /** Seconds its workers wait for a client before they stop. */
  readonly ttl: number;
  /** USD per hour for its nodes, when their prices are known. */
  readonly hourlyRate: number | null;
  /** What it has cost since it was detached, USD, when the prices are known. */
  readonly costSinceDetached: number | null;
  /** When its budget runs out and its workers stop themselves, milliseconds since the epoch; null without a budget. */
  readonly budgetDeadline: number | null;
}

/**
 * The pools detached by this user (`$SKYWARD_HOME/pools/`), newest first, with which of their
 * workers still run. No secret is read.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * for (const pool of await sky.detachedPools()) console.log(pool.id, pool.nodes.length);
 * ```
 */
export async function detachedPools(): Promise<DetachedPool[]> {
  const states = await listPoolStates();
  const now = Date.now();
  return states.map((state) => {
    const prices = state.nodes.map((node) => node.hourlyPrice);
    const known = prices.every((price): price is number => price !== null);
    const hourlyRate = known ? prices.reduce((sum, price) => sum + price, 0) : null;
    return {
      id: state.id,
      provider: state.provider,
      instanceType: state.instanceType,
      region: state.region,
      nodes: state.nodes.map((node) => ({
        index: node.index,
        instanceId: node.instanceId,
        pid: node.pid,
        alive: state.provider === "local" ? processAlive(node.pid) : null,
      })),
      tasks: state.tasks.length,
      detachedAt: state.detachedAt,
      ttl: state.ttl,
      hourlyRate,
      costSinceDetached: hourlyRate === null ? null : (hourlyRate * (now - state.detachedAt)) / 3_600_000,
      budgetDeadline: state.budgetDeadline ?? null,
    };
  });
}
