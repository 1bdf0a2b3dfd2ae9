/**
 * The public face of a pool: {@link Pool}, what `sky.compute(…)` returns and users may call, and the
 * option and result types of its members. The implementation is `PoolRuntime` (`pool-runtime.ts`);
 * nothing becomes public by being a member there.
 */
import type {
  DistributedBarrier,
  DistributedCounter,
  DistributedDict,
  DistributedLock,
  DistributedQueue,
  DistributedSet,
} from "../collections/client.js";
import type { EventOf, PoolState, SkywardEvent, SkywardEventType } from "../observe/events.js";
import type { RemoteRef } from "../protocol/values.js";
import type { Nodes, NodesInput } from "../spec/nodes.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import type { PoolCost } from "./cost.js";
import type { CallArguments, PendingStream, PendingTask, PythonFunction } from "./python-function.js";
import type { RemoteRefStats } from "./remote-refs.js";

/** Options of a call that waits. */
export interface WaitOptions {
  /** Aborting cancels the remote task(s) and rejects with a `CancelledError`. */
  readonly signal?: AbortSignal;
}

/**
 * Where `pool.run` sends a call: the head node (`"head"`), the node of an index (`2` or
 * `{ node: 2 }`), one worker of a node (`{ node: 2, worker: 1 }`: its local rank), or the worker of
 * a global rank (`{ rank: 5 }` = node `⌊5 / workersPerNode⌋`, worker `5 % workersPerNode`).
 */
export type RunTarget =
  | "head"
  | number
  | { readonly node: number; readonly worker?: number }
  | { readonly rank: number };

/** Options of `pool.run`. */
export interface RunOptions extends WaitOptions {
  /** Where the call runs (see {@link RunTarget}); default: round-robin. */
  readonly target?: RunTarget;
}

/** Where one worker of a pool is: its node, its index on the node, and its global rank. */
export interface WorkerPlace {
  /** The node's index. */
  readonly node: number;
  /** The worker's index on its node (`LOCAL_RANK`). */
  readonly worker: number;
  /** Its global rank: `node × workersPerNode + worker` (`RANK`). */
  readonly rank: number;
}

/**
 * What `pool.broadcast` resolves to: one result per worker — per node when nodes run one worker,
 * per worker when they run several (one per accelerator, MIG) — ordered by node, then by worker on
 * the node, so index `i` is global rank `i`. `places[i]` says where result `i` came from.
 */
export type BroadcastResults<R> = R[] & {
  /** Where each result came from, index for index. */
  readonly places: readonly WorkerPlace[];
};

/** Options of `pool.stream`. */
export interface StreamOptions extends WaitOptions {
  /** Yield results in the order the tasks were given (default) or as they complete. */
  readonly ordered?: boolean;
}

/** A submitted task: its id, its result, and a way to cancel it. */
export interface TaskHandle<R> {
  /** The task's id within the pool. */
  readonly id: string;
  /** Settles with the task's result or error. */
  readonly result: Promise<R>;
  /** Cancels the task: dropped if queued, cancelled on the worker if running. */
  cancel(): void;
}

/**
 * One item of `pool.map`: the argument list of one call of the function, positional arguments or a
 * leading part of them plus `sky.kwargs(…)`; read-only tuples (`as const`) are accepted too.
 */
export type MapItem<A extends unknown[]> = Readonly<CallArguments<A>>;

/** The result type of a pending task. */
export type ResultOf<T> = T extends PendingTask<infer R> ? R : never;

/** Bytes between the client and one node's worker, as `pool.traffic()` gives them. */
export interface NodeTraffic {
  /** The node. */
  readonly node: number;
  /** Bytes the client sent to it. */
  readonly sent: number;
  /** Bytes the client received from it. */
  readonly received: number;
  /**
   * Bytes of remote references it served to other nodes, node to node over the cluster network
   * (not through the client), as the nodes that fetched them reported.
   */
  readonly served: number;
  /** Bytes of remote references it fetched from other nodes, node to node (not through the client). */
  readonly fetched: number;
}

