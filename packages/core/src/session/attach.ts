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
import type { Instance, Offer, ProviderV1, WorkerEndpoint } from "../contract/types.js";
import { compute, type Pool } from "../pool/pool.js";
import { WorkerConnection } from "../pool/worker-connection.js";
import type { WorkerMessage } from "../protocol/protocol.js";
import type { Options } from "../spec/options.js";
import { openCollections, serveCollections } from "./collections-state.js";
import {
  type DetachedPoolState,
  type DetachedTask,
  listPoolStates,
  openToken,
  readPoolState,
  removePoolState,
} from "./state.js";

/** The outcome of a task that was on a worker when its pool was detached. */
export type CollectedResult =
  | {
      readonly taskId: string;
      readonly name: string;
      readonly node: number;
      readonly ok: true;
      readonly value: unknown;
    }
  | {
      readonly taskId: string;
      readonly name: string;
      readonly node: number;
      readonly ok: false;
      /** The exception's type (`ValueError`…), `lost` when the worker no longer knew the task. */
      readonly errorType: string;
      readonly message: string;
    };

/** A pool picked up again: a {@link Pool}, plus the results of the tasks it was detached with. */
export type AttachedPool = Pool & {
  /**
   * Settles once every task that was on a worker at detach time has an outcome: finished while
   * detached, or finished since. Each outcome is delivered once (the workers drop them as they hand
   * them over). A streaming task's items are not kept; its outcome is its end (`value` undefined).
   */
  collected(): Promise<readonly CollectedResult[]>;
};

/** Options for {@link attach}. */
export interface AttachOptions {
  /** The attached pool's options (console, logging…), as for `compute`. */
  readonly options?: Partial<Options>;
  /** Aborts reconnecting. */
  readonly signal?: AbortSignal;
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

/**
 * Reconnects to each node's worker on a connection of its own, before the pool's: it adopts the
 * detached tasks still running and collects those that finished.
 */
async function collectDetached(
  state: DetachedPoolState,
  token: string,
  signal: AbortSignal | undefined,
  collections: CollectionStore,
): Promise<{ results: Promise<CollectedResult[]>; close: () => Promise<void> }> {
  const expected = new Map<string, DetachedTask>(state.tasks.map((task) => [task.taskId, task]));
  // A task's wire id is its id, or `id.attempt` for a retry; its locks are held under its id.
  const ownerOf = (wireId: string) => (expected.has(wireId) ? wireId : wireId.replace(/\.\d+$/, ""));
  const stillRunning = new Set<string>();
  const outcomes = new Map<string, CollectedResult>();
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
  for (const node of state.nodes) {
    const connection = await WorkerConnection.connect(
      { host: node.host, port: node.port },
      { token, node: node.index, timeoutMs: 30_000, ...(signal ? { signal } : {}) },
    );
    connections.push(connection);
    const mine = [...expected.values()].filter((task) => task.node === node.index);
    const finished = new Set(connection.welcome.results);
    const running = new Set((connection.welcome as { running?: string[] }).running ?? []);
    for (const id of running) {
      stillRunning.add(ownerOf(id));
      adopted.add(id);
    }
    serveCollections(connection, collections, ownerOf);
    connection.onMessage((message: WorkerMessage) => {
      if (!TERMINAL.has(message.t)) return;
      const id = (message as { id?: string | null }).id;
      if (typeof id === "string" && adopted.delete(id)) {
        collections.ownerEnded(ownerOf(id));
        closeIfIdle();
      }
      const task = typeof id === "string" ? expected.get(id) : undefined;
      if (!task || outcomes.has(task.taskId)) return;
      const base = { taskId: task.taskId, name: task.name, node: task.node };
      if (message.t === "error") {
        const error = message as { type?: string; message?: string };
        outcomes.set(task.taskId, {
          ...base,
          ok: false,
          errorType: error.type ?? "Error",
          message: error.message ?? "",
        });
      } else {
        outcomes.set(task.taskId, { ...base, ok: true, value: (message as { value?: unknown }).value });
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
        ok: false,
        errorType: "lost",
        message: `the worker of node ${node.index} no longer knows task ${task.taskId}`,
      });
    }
    const collect = mine.filter((task) => finished.has(task.taskId)).map((task) => task.taskId);
    if (collect.length > 0) connection.send({ t: "collect", ids: collect });
  }
  // Locks held by tasks that ended while nobody was attached are free again.
  for (const holder of collections.holders()) if (!stillRunning.has(holder)) collections.ownerEnded(holder);
  check();
  const results = done.then(() => {
    collectedAll = true;
    closeIfIdle();
    return state.tasks.map((task) => outcomes.get(task.taskId) as CollectedResult);
  });
  return { results, close };
}

/**
 * Picks up pool `id`, detached by `pool.detach()` in this or another process of the same user:
 * reconnects to its workers, collects what its tasks did meanwhile ({@link AttachedPool.collected}),
 * and returns the pool, ready for more tasks. Close it (or `await using`) to stop its workers.
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
 */
export async function attach(id: string, options: AttachOptions = {}): Promise<AttachedPool> {
  const state = await readPoolState(id);
  if (!state) throw new Error(`no detached pool ${JSON.stringify(id)}: nothing in the pools directory`);
  if (state.provider !== "local") {
    throw new Error(`pool ${id} runs on "${state.provider}": only Local pools can be attached so far`);
  }
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
  const collections = new CollectionStore({ enabled: options.options?.cluster !== false });
  collections.restore(await openCollections(state));
  const collector = await collectDetached(state, token, options.signal, collections);
  let pool: Pool;
  try {
    pool = await compute(
      {
        provider: attachedLocal(state, token),
        nodes: state.nodes.length,
        ttl: state.ttl,
        ...(options.options ? { options: options.options } : {}),
      },
      {
        id: state.id,
        taskIdPrefix: `a${Date.now().toString(36)}-`,
        collections,
        ...(options.signal ? { signal: options.signal } : {}),
      },
    );
  } catch (error) {
    void collector.close();
    throw error;
  }
  // Detached again: the connections that adopted the first detach's tasks go too, so that their
  // workers keep those tasks' unanswered collection calls for the next client.
  const detach = pool.detach.bind(pool);
  return Object.assign(pool, {
    collected: () => collector.results,
    detach: async () => {
      const id = await detach();
      // Closed before this returns: the workers have let go of them when the next client attaches.
      await collector.close();
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
  /** Its nodes, each with whether its worker process still runs. */
  readonly nodes: readonly {
    readonly index: number;
    readonly instanceId: string;
    readonly pid: number;
    readonly alive: boolean;
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
        alive: processAlive(node.pid),
      })),
      tasks: state.tasks.length,
      detachedAt: state.detachedAt,
      ttl: state.ttl,
      hourlyRate,
      costSinceDetached: hourlyRate === null ? null : (hourlyRate * (now - state.detachedAt)) / 3_600_000,
    };
  });
}
