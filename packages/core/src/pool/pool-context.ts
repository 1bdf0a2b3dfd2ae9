/**
 * What the pool's parts share: the pool object makes one {@link PoolContext} and hands it to the
 * modules that start nodes, keep the node set, dispatch and shut down; they read and update it.
 */

import type { WorkerLayout } from "../contract/plugin.js";
import type { Cluster, Instance, Provider, WorkerEndpoint } from "../contract/provider.js";
import { BudgetExceededError, CancelledError } from "../errors/errors.js";
import type { EventHub, PoolState } from "../observe/events.js";
import type { CollectionsAddress } from "../protocol/protocol.js";
import type { Image } from "../spec/image.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import type { InstanceBilling } from "./cost.js";
import type { PoolSettings } from "./pool.js";
import type { RemoteRefRegistry } from "./remote-refs.js";
import type { SecretValues } from "./secret-values.js";
import type { TaskManager } from "./task-manager.js";
import type { WorkerConnection } from "./worker-connection.js";

/** One node of the pool, as the pool holds it. */
export interface NodeRuntime {
  readonly index: number;
  instance: Instance;
  connection: WorkerConnection | undefined;
  /** What the provider holds to reach the worker (an SSH connection), let go of with the node. */
  endpoint: WorkerEndpoint | undefined;
  /** Let go of on purpose (scale-down, a failed start): its worker's exit is no error, nor its loss. */
  retiring?: boolean;
  /** Its worker's launch now (a token, one per start): a replacement is a new launch of the same node. */
  launch?: object | undefined;
  /** The launch of a lost node whose worker may still run, which the pool ends to replace it: its exit is no error. */
  replacing?: object | undefined;
  /** After an interruption notice: the replacement's instance, asked for at once. */
  nextInstance: Promise<Instance> | undefined;
  /**
   * The membership (`membershipKey`) of the last cluster message its worker was sent, once it
   * answered the first: a node told another membership is told again (see `retellCluster`).
   */
  told?: string | undefined;
}

/** A node just provisioned under `index`, not started yet. */
export function newNode(index: number, instance: Instance): NodeRuntime {
  return { index, instance, connection: undefined, endpoint: undefined, nextInstance: undefined };
}

/** The state every part of a pool reads; the pool object owns it. */
export interface PoolContext {
  /** The pool's id (also its job id on the workers). */
  readonly id: string;
  readonly hub: EventHub;
  readonly tasks: TaskManager;
  readonly refs: RemoteRefRegistry;
  readonly options: Options;
  /** The workers' token. */
  readonly token: string;
  /**
   * The tokens of earlier pools' released workers this pool picked up (an SSH host's, started from
   * the same code and settings), each its node's: a replacement's launch finds such a worker its own.
   */
  adoptedTokens?: Set<string>;
  /** Aborted when the pool shuts down (or its budget is spent). */
  readonly abort: AbortController;
  /** The nodes the pool has, ascending by index once started. */
  readonly nodes: NodeRuntime[];
  /**
   * Node indices the pool means to start a node under that are not in `nodes`: being provisioned
   * (growth), or awaiting the reconcile loop's next growth (a start that failed). A broadcast covers
   * them; tasks pinned to them wait.
   */
  readonly pending: Map<number, "provisioning" | "awaiting">;
  /** The resolved spec (with several specs: the one being tried, then the one chosen). */
  spec: PoolSpec & PoolSettings;
  state: PoolState;
  provider: Provider | undefined;
  cluster: Cluster | undefined;
  image: Image | undefined;
  headPort: number;
  /** Where the head's worker serves the distributed collections (its `ready` says); told to every other node. */
  collectionsAddress?: CollectionsAddress | undefined;
  /** The node whose worker holds the collections: the head (0), or the replica promoted since. */
  collectionsNode?: number | undefined;
  /**
   * Why the collections cannot be reached now: their holder was lost and a copy is being promoted,
   * or none could be (then for good). Every collection operation of the client fails with it.
   */
  collectionsUnavailable?: string | undefined;
  /** Workers per node and how they run, as the plugins ask (one worker per node otherwise). */
  layout: WorkerLayout;
  /** The pool picks up a detached pool's workers: they keep the cluster settings they run with. */
  readonly resumed: boolean;
  /** The values of the specs' secrets, read on the client at start; sent in each node's `cluster`. */
  readonly secrets: SecretValues;
  /** Why the pool cannot start new nodes (an attached pool without a provider to start them with). */
  readonly growthRefusal: string | undefined;
  /**
   * The start's provisioning and first node starts, settled either way (undefined before it begins):
   * aborted, it terminates what it provisioned and tears its cluster down itself, before the pool
   * knows them, so a shutdown waits for it (a process ending on a signal must not end first).
   */
  provisioning?: Promise<void>;
  /**
   * The pool's cost meter, told of each instance created and terminated while provisioning: an
   * instance bills from its creation, before it is a node and whether or not it becomes one.
   */
  readonly billing?: InstanceBilling;
}

/** The default layout: one worker per node, in threads. */
export const SINGLE_WORKER: WorkerLayout = Object.freeze({
  workersPerNode: 1,
  processPerWorker: false,
  checkAccelerators: false,
  pinAccelerators: false,
});

/** Moves the pool to `state`, with a `pool.state` event. */
export function setPoolState(context: PoolContext, state: PoolState): void {
  const previous = context.state;
  context.state = state;
  context.hub.emit({ type: "pool.state", timestamp: Date.now(), poolId: context.id, state, previous });
}

/** Whether the pool is going away: nothing it sees then is an error, nothing is replaced. */
export function isClosing(context: PoolContext): boolean {
  return context.state === "shutting_down" || context.state === "destroyed";
}

/** Task slots per node: the worker's concurrency, and at least one per worker a plugin asks for. */
export function slotsPerNode(context: PoolContext): number {
  return Math.max(context.spec.worker.concurrency, context.layout.workersPerNode);
}

/** The executor: the process one when a plugin asked for one worker (process) per accelerator. */
export function executorOf(context: PoolContext): "thread" | "process" {
  return context.layout.processPerWorker ? "process" : context.spec.worker.executor;
}

/** The pool's node indices, ascending: its nodes, and those it is starting a node under. */
export function nodeIndices(context: PoolContext): number[] {
  return [...context.nodes.map((node) => node.index), ...context.pending.keys()].sort((a, b) => a - b);
}

/** Reports a failure as an `error` event, unless the pool is going away. */
export function reportError(context: PoolContext, what: string, error: unknown, node?: number): void {
  if (isClosing(context)) return;
  context.hub.emit({
    type: "error",
    timestamp: Date.now(),
    poolId: context.id,
    ...(node !== undefined ? { node } : {}),
    message: `${what}: ${(error as Error)?.message ?? String(error)}`,
    cause: error,
  });
}

/** The error an aborted operation fails with. */
export function abortError(signal: AbortSignal, what: string): CancelledError {
  // The budget stopped it: that is the error to report, not a generic abort.
  if (BudgetExceededError.isInstance(signal.reason)) return signal.reason;
  return new CancelledError({ message: `${what} was aborted`, cause: signal.reason });
}

/** The provider and cluster of a started pool. */
export function placement(context: PoolContext): { provider: Provider; cluster: Cluster } {
  return { provider: context.provider as Provider, cluster: context.cluster as Cluster };
}