/** The node of a running pool, as `pool.nodes()` lists it. */
export interface PoolNode {
  readonly index: number;
  readonly instanceId: string;
  readonly privateIp: string;
  readonly ready: boolean;
  /**
   * The round trip from the client to its worker in milliseconds (the handshake's, then smoothed
   * over pings), while it is connected; the schedule keeps enough tasks in flight to cover it.
   */
  readonly roundTripMs: number | undefined;
}

/** Resolution settings the pool derived from the request, for display and signal handling. */
export interface PoolSettings {
  readonly shutdownTimeoutSeconds: number;
}

/** Options of `pool.detach()`. */
export interface DetachOptions {
  /**
   * Bytes of stream items (as sent) the workers keep, each, for streaming tasks that yield while no
   * client is attached; later items are dropped and counted (`dropped` in `collected()`). Default
   * 64 MiB; 0 keeps none.
   */
  readonly keepItemsBytes?: number;
}

/**
 * A running pool of nodes, as `compute` returns it: dispatch (`run`, `broadcast`, `gather`, `map`,
 * `stream`, `submit`), its nodes, events and teardown (`await using`, `close()` or `withCompute`).
 */
export interface Pool extends AsyncDisposable {
  /** The pool's id (also its job id on the workers). */
  readonly id: string;
  /** The pool's options. */
  readonly options: Options;
  /** The resolved spec the pool was provisioned from (with several specs: the one chosen). */
  readonly spec: PoolSpec & PoolSettings;
  /** The pool's lifecycle state. */
  readonly state: PoolState;

  /** How many nodes are ready right now. */
  currentNodes(): number;
  /** The pool's nodes. */
  nodes(): readonly PoolNode[];
  /**
   * How many workers the pool's nodes run in all (nodes × workers per node, nodes still starting or
   * being replaced included): `broadcast`'s result count.
   */
  workerCount(): number;
  /**
   * What the nodes keep for remote references (results run with `withKeep()`): how many references
   * are held and their sizes, and per node how many it holds and how many bytes (copies moved to it
   * included). Kept objects stay in the workers' memory until released (`ref.release()`,
   * `pool.release(ref)`) or the pool closes: watch this to keep it bounded.
   */
  refs(): RemoteRefStats;
  /** Brings a remote reference's value to the client (as `ref.fetch()`); it stays on its nodes. */
  fetch<T>(ref: RemoteRef<T>, options?: WaitOptions): Promise<T>;
  /** Frees a remote reference on every node holding it (as `ref.release()`). Idempotent. */
  release(ref: RemoteRef): Promise<void>;
  /**
   * The bytes each node's connection has carried since it was made (frames: headers and binary
   * bodies), for the nodes connected now: what moved between this client and the workers (`sent`,
   * `received`); and, apart, the bytes of remote references each node served to and fetched from
   * the other nodes directly (`served`, `fetched`), which never crossed the client's link.
   */
  traffic(): readonly NodeTraffic[];
  /**
   * What the pool costs: USD per hour now, USD so far (instances already let go of included) and
   * each running node's share. Computed from the hourly price each node's offer gave when it was
   * provisioned (the provider's own price for the instance when it reports one), from the moment the
   * pool got the instance until it was terminated: an estimate, not a bill. The `Local` provider is
   * free unless given an `hourlyPrice`.
   *
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const { hourlyRate, total, nodes } = pool.cost();
   * console.log(`$${hourlyRate.toFixed(2)}/h, $${total.toFixed(4)} so far over ${nodes.length} nodes`);
   * ```
   */
  cost(): PoolCost;
  /** The pool's events as an async iterable (ends when the pool is destroyed or `signal` aborts). */
  events(signal?: AbortSignal): AsyncIterableIterator<SkywardEvent>;
  /** Calls `handler` for every event of `type` (`"*"` for all); returns a function that stops it. */
  on<T extends SkywardEventType>(type: T, handler: (event: EventOf<T>) => void): () => void;
  on(type: "*", handler: (event: SkywardEvent) => void): () => void;

