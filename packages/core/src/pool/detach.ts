/**
 * Detaching, the pool's side: it checks the pool can be let go of, takes a {@link DetachSnapshot}
 * of what another process needs to reach the workers again, and hands it to the {@link DetachHandler}
 * it was given (the session's state file); that records it and calls `release`, which tells the
 * workers to keep their tasks' results. The pool then lets go of its side only.
 */
import type { Cluster, Instance, Provider, WorkerEndpoint } from "../contract/provider.js";
import { ConfigurationError } from "../errors/errors.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import type { CostMeter, PoolCost } from "./cost.js";
import type { DetachOptions } from "./pool.js";
import type { PoolContext } from "./pool-context.js";
import type { RecordedRef } from "./remote-refs.js";
import type { WorkerConnection } from "./worker-connection.js";

/** One node as the pool had it when it was detached. */
export interface DetachedNodeSnapshot {
  readonly index: number;
  readonly instance: Instance;
  /** What the provider held to reach its worker. */
  readonly endpoint: WorkerEndpoint | undefined;
  /** Whether its worker's connection was open. */
  readonly connected: boolean;
}

/** What a detached pool leaves for whoever picks it up. */
export interface DetachSnapshot {
  readonly id: string;
  readonly provider: Provider;
  readonly cluster: Cluster;
  readonly nodes: readonly DetachedNodeSnapshot[];
  /** The tasks on the workers (their results are kept for the next client). */
  readonly tasks: readonly { readonly taskId: string; readonly name: string; readonly node: number }[];
  /** When the snapshot was taken (milliseconds since the epoch). */
  readonly takenAt: number;
  readonly cost: PoolCost;
  readonly budget: Options["budget"] | null;
  /** Seconds until the budget runs out at the pool's rate, when it has one and a rate. */
  readonly budgetSeconds: number | null;
  readonly ttl: number;
  readonly worker: PoolSpec["worker"];
  /** The pool's node bounds (`nodes.min`, `nodes.max`): an attached pool grows and shrinks within them. */
  readonly nodeBounds: { readonly min: number; readonly max: number };
  /** The pool's image, which a node an attached pool starts is made with (undefined: not known). */
  readonly image: PoolSpec["image"] | undefined;
  /** The names of the pool's plugins (code: an attached pool cannot start a node with them). */
  readonly plugins: readonly string[];
  /** The pool's settings that an attached pool keeps (healing, autoscaling, health checks). */
  readonly settings: PoolSettingsKept;
  readonly collectionsEnabled: boolean;
  /** The remote references the nodes keep. */
  readonly refs: readonly RecordedRef[];
  /** The workers' token. */
  readonly token: string;
  /** The names of the pool's secrets (never their values): an attach reads them again. */
  readonly secretNames: readonly string[];
}

/** The options of a pool that an attached pool goes on with, as they were resolved. */
export interface PoolSettingsKept {
  readonly healthChecker: Options["healthChecker"] | null;
  readonly livenessTimeout: number;
  readonly retryOnInterruption: number;
  readonly autoscaleCooldown: number;
  readonly autoscaleIdleTimeout: number;
  readonly reconcileTickInterval: number;
}

/** Records a detached pool (the session's state file) and has its workers keep what they run. */
export interface DetachHandler {
  /**
   * Checks the pool can be reached again, records `snapshot`, and calls `release` (the workers keep
   * their tasks' results and outlive this process; it resolves to the indices of the nodes released:
   * one lost meanwhile is not); a throw before `release` leaves the pool as it was.
   */
  detach(snapshot: DetachSnapshot, release: () => Promise<readonly number[]>): Promise<void>;
  /** Called once the pool has let go of its side (its connections closed). */
  detached?(id: string): Promise<void>;
}

const DEFAULT_KEEP_ITEMS_BYTES = 64 * 1024 * 1024;

/** The stream bytes the workers keep per task, checked. */
export function keepItemsBytesOf(options: DetachOptions): number {
  const keepItemsBytes = options.keepItemsBytes ?? DEFAULT_KEEP_ITEMS_BYTES;
  if (!Number.isSafeInteger(keepItemsBytes) || keepItemsBytes < 0) {
    throw new ConfigurationError({
      issues: [
        {
          path: "keepItemsBytes",
          message: `expected a whole number of bytes >= 0, received ${JSON.stringify(options.keepItemsBytes)}`,
        },
      ],
    });
  }
  return keepItemsBytes;
}

