/**
 * `sky.attach(id)`: picks up a pool another process (or this one) detached with `pool.detach()`.
 * It reads the pool's state file, reconnects to the same workers, collects the results of the tasks
 * that were on them when the pool was detached (those that finished meanwhile, and those still
 * running, as they finish) — each handed over once — and returns a working pool around those
 * workers: more tasks run on it, and closing it stops the workers and removes what the pool left
 * on disk.
 */

import { rm } from "node:fs/promises";
import { createProviderFromEntry, loadConfig } from "../config/config-file.js";
import type { PluginV1, ProviderV1, RecordedCluster, WorkerEndpoint } from "../contract/types.js";
import { ConfigurationError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import { processAlive } from "../local/process-alive.js";
import { checkAbortSignal } from "../pool/abort-signal.js";
import { resumePool } from "../pool/create-pool.js";
import {
  type DashboardRecording,
  openWithDashboard,
  startDashboardRecording,
} from "../pool/dashboard-option.js";
import type { DetachHandler } from "../pool/detach.js";
import type { Pool } from "../pool/pool.js";
import type { PoolInternals } from "../pool/pool-runtime.js";
import { resolveSecretValues } from "../pool/secret-values.js";
import { checkHandleSignals } from "../pool/signals.js";
import { RemoteRef } from "../protocol/values.js";
import { validateComputeInput } from "../spec/compute-input.js";
import { type OptionsInput, optionsSchema } from "../spec/options.js";
import { type SecretsInput, secretsSchema } from "../spec/secrets.js";
import { type AttachGrowth, attachedNodes, attachGrowth } from "./attach-growth.js";
import { attachedLocal, attachedRemote } from "./attached-providers.js";
import { type Collector, collectDetached, type Reach } from "./collector.js";
import { stateFileDetach } from "./detach.js";
import { type CollectedResult, carryOver } from "./outcomes-state.js";
import {
  type DetachedPoolState,
  listPoolStates,
  openTokens,
  readPoolState,
  removePoolState,
  statePath,
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
   * The attached pool's options (console, logging, budget, `dashboard`…), as for `compute`; not
   * `worker` nor `cluster`: the workers run with the detached pool's (they are refused here).
   */
  readonly options?: Omit<OptionsInput, "worker" | "cluster">;
  /** Aborts reconnecting. */
  readonly signal?: AbortSignal;
  /**
   * Whether the attached pool installs SIGINT/SIGTERM handlers that close it (stopping its workers
   * and terminating its instances) and then end the process, as `compute`'s `handleSignals`. Default
   * true; set false to decide yourself, e.g. to detach it again on a signal.
   */
  readonly handleSignals?: boolean;
  /**
   * The provider of the pool's type, which its new nodes start through: with it the pool grows and
   * shrinks again within its node bounds (`resize`, autoscaling), each new node made with the
   * recorded image. For a pool on a provider other than `Local` it is also what its nodes are reached
   * through — with the settings and credentials to reach them (the state file records none); default
   * there: the `[providers.*]` entry of `skyward.toml` (or `~/.skyward/defaults.toml`) of the pool's
   * provider type, when there is exactly one. A `Local` pool attached without one keeps its present
   * size. A provider of another type is refused, naming both.
   */
  // biome-ignore lint/suspicious/noExplicitAny: any provider, whatever its cluster data.
  readonly provider?: ProviderV1<any>;
  /**
   * The plugins the pool was started with, passed again (they are code: the state file records their
   * names only), in the same order; others are refused, naming both lists. A pool that had plugins
   * starts new nodes only once they are given; without them it keeps its present size.
   */
  readonly plugins?: readonly PluginV1[];
  /**
   * Where this process reads the pool's secrets (the state file keeps their names only), as a spec's
   * `secrets`. Default for each secret the pool was started with: this process's environment variable
   * of its name. One that cannot be read refuses the attach, naming it.
   */
  readonly secrets?: SecretsInput;
}

/** The pool's secrets as this process reads them: those given, else each recorded name's environment variable. */
function attachedSecrets(state: DetachedPoolState, given: SecretsInput | undefined): SecretsInput {
  const fromEnvironment = Object.fromEntries((state.secretNames ?? []).map((name) => [name, { env: name }]));
  return { ...fromEnvironment, ...given };
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
 * @throws Error when there is no such detached pool, or its workers are gone (their TTL ran out), or
 *   (Local) some of them are gone while others run: the state file is kept then.
 * @throws {ConfigurationError} naming `provider` when no provider of the pool's kind is given or configured.
 */
export async function attach(id: string, options: AttachOptions = {}): Promise<AttachedPool> {
  refuseWorkerSettings(options);
  checkHandleSignals(options.handleSignals);
  checkAbortSignal(options.signal);
  const state = await readPoolState(id);
  if (!state) throw new Error(`no detached pool ${JSON.stringify(id)}: nothing in the pools directory`);
  // Read before any worker is reached: refused later, the collector would have taken outcomes it
  // could no longer hand over.
  await resolveSecretValues([
    { secrets: parseInput(secretsSchema, attachedSecrets(state, options.secrets), "secrets") },
  ]);
  // Checked before any worker is reached too (so is the dashboard package `options.dashboard` needs):
  // refused later, the collector would have taken outcomes.
  const given = parseInput(optionsSchema, options.options ?? {}, "options");
  const dashboard = given.dashboard === null ? undefined : await startDashboardRecording();
  const attaching = { ...options, dashboard };
  if (state.provider !== "local") return attachRemote(state, attaching);
  const gone = state.nodes.filter((node) => !processAlive(node.pid));
  if (gone.length > 0 && gone.length === state.nodes.length) {
    await removePoolState(id);
    if (state.root) await rm(state.root, { recursive: true, force: true });
    throw new Error(
      `pool ${id}'s workers are gone (${nodeList(gone)}): their TTL ran out or they were stopped`,
    );
  }
  // Some live: their tasks and collections are reachable through this state file alone, so it stays.
  if (gone.length > 0) throw partlyGone(state, gone);
  const growth = await attachGrowth(state, options.provider, options.plugins);
  const tokens = await openTokens(state);
  const collector = await collectDetached(
    state,
    tokens.of,
    async (node) => ({ host: node.host, port: node.port }),
    options.signal,
  );
  const provider = attachedLocal(state, tokens.of, growth.provider);
  return attached(state, tokens.pool, provider, collector, attaching, growth);
}

/** The refusal of a Local pool some of whose workers are gone (the others still run). */
function partlyGone(state: DetachedPoolState, gone: readonly DetachedPoolState["nodes"][number][]): Error {
  const live = state.nodes.filter((node) => !gone.includes(node));
  const ttlEnds = new Date(state.detachedAt + state.ttl * 1000).toISOString();
  return new Error(
    `pool ${state.id} cannot be attached with nodes missing: the worker${gone.length === 1 ? "" : "s"} of ${nodeList(gone)} ${gone.length === 1 ? "is" : "are"} gone (stopped or killed) while ${nodeList(live)} still run${live.length === 1 ? "s" : ""}; its state is kept (the workers still running stop at their TTL, ${ttlEnds})`,
  );
}

/** `node 1` or `nodes 0, 2`. */
function nodeList(nodes: readonly { readonly index: number }[]): string {
  return `node${nodes.length === 1 ? "" : "s"} ${nodes.map((node) => node.index).join(", ")}`;
}

/** {@link AttachOptions}, with the dashboard's recording when `options.dashboard` asks for one. */
type Attaching = AttachOptions & { readonly dashboard: DashboardRecording | undefined };

async function attachRemote(state: DetachedPoolState, options: Attaching): Promise<AttachedPool> {
  const provider = await providerFor(state, options.provider);
  if (!state.cluster || !state.instances) throw new Error(`${state.id}: the state file records no cluster`);
  // Checked before any worker is reached, as the secrets are.
  const growth = await attachGrowth(state, provider, options.plugins);
  const cluster: RecordedCluster = state.cluster;
  const tokens = await openTokens(state);
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
    const collector = await collectDetached(state, tokens.of, reach, options.signal);
    return await attached(
      state,
      tokens.pool,
      attachedRemote(state, provider, tokens.of, cluster, endpoints, growth.provider !== undefined),
      collector,
      options,
      growth,
    );
  } catch (error) {
    closeAll();
    throw error;
  }
}

/** The attached pool around `provider`, with the collector's results. */
async function attached(
  state: DetachedPoolState,
  token: string,
  provider: ProviderV1,
  collector: Collector,
  options: Attaching,
  growth: AttachGrowth,
): Promise<AttachedPool> {
  let handedOver = false;
  // Detached again: the connections that adopted the first detach's tasks go too, so that their
  // workers keep those tasks' results for the next client; and what the user was not handed yet
  // goes into the state file, for the next attach's `collected()`.
  const detach: DetachHandler = {
    // A pool that cannot grow runs fixed at its size: what it was detached with is recorded again.
    detach: (snapshot, release) =>
      stateFileDetach.detach(
        growth.provider
          ? snapshot
          : { ...snapshot, nodeBounds: growth.bounds, image: growth.image, plugins: state.plugins ?? [] },
        release,
      ),
    detached: async (id) => {
      // Closed before detach() returns: the workers have let go of them when the next client attaches.
      await collector.close();
      if (!handedOver) await carryOver(id, collector.pending());
    },
  };
  let pool: Pool;
  let inside: PoolInternals;
  try {
    const budget = state.budget ?? undefined;
    const { healthChecker, ...kept } = state.settings ?? {};
    const resolved = await validateComputeInput({
      provider,
      // Its nodes as they are: the attached provider reconnects the recorded workers; it starts
      // others (within the pool's bounds) only through a provider of the pool's type (attach-growth.ts).
      nodes: attachedNodes(state, growth),
      ttl: state.ttl,
      // The caller's plugins, checked against the recorded names (attach-growth.ts).
      plugins: growth.plugins,
      secrets: attachedSecrets(state, options.secrets),
      // The budget and the pool's healing, autoscaling and health-check settings keep applying,
      // unless the caller gives others; the workers' settings are theirs.
      options: {
        ...(budget ? { budget } : {}),
        ...kept,
        ...(healthChecker ? { healthChecker } : {}),
        ...options.options,
        ...(state.worker ? { worker: state.worker } : {}),
        ...(state.collectionsEnabled !== undefined ? { cluster: state.collectionsEnabled } : {}),
      },
    });
    // A new node is made with the detached pool's image, as its others were.
    const specs = resolved.specs.map((spec) =>
      growth.provider && growth.image ? Object.freeze({ ...spec, image: growth.image }) : spec,
    );
    let resumedInternals: PoolInternals | undefined;
    pool = await openWithDashboard(
      resolved.options.dashboard,
      undefined,
      async (wiring) => {
        const resumed = await resumePool(
          {
            specs,
            options: resolved.options,
            defaultProvider: () => provider,
            detach,
            signal: options.signal,
            handleSignals: options.handleSignals,
            ...wiring,
          },
          {
            id: state.id,
            taskIdPrefix: `a${Date.now().toString(36)}-`,
            carriedCost: costSoFar(state, Date.now()),
            token,
            growthRefusal: growth.refusal,
          },
        );
        resumedInternals = resumed.internals;
        return resumed.pool;
      },
      {
        recording: options.dashboard,
        attachedFrom: {
          poolId: state.id,
          stateFile: statePath(state.id),
          detachedAt: state.detachedAt,
          detachedBy: state.pid,
          attachedAt: Date.now(),
        },
      },
    );
    inside = resumedInternals as PoolInternals;
  } catch (error) {
    collector.runNested(undefined);
    void collector.close();
    throw error;
  }
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
  return Object.assign(pool, {
    collected: () =>
      results.then((all) => {
        handedOver = true;
        return all;
      }),
    keptRefs: () => keptRefs,
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

/**
 * Forgets detached pool `id`: removes its state file, so {@link detachedPools} and `skyward pools`
 * no longer list it (nor count its cost). For a pool whose instances were terminated from outside
 * (`skyward down`): its workers are gone and nothing is left to attach to. Resolves true when there
 * was such a pool. A `Local` pool's workers are not stopped by this: attach and close it instead.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * if (await sky.forgetDetachedPool("pool-1a2b3c")) console.log("forgotten");
 * ```
 */
export async function forgetDetachedPool(id: string): Promise<boolean> {
  const state = await readPoolState(id).catch(() => undefined);
  if (state === undefined) return false;
  await removePoolState(id);
  return true;
}