  /**
   * The pool-wide dict `name`, shared with tasks (`sky.dict(name)`): the client reads what tasks
   * wrote and the other way round. Throws a `ConfigurationError` naming `options.cluster` when the
   * pool was made with `cluster: false`.
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const config = pool.dict<number>("config");
   * await config.set("lr", 0.001);
   * const lr = await config.get("lr"); // 0.001, what sky.dict("config")["lr"] reads in a task
   * ```
   */
  dict<V = unknown, K = string>(name: string): DistributedDict<V, K>;
  /**
   * The pool-wide set `name`, shared with tasks (`sky.set(name)`).
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const seen = pool.set<string>("seen");
   * const fresh = await seen.add("a"); // true: new; a task's sky.set("seen").add("a") now answers False
   * ```
   */
  set<T = unknown>(name: string): DistributedSet<T>;
  /**
   * The pool-wide counter `name`, shared with tasks (`sky.counter(name)`): watch what tasks count.
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const processed = pool.counter("processed");
   * const timer = setInterval(async () => console.log("processed", await processed.value()), 1000);
   * // … run tasks that call sky.counter("processed").increment() …
   * clearInterval(timer);
   * ```
   */
  counter(name: string): DistributedCounter;
  /**
   * The pool-wide FIFO queue `name`, shared with tasks (`sky.queue(name)`): feed work that tasks
   * drain, each item taken exactly once.
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const work = pool.queue<string>("work");
   * for (const url of ["a", "b", "c"]) await work.put(url);
   * const next = await work.get({ timeout: 5 }); // undefined when nothing came within 5 s
   * ```
   */
  queue<T = unknown>(name: string): DistributedQueue<T>;
  /**
   * The pool-wide barrier `name` for `n` callers (`sky.barrier(name, n)`); the client may be one of
   * them. Reusable: once `n` have arrived, the next `n` callers form the next round.
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * // Two tasks call sky.barrier("epoch", 3).wait(); the client is the third caller.
   * const arrival = await pool.barrier("epoch", 3).wait({ timeout: 60 });
   * ```
   */
  barrier(name: string, n: number): DistributedBarrier;
  /**
   * The pool-wide lock `name` (`sky.lock(name)`); `timeout` is the default seconds `acquire` waits.
   *
   * @example
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * const checkpoint = pool.lock("checkpoint", 30);
   * await checkpoint.hold(async () => {
   *   // no task holds sky.lock("checkpoint") meanwhile
   * });
   * ```
   */
  lock(name: string, timeout?: number): DistributedLock;

  /**
   * Changes the pool's size. A number sets the target: a fixed pool is resized to it (its bounds
   * follow); an elastic pool's target moves within its bounds (autoscaling goes on from there). A
   * topology (`sky.nodes({ desired, min, max })`) sets target and bounds at once — `min: 0` lets the
   * pool scale to zero when idle. Growing provisions and starts nodes; shrinking stops idle nodes
   * (busy ones when their tasks end) and terminates their instances. Resolves once the pool has
   * exactly its target of ready nodes (or a later decision changed the target); rejects when a node
   * cannot be added (the pool keeps trying on its reconcile ticks).
   *
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * await using pool = await sky.compute({ nodes: 2 });
   * await pool.resize(4);
   * await pool.resize(sky.nodes({ desired: 1, min: 0, max: 4 }));
   * ```
   */
  resize(target: number | NodesInput | Nodes, options?: WaitOptions): Promise<void>;
  /**
   * Shuts the pool down: plugins' client hooks exited in reverse, queued and running tasks
   * cancelled, workers released, instances terminated and provider resources torn down.
   * Idempotent; never rejects (failures are reported as `error` events and on the console).
   */
  close(): Promise<void>;
  /**
   * Leaves the pool running and lets go of it: returns its id, for `attach` from this or
   * another process. The workers are told (`release` with `keep`) to keep the results of the tasks
   * they are running until a client collects them — and the items of streaming tasks, up to
   * `keepItemsBytes` — and to wait `ttl` seconds for one, so nothing bills forever; with
   * `options.budget`, each is also given the moment the remaining budget runs out at the pool's
   * hourly rate, and stops its node then (the same self-destruct as the TTL's) unless a pool attached.
   * What this process needs to reach them again goes to a state file under `$SKYWARD_HOME/pools/`
   * (0600, the workers' token encrypted, no provider credentials: they are read again on attach).
   * Tasks still queued here, not yet on a worker, are cancelled; callers waiting on tasks get a
   * `CancelledError` (their results are collected on attach). Works on `Local` and on every provider
   * with `reconnectWorker` (those reached over SSH: `SSH`, AWS, …); refuses others, naming the provider.
   *
   * ```ts
   * import * as sky from "@skyward/core";
   *
   * const pool = await sky.compute({ nodes: 2 });
   * const id = await pool.detach();
   * // later, from any process of the same user:
   * const again = await sky.attach(id);
   * for (const done of await again.collected()) console.log(done.taskId, done.ok);
   * await again.close();
   * ```
   *
   * @throws {ConfigurationError} for a `keepItemsBytes` that is not a whole number >= 0.
   */
  detach(options?: DetachOptions): Promise<string>;