/** The snapshot of a ready pool. */
export function detachSnapshot(context: PoolContext, cost: CostMeter): DetachSnapshot {
  const provider = context.provider;
  const cluster = context.cluster;
  if (!provider || !cluster) throw new Error(`pool ${context.id} has no provider yet`);
  const takenAt = Date.now();
  const spent = cost.snapshot(takenAt);
  const budget = context.options.budget ?? null;
  // The budget keeps applying while nobody is attached: at the pool's rate it runs out in
  // `budgetSeconds`, when the workers stop themselves (as at the end of their TTL).
  const budgetSeconds =
    budget && spent.hourlyRate > 0
      ? Math.max(0, ((budget.max - spent.total) / spent.hourlyRate) * 3600)
      : null;
  return {
    id: context.id,
    provider,
    cluster,
    nodes: context.nodes.map((node) => ({
      index: node.index,
      instance: node.instance,
      endpoint: node.endpoint,
      connected: node.connection?.isOpen === true,
    })),
    tasks: context.tasks.onWorkers(),
    takenAt,
    cost: spent,
    budget,
    budgetSeconds,
    ttl: context.spec.ttl,
    worker: context.spec.worker,
    nodeBounds: { min: context.spec.nodes.min, max: context.spec.nodes.max },
    image: context.spec.image,
    plugins: context.spec.plugins.map((plugin) => plugin.name),
    settings: {
      healthChecker: context.options.healthChecker ?? null,
      livenessTimeout: context.options.livenessTimeout,
      retryOnInterruption: context.options.retryOnInterruption,
      autoscaleCooldown: context.options.autoscaleCooldown,
      autoscaleIdleTimeout: context.options.autoscaleIdleTimeout,
      reconcileTickInterval: context.options.reconcileTickInterval,
    },
    collectionsEnabled: context.options.cluster,
    refs: context.refs.snapshot(),
    token: context.token,
    secretNames: Object.keys(context.spec.secrets ?? {}),
  };
}

/**
 * Tells every worker to keep its tasks' results (`release` with `keep`) for `ttl` seconds, or until
 * the budget runs out; resolves once each has applied it (a ping after the release answers then).
 * A node lost since the snapshot (its connection gone) cannot be told: an error event names it, and
 * the others are released (the state file names it as any node lost after a detach). Resolves to the
 * indices of the nodes released.
 */
export async function releaseKeeping(
  context: PoolContext,
  keepItemsBytes: number,
  budgetSeconds: number | null,
): Promise<readonly number[]> {
  const released: number[] = [];
  await Promise.all(
    context.nodes.map(async (node) => {
      const connection: WorkerConnection | undefined = node.connection;
      if (!connection?.isOpen) {
        context.hub.emit({
          type: "error",
          timestamp: Date.now(),
          poolId: context.id,
          node: node.index,
          message: `node ${node.index} was lost while the pool was being detached: its worker was not released, and its tasks' outcomes come to attach only if it still runs`,
        });
        return;
      }
      const ts = Date.now();
      const ponged = new Promise<void>((resolve) => {
        const off = connection.onMessage((message) => {
          if (message.t === "pong" && message.ts === ts) {
            off();
            resolve();
          }
        });
        connection.onLost(() => resolve());
      });
      connection.send({
        t: "release",
        ttl: context.spec.ttl,
        keep: true,
        keep_items_bytes: keepItemsBytes,
        ...(budgetSeconds !== null ? { deadline: budgetSeconds } : {}),
      });
      connection.send({ t: "ping", ts });
      released.push(node.index);
      await ponged;
    }),
  );
  return released;
}

/**
 * One detach at a time: {@link DetachTurn.run} starts one, and {@link DetachTurn.underway} is the one
 * under way, settled either way — a close meanwhile waits for it (two teardowns at once would end
 * the workers a state file was just written for).
 */
export class DetachTurn {
  #underway: Promise<void> | undefined;

  /** The detach under way, if any, settled either way. */
  get underway(): Promise<void> | undefined {
    return this.#underway;
  }

  /** Runs `detach` as the pool's one detach; refused while another is under way. */
  run<T>(poolId: string, detach: () => Promise<T>): Promise<T> {
    if (this.#underway) throw new Error(`pool ${poolId} is being detached already`);
    const running = detach();
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    this.#underway = settled.then(() => {
      this.#underway = undefined;
    });
    return running;
  }
}