  /**
   * Cancels the task `taskId` (an id from its handle or its `task.*` events) as its handle's
   * `cancel()` does: dropped if queued, cancelled on the worker if running; its caller gets a
   * `CancelledError`. Returns false when the task has ended already or is not this pool's.
   */
  cancel(taskId: string): boolean;

  /** Submits one task and returns its handle at once (the `>` operator of the Python project). */
  submit<R>(pending: PendingTask<R>, options?: RunOptions): TaskHandle<R>;
  /**
   * Runs one call: a function's result (`>>` in the Python project), or — for a generator — an
   * async iterable of its items. Round-robin unless `target` pins it.
   */
  run<R>(pending: PendingTask<R>, options?: RunOptions): Promise<R>;
  run<T>(pending: PendingStream<T>, options?: RunOptions): AsyncIterable<T>;
  /**
   * Runs the call on every worker (`@` in the Python project): once per node when nodes run one
   * worker; once per worker, each pinned to its worker, when they run several (one per accelerator,
   * MIG). Results ordered by node, then by worker on the node (so index = global rank); `places`
   * says where each came from (see {@link BroadcastResults}). Every node of the pool's size counts,
   * those still starting included: a node starting or being replaced is waited for (a replacement up
   * to `provisionTimeout`) and its part runs there, with its rank; if it cannot come, the call fails
   * with a `NodeUnavailableError` naming the node — never with fewer results.
   */
  broadcast<R>(pending: PendingTask<R>, options?: WaitOptions): Promise<BroadcastResults<R>>;
  /** Runs the calls in parallel; their results as a tuple, in order (`&` in the Python project). */
  gather<const T extends readonly PendingTask<unknown>[]>(
    ...tasks: T
  ): Promise<{ -readonly [K in keyof T]: ResultOf<T[K]> }>;
  gather<const T extends readonly PendingTask<unknown>[]>(
    tasks: T,
    options?: WaitOptions,
  ): Promise<{ -readonly [K in keyof T]: ResultOf<T[K]> }>;
  /** Runs the calls in parallel and yields each result as it is ready: in order (default) or as completed. */
  stream<R>(tasks: Iterable<PendingTask<R>>, options?: StreamOptions): AsyncGenerator<R>;
  // Items are typed from `fn` alone (NoInfer): inferring from them too widens `[[{ lr: 0.1 }]]` to
  // `{ lr: number }[][]`, which no longer matches the function's parameter tuple.
  /**
   * Calls `fn` once per item (each item is the call's argument list, optionally ending in
   * `sky.kwargs(…)`) across the pool; results in input order. Items are read lazily, so a large or
   * endless iterable is not queued all at once.
   */
  map<A extends unknown[], R>(
    fn: PythonFunction<A, R>,
    items: Iterable<NoInfer<MapItem<A>>> | AsyncIterable<NoInfer<MapItem<A>>>,
    options?: WaitOptions,
  ): Promise<R[]>;
  /**
   * Calls a task factory once per item — `sky.shell`, `sky.script`, or a function of your own returning
   * a pending task — each item being its argument list; results in input order.
   */
  map<A extends unknown[], R>(
    fn: (...args: A) => PendingTask<R>,
    items: Iterable<NoInfer<Readonly<A>>> | AsyncIterable<NoInfer<Readonly<A>>>,
    options?: WaitOptions,
  ): Promise<R[]>;
}
