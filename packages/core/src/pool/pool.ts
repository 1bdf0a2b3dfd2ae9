/**
 * Pools: `sky.compute(…)` provisions nodes, starts a worker on each and connects to it; the pool
 * then dispatches pending calls (`run`, `broadcast`, `gather`, `stream`, `map`, `submit`) until it is
 * disposed, when it releases the workers and has the provider terminate and tear everything down —
 * on normal exit, on an exception, and on SIGINT/SIGTERM.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { posix } from "node:path";
import {
  type CollectionHost,
  DistributedBarrier,
  DistributedCounter,
  DistributedDict,
  DistributedLock,
  DistributedQueue,
  DistributedSet,
} from "../collections/client.js";
import { CollectionStore } from "../collections/store.js";
import { LaunchCommand, type LaunchContext } from "../contract/launch-command.js";
import {
  applyImageTransforms,
  applyLaunchers,
  collectPluginBootstrapOps,
  enterAroundClient,
  type PoolHandle,
  resolveWorkerLayout,
  workerModules,
} from "../contract/plugin.js";
import {
  type Cluster,
  type Instance,
  type Offer,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  type Provider,
  type WorkerEndpoint,
  type WorkerEnvironment,
} from "../contract/provider.js";
import {
  attemptPlace,
  attemptsOf,
  BootstrapError,
  BudgetExceededError,
  CancelledError,
  ConfigurationError,
  NoCapacityError,
  NoOffersError,
  type ProvisionAttempt,
  ProvisionError,
  SerializationError,
  SkywardError,
} from "../errors/errors.js";
import { detachLocalWorkers, Local } from "../local/local-provider.js";
import { attachConsole } from "../observe/console.js";
import {
  EventHub,
  type EventOf,
  type PoolState,
  type SkywardEvent,
  type SkywardEventType,
} from "../observe/events.js";
import type { LiveConsoleStatus } from "../observe/live-console.js";
import { attachLogFile, type LogFileAttachment } from "../observe/log-file.js";
import { clusterMetrics, relayMetrics } from "../observe/metric-stream.js";
import { Redactor } from "../observe/redact.js";
import type { ClusterMessage, WireValue, WorkerEvent } from "../protocol/protocol.js";
import { RemoteRef } from "../protocol/values.js";
import { saveCollections } from "../session/collections-state.js";
import { type DetachedNode, sealToken, withoutSecrets, writePoolState } from "../session/state.js";
import { type ComputeInput, resolveComputeInput } from "../spec/compute-input.js";
import { extendImage, type Image } from "../spec/image.js";
import { type Nodes, type NodesInput, nodes as resolveNodes } from "../spec/nodes.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import { checkVolumeSources } from "../spec/volume.js";
import { Autoscaler } from "./autoscale.js";
import { BudgetWatch } from "./budget.js";
import { CostMeter, instanceHourlyPrice, type PoolCost } from "./cost.js";
import { firstHealthy, monitorHealth } from "./health-check.js";
import { checkInstances } from "./instance-watch.js";
import { cachedOffers } from "./offer-cache.js";
import type {
  CallArguments,
  Pending,
  PendingStream,
  PendingTask,
  PythonFunction,
} from "./python-function.js";
import { Reconciler } from "./reconcile.js";
import {
  type PreparedCall,
  type RecordedRef,
  RemoteRefRegistry,
  type RemoteRefStats,
  remoteRefsIn,
} from "./remote-refs.js";
import {
  type SubtaskRunner,
  type TaskCallbacks,
  TaskManager,
  type TaskRequest,
  type TaskTicket,
} from "./task-manager.js";
import { WorkerConnection } from "./worker-connection.js";

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
}

/** The node of a running pool, as `pool.nodes()` lists it. */
export interface PoolNode {
  readonly index: number;
  readonly instanceId: string;
  readonly privateIp: string;
  readonly ready: boolean;
}

interface NodeRuntime {
  readonly index: number;
  instance: Instance;
  connection: WorkerConnection | undefined;
  /** What the provider holds to reach the worker (an SSH connection), let go of with the node. */
  endpoint: WorkerEndpoint | undefined;
  /** Let go of on purpose (scale-down, a failed start): its worker's exit is no error, nor its loss. */
  retiring?: boolean;
  /** After an interruption notice: the replacement's instance, asked for at once. */
  nextInstance: Promise<Instance> | undefined;
}

/** Pools torn down on SIGINT/SIGTERM (those made with `handleSignals` left on). */
const livePools = new Set<PoolRuntime>();

/** @internal What `attach` needs of a pool it made, beyond {@link Pool}. */
export interface PoolInternals {
  /** Runs the nested tasks of tasks the pool has no record of (those an attach picked up). */
  readonly runSubtask: SubtaskRunner;
  /** Takes in a remote reference a picked-up task returned (as if the pool had run it). */
  readonly adoptRef: (ref: RemoteRef) => void;
  /** Takes in the references the detached pool held (its state file's); returns them. */
  readonly restoreRefs: (recorded: readonly RecordedRef[]) => RemoteRef[];
}

const internals = new WeakMap<object, PoolInternals>();

/** @internal The {@link PoolInternals} of `pool` (made by {@link compute}). */
export function poolInternals(pool: Pool): PoolInternals {
  const found = internals.get(pool);
  if (!found) throw new Error("not a pool made by compute()");
  return found;
}
let signalHandlersInstalled = false;

function onSignal(signal: NodeJS.Signals): void {
  removeSignalHandlers();
  const pools = [...livePools];
  const closing = pools.map((pool) => pool.close().catch(() => undefined));
  const deadline = Math.max(...pools.map((pool) => pool.spec.shutdownTimeoutSeconds), 10) * 1000;
  const timer = setTimeout(() => process.kill(process.pid, signal), deadline);
  timer.unref();
  void Promise.all(closing).then(() => {
    clearTimeout(timer);
    // Re-raise, now that no handler is installed, so the process ends as the signal means.
    process.kill(process.pid, signal);
  });
}

function installSignalHandlers(): void {
  if (signalHandlersInstalled) return;
  signalHandlersInstalled = true;
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

function removeSignalHandlers(): void {
  if (!signalHandlersInstalled) return;
  signalHandlersInstalled = false;
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
}

/** Whether `port` on loopback can be listened on now. */
function loopbackPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A loopback port free now, and the one above it too: the plugins' rendezvous use the head port
 * (torch, accelerate) and the one above it (JAX's coordinator). Either can still be taken before
 * they listen, but an ephemeral port in use next to a free one no longer fails JAX's start.
 */
async function freeLoopbackPort(): Promise<number> {
  for (let attempt = 0; ; attempt += 1) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        const found = typeof address === "object" && address ? address.port : 0;
        server.close(() => resolve(found));
      });
    });
    if (port < 65_535 && ((await loopbackPortFree(port + 1)) || attempt >= 20)) return port;
  }
}

/**
 * Refuses a node count a provider cannot hold (`capabilities.maxInstances`: a fixed set of SSH hosts)
 * before any machine starts, rather than failing to grow to it later.
 */
function checkNodeCeiling(provider: Provider | undefined, nodes: Nodes, path: string): void {
  const limit = provider?.capabilities.maxInstances;
  if (limit === undefined || nodes.max <= limit) return;
  throw new ConfigurationError({
    issues: [
      {
        path,
        message: `expected at most ${limit} node${limit === 1 ? "" : "s"}: the ${provider?.name} provider holds no more, received ${nodes.max}`,
      },
    ],
  });
}

function abortError(signal: AbortSignal, what: string): CancelledError {
  // The budget stopped it: that is the error to report, not a generic abort.
  if (BudgetExceededError.isInstance(signal.reason)) return signal.reason;
  return new CancelledError({ message: `${what} was aborted`, cause: signal.reason });
}

/** Resolution settings the pool derived from the request, for display and signal handling. */
interface PoolSettings {
  readonly shutdownTimeoutSeconds: number;
}

/**
 * A running pool of nodes, as {@link compute} returns it: dispatch (`run`, `broadcast`, `gather`,
 * `map`, `stream`), its nodes, events and teardown (`await using`, `close()` or {@link withCompute}).
 */
export interface Pool extends Pick<PoolRuntime, keyof PoolRuntime> {}

/** Options of `pool.detach()`. */
export interface DetachOptions {
  /**
   * Bytes of stream items (as sent) the workers keep, each, for streaming tasks that yield while no
   * client is attached; later items are dropped and counted (`dropped` in `collected()`). Default
   * 64 MiB; 0 keeps none.
   */
  readonly keepItemsBytes?: number;
}

const DEFAULT_KEEP_ITEMS_BYTES = 64 * 1024 * 1024;

/** The pool's implementation; users see it as a {@link Pool}. */
class PoolRuntime implements AsyncDisposable {
  /** The pool's id (also its job id on the workers). */
  readonly id: string;
  #spec: PoolSpec & PoolSettings;
  /** The pool's options. */
  readonly options: Options;

  readonly #hub = new EventHub();
  readonly #tasks: TaskManager;
  readonly #refs = new RemoteRefRegistry({
    run: (pending, node, signal) => this.run(pending, { target: node, ...(signal ? { signal } : {}) }),
    unref: (node, ids) => {
      const connection = this.#nodes.find((each) => each.index === node)?.connection;
      if (connection?.isOpen !== true) return; // a node gone took what it kept with it
      try {
        connection.send({ t: "unref", ids });
      } catch {
        // lost meanwhile: nothing is kept there any more
      }
    },
  });
  /** The authority of the pool's distributed collections (ARCHITECTURE §4c). */
  readonly #collections: CollectionStore;
  readonly #token: string;
  readonly #nodes: NodeRuntime[] = [];
  readonly #abort = new AbortController();
  readonly #detachConsole: () => void;
  /** The secrets the log file masks: credential-looking environment, image env and provider settings, the token. */
  readonly #secrets = new Redactor();
  readonly #logFile: LogFileAttachment;
  #provider: Provider | undefined;
  #cluster: Cluster | undefined;
  #image: Image | undefined;
  #headPort = 29500;
  /** Workers per node a plugin asks for (MIG: one per GPU instance); 1 otherwise. */
  #workersPerNode = 1;
  /** Whether a plugin asked for one worker per accelerator: each worker a process of its own. */
  #processPerWorker = false;
  /** Whether each node checks it has an accelerator per worker (one worker per accelerator). */
  #checkAccelerators = false;
  /** Whether the runtime pins worker `i` of a node to accelerator `i` (one worker per accelerator). */
  #pinAccelerators = false;
  #state: PoolState = "init";
  #closing: Promise<void> | undefined;
  #aroundClient: AsyncDisposable | undefined;
  #startedAt = performance.now();
  /** The pool's running cost, kept from its own events. */
  readonly #cost = new CostMeter();
  readonly #budget: BudgetWatch | undefined;
  /** Set once the budget is spent: what tasks and calls fail with from then on. */
  #budgetSpent: { budget: number; total: number } | undefined;
  /** The node count the pool aims at, and the bounds autoscaling and `resize` keep to. */
  #desired = 0;
  #bounds: { min: number; max: number } = { min: 0, max: 0 };
  /** Instances being provisioned for growth, not yet in `#nodes`. */
  #growing = 0;
  /**
   * Node indices the pool means to start a node under that are not in `#nodes`: being provisioned
   * (growth), or awaiting the reconcile loop's next growth (a start that failed). A broadcast covers
   * them; tasks pinned to them wait.
   */
  readonly #pending = new Map<number, "provisioning" | "awaiting">();
  /** Nodes being stopped and terminated (scale-down, failed starts). */
  #retiring = 0;
  /** Growth and scale-down under way, awaited on shutdown. */
  readonly #background = new Set<Promise<void>>();
  /** Callers of `resize` waiting for the pool to reach its target. */
  readonly #sizeWaiters = new Set<{ check(): void; fail(error: Error): void }>();
  #reconciler: Reconciler | undefined;
  #autoscaler: Autoscaler | undefined;
  #lastPoke = 0;
  /** Growth failures in a row, and no new growth before this time (`performance.now()`): a backoff. */
  #growthFailures = 0;
  #growthPausedUntil = 0;
  /** When the reconcile loop last read the nodes' instances from the provider (`performance.now()`). */
  #instancesCheckedAt = performance.now();

  /** Picks up a detached pool's workers (`attach`): they keep the cluster settings they run with. */
  readonly #attached: boolean;

  /** @internal Use {@link compute}. */
  constructor(
    spec: PoolSpec,
    options: Options,
    onEvent?: (event: SkywardEvent) => void,
    id: string = randomUUID().slice(0, 8),
    taskIdPrefix?: string,
    carriedCost = 0,
    token: string = randomBytes(24).toString("hex"),
    collections?: CollectionStore,
    attached = false,
  ) {
    this.#attached = attached;
    this.id = id;
    this.#token = token;
    this.#cost.carry(carriedCost);
    if (onEvent) this.#hub.on("*", onEvent);
    this.#spec = Object.freeze({ ...spec, shutdownTimeoutSeconds: options.shutdownTimeout });
    this.options = options;
    this.#collections = collections ?? new CollectionStore({ enabled: options.cluster });
    this.#tasks = new TaskManager({
      poolId: id,
      hub: this.#hub,
      onQueued: () => this.#onQueued(),
      retryOnInterruption: options.retryOnInterruption,
      // The effective provision timeout (the option, else the provider's capability, else 300): the
      // spec changes with the offer chosen at start, so it is read when a wait begins.
      nodeWaitSeconds: () => this.spec.provisionTimeout,
      collections: this.#collections,
      ...(taskIdPrefix !== undefined ? { idPrefix: taskIdPrefix } : {}),
    });
    const tasks = this.#tasks;
    const refs = this.#refs;
    internals.set(this, {
      runSubtask: (message, reply) => tasks.runSubtask(message, null, reply),
      adoptRef: (ref) => refs.adopt(ref),
      restoreRefs: (recorded) => refs.restore(recorded),
    });
    this.#detachConsole = attachConsole(this.#hub, options.console, process.stderr, {
      poolId: id,
      status: () => this.#consoleStatus(),
    });
    this.#cost.observe(this.#hub);
    const budget = options.budget;
    if (budget) {
      this.#budget = new BudgetWatch(this.#cost, budget, {
        warning: (cost) =>
          this.#hub.emit({
            type: "budget.warning",
            timestamp: Date.now(),
            poolId: this.id,
            total: cost.total,
            budget: budget.max,
            warnAt: budget.warnAt,
            hourlyRate: cost.hourlyRate,
          }),
        exceeded: (cost) => this.#budgetExceeded(budget.max, cost),
      });
    }
    this.#secrets.addEnvironment(process.env);
    this.#secrets.add(this.#token);
    this.#addSecretsOf(spec);
    this.#logFile = attachLogFile(this.#hub, {
      poolId: id,
      logging: options.logging,
      console: options.console,
      redactor: this.#secrets,
    });
  }

  /** What the live console shows besides events: the size bounds and the pool's {@link cost}. */
  #consoleStatus(): LiveConsoleStatus {
    const { min, max } = this.#bounds;
    const nodes = { min, max, desired: this.#desired };
    const { hourlyRate, total } = this.cost();
    return { nodes, cost: { hourlyRate, total } };
  }

  #addSecretsOf(spec: PoolSpec): void {
    this.#secrets.addEnvironment(spec.image.env);
    this.#secrets.addSettings(spec.provider);
  }

  /** The resolved spec the pool was provisioned from (with several specs: the one chosen). */
  get spec(): PoolSpec & PoolSettings {
    return this.#spec;
  }

  /** The pool's lifecycle state. */
  get state(): PoolState {
    return this.#state;
  }

  /** How many nodes are ready right now. */
  currentNodes(): number {
    return this.#tasks.liveNodes;
  }

  /** The pool's nodes. */
  nodes(): readonly PoolNode[] {
    return this.#nodes.map((node) => ({
      index: node.index,
      instanceId: node.instance.id,
      privateIp: node.instance.privateIp ?? "",
      ready: node.connection?.isOpen === true,
    }));
  }

  /**
   * What the nodes keep for remote references (results run with `withKeep()`): how many references
   * are held and their sizes, and per node how many it holds and how many bytes (copies moved to it
   * included). Kept objects stay in the workers' memory until released (`ref.release()`,
   * `pool.release(ref)`) or the pool closes: watch this to keep it bounded.
   */
  refs(): RemoteRefStats {
    return this.#refs.stats();
  }

  /** Brings a remote reference's value to the client (as `ref.fetch()`); it stays on its nodes. */
  fetch<T>(ref: RemoteRef<T>, options: WaitOptions = {}): Promise<T> {
    return ref.fetch(options);
  }

  /** Frees a remote reference on every node holding it (as `ref.release()`). Idempotent. */
  release(ref: RemoteRef): Promise<void> {
    return ref.release();
  }

  /**
   * The bytes each node's connection has carried since it was made (frames: headers and binary
   * bodies), for the nodes connected now: what moved between this client and the workers.
   */
  traffic(): readonly NodeTraffic[] {
    return this.#nodes.flatMap((node) =>
      node.connection === undefined
        ? []
        : [{ node: node.index, sent: node.connection.bytesSent, received: node.connection.bytesReceived }],
    );
  }

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
  cost(): PoolCost {
    return this.#cost.snapshot();
  }

  /** The pool's events as an async iterable (ends when the pool is destroyed or `signal` aborts). */
  events(signal?: AbortSignal): AsyncIterableIterator<SkywardEvent> {
    return this.#hub.events(signal);
  }

  /** Calls `handler` for every event of `type` (`"*"` for all); returns a function that stops it. */
  on<T extends SkywardEventType>(type: T, handler: (event: EventOf<T>) => void): () => void;
  on(type: "*", handler: (event: SkywardEvent) => void): () => void;
  on(type: SkywardEventType | "*", handler: (event: never) => void): () => void {
    return this.#hub.on(type as "*", handler as (event: SkywardEvent) => void);
  }

  // ————————————————————————————————————————————————————————————————— distributed collections

  get #collectionHost(): CollectionHost {
    return {
      store: this.#collections,
      check: () => {
        this.#collections.checkEnabled();
        this.#checkOpen();
      },
    };
  }

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
  dict<V = unknown, K = string>(name: string): DistributedDict<V, K> {
    this.#collections.checkEnabled();
    return new DistributedDict<V, K>(this.#collectionHost, name);
  }

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
  set<T = unknown>(name: string): DistributedSet<T> {
    this.#collections.checkEnabled();
    return new DistributedSet<T>(this.#collectionHost, name);
  }

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
  counter(name: string): DistributedCounter {
    this.#collections.checkEnabled();
    return new DistributedCounter(this.#collectionHost, name);
  }

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
  queue<T = unknown>(name: string): DistributedQueue<T> {
    this.#collections.checkEnabled();
    return new DistributedQueue<T>(this.#collectionHost, name);
  }

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
  barrier(name: string, n: number): DistributedBarrier {
    this.#collections.checkEnabled();
    return new DistributedBarrier(this.#collectionHost, name, n);
  }

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
  lock(name: string, timeout?: number): DistributedLock {
    this.#collections.checkEnabled();
    return new DistributedLock(this.#collectionHost, name, timeout);
  }

  #setState(state: PoolState): void {
    const previous = this.#state;
    this.#state = state;
    this.#hub.emit({ type: "pool.state", timestamp: Date.now(), poolId: this.id, state, previous });
  }

  #budgetError(taskId?: string): BudgetExceededError | undefined {
    const spent = this.#budgetSpent;
    return spent
      ? new BudgetExceededError({ ...spent, ...(taskId !== undefined ? { taskId } : {}) })
      : undefined;
  }

  /** The budget is spent: no more tasks, the current ones fail with a BudgetExceededError, teardown. */
  #budgetExceeded(budget: number, cost: PoolCost): void {
    if (this.#budgetSpent || this.#state === "shutting_down" || this.#state === "destroyed") return;
    this.#budgetSpent = { budget, total: cost.total };
    this.#hub.emit({
      type: "budget.exceeded",
      timestamp: Date.now(),
      poolId: this.id,
      total: cost.total,
      budget,
      hourlyRate: cost.hourlyRate,
    });
    this.#abort.abort(this.#budgetError());
    this.#tasks.close("the budget is spent", (taskId) => this.#budgetError(taskId) as BudgetExceededError);
    void this.close();
  }

  #checkOpen(): void {
    const spent = this.#budgetError();
    if (spent) throw spent;
    if (this.#state !== "ready") {
      throw new CancelledError({
        message: `The pool is ${this.#state.replace("_", " ")}; it runs no more tasks`,
      });
    }
  }

  // ————————————————————————————————————————————————————————————————— lifecycle

  /** @internal Provisions the nodes and connects to them; called by {@link compute}. */
  async start(specs: readonly PoolSpec[], signal?: AbortSignal): Promise<void> {
    try {
      await this.#start(specs, signal);
    } catch (error) {
      // A budget spent while starting aborts whatever was under way: report the budget.
      throw this.#budgetError() ?? error;
    }
  }

  async #start(specs: readonly PoolSpec[], signal?: AbortSignal): Promise<void> {
    const abort = this.#abort.signal;
    const combined = signal ? AbortSignal.any([signal, abort]) : abort;
    this.#startedAt = performance.now();
    for (const spec of specs) this.#addSecretsOf(spec);
    this.#setState("requesting");
    // Offers from every spec, best first; when one fails to prepare or provision, the next is tried.
    const { candidates, attempts } = await this.#offerCandidates(specs, combined);
    let chosen:
      | { spec: PoolSpec; provider: Provider; offer: Offer; cluster: Cluster; instances: Instance[] }
      | undefined;
    for (const candidate of candidates) {
      const { provider, offer } = candidate;
      let { spec } = candidate;
      this.#spec = Object.freeze({ ...spec, shutdownTimeoutSeconds: this.options.shutdownTimeout });
      let cluster: Cluster | undefined;
      try {
        cluster = await provider.prepare({ spec, offer, signal: combined, poolId: this.id });
        let transformed = await applyImageTransforms(spec.plugins, spec.image, cluster);
        // A plugin may replace the image's bootstrapTimeout (extendImage); options.bootstrapTimeout,
        // when given, wins. The effective value is the pool's deadline, the bootstrap script's and
        // the one providers read from the cluster's spec at provision (boot watchdogs).
        const bootstrapTimeout = this.options.bootstrapTimeout ?? transformed.bootstrapTimeout;
        if (transformed.bootstrapTimeout !== bootstrapTimeout)
          transformed = extendImage(transformed, { bootstrapTimeout });
        if (spec.bootstrapTimeout !== bootstrapTimeout) {
          spec = Object.freeze({ ...spec, bootstrapTimeout });
          cluster = Object.freeze({ ...cluster, spec });
          this.#spec = Object.freeze({ ...spec, shutdownTimeoutSeconds: this.options.shutdownTimeout });
        }
        // The plugin that sets workersPerNode (MIG: one worker per GPU instance) decides; 1 otherwise.
        const layout = resolveWorkerLayout(spec.plugins, cluster);
        this.#workersPerNode = layout.workersPerNode;
        this.#processPerWorker = layout.processPerWorker;
        this.#checkAccelerators = layout.checkAccelerators;
        this.#pinAccelerators = layout.pinAccelerators;
        const { concurrency } = spec.worker;
        if (layout.processPerWorker && concurrency > 1 && concurrency !== layout.workersPerNode) {
          // Each worker process is one rank on one device: more task slots would be ranks twice over.
          throw new ConfigurationError({
            issues: [
              {
                path: "options.worker.concurrency",
                message: `expected 1 (or ${layout.workersPerNode}, the workers per node) with one worker per accelerator, received ${concurrency}`,
              },
            ],
          });
        }
        // Plugins' worker modules travel with the code: they land in the work directory, on sys.path.
        const modulePaths = workerModules(spec.plugins)
          .map((module) => module.path)
          .filter((path): path is string => path !== undefined && !transformed.includes.includes(path));
        this.#image =
          modulePaths.length > 0 ? extendImage(transformed, { includes: modulePaths }) : transformed;
        this.#setState("provisioning");
        const instances = await this.#provision(provider, cluster, spec.nodes.desired, combined);
        chosen = { spec, provider, offer, cluster, instances };
        break;
      } catch (error) {
        if (combined.aborted) throw abortError(combined, "Provisioning the pool");
        // A plugin's transform failing, or bad input, is not a capacity problem: no other offer helps.
        if (!ProvisionError.isInstance(error) && !NoCapacityError.isInstance(error)) {
          if (cluster)
            await provider.teardown({ cluster, signal: AbortSignal.timeout(120_000) }).catch(() => undefined);
          throw error;
        }
        // A NoCapacityError (the provider's, or #provision's) brings its attempts: listed once each,
        // not its message inside ours.
        const failed = attemptsOf(error, {
          provider: provider.name,
          offer: offer.instanceType,
          region: offer.region,
        });
        attempts.push(...failed);
        this.#hub.emit({
          type: "error",
          timestamp: Date.now(),
          poolId: this.id,
          message: `${attemptPlace({ provider: provider.name, offer: offer.instanceType, region: offer.region })} failed: ${failed.map((attempt) => attempt.reason).join("; ")}; trying the next offer`,
          cause: error,
        });
        if (cluster)
          await provider.teardown({ cluster, signal: AbortSignal.timeout(120_000) }).catch(() => undefined);
      }
    }
    if (!chosen) throw new NoCapacityError({ attempts });
    const { spec, provider, offer, cluster, instances } = chosen;
    this.#provider = provider;
    this.#cluster = cluster;
    for (const [index, instance] of instances.entries()) {
      const node: NodeRuntime = {
        index,
        instance,
        connection: undefined,
        endpoint: undefined,
        nextInstance: undefined,
      };
      this.#nodes.push(node);
      // Known to the task manager from now on: a broadcast covers it while it starts.
      this.#tasks.expect(index);
      this.#emitProvisioned(node, provider, offer);
    }
    // Nodes on this machine share its loopback address: the head's services need a free port there.
    const local = instances.every((instance) => instance.privateIp?.startsWith("127.") === true);
    if (local) this.#headPort = await freeLoopbackPort();
    this.#desired = spec.nodes.desired;
    this.#bounds = { min: spec.nodes.min, max: spec.nodes.max };
    // Partial readiness: the pool is usable once `min` nodes are (at least one); the rest join as they come.
    const readyAt = Math.min(spec.nodes.desired, Math.max(1, spec.nodes.min));
    // Every node starts at once: the head's address (what the others need of it) is its private
    // address, known from provisioning, so no node waits for another's bootstrap.
    const head = this.#nodes[0] as NodeRuntime;
    const headStarted = this.#startNode(head, combined);
    // Observed below; this keeps a failure of the head from going unhandled while the others start.
    headStarted.catch(() => undefined);
    const enough = this.#waitForNodes(readyAt, headStarted, this.#nodes.slice(1), combined);
    enough.catch(() => undefined);
    await headStarted;
    await enough;
    this.#setState("ready");
    this.#autoscaler = new Autoscaler(
      {
        cooldownMs: this.options.autoscaleCooldown * 1000,
        idleTimeoutMs: this.options.autoscaleIdleTimeout * 1000,
      },
      this.#startedAt,
    );
    this.#reconciler = new Reconciler(
      () => this.#reconcile(),
      this.options.reconcileTickInterval * 1000,
      (error) => this.#report("the reconcile loop failed", error),
    );
    // Nodes beyond `min` that failed while the pool came up are started again from here.
    if (this.#nodes.length < this.#desired) this.#reconciler.poke();
    this.#hub.emit({
      type: "pool.ready",
      timestamp: Date.now(),
      poolId: this.id,
      nodes: this.#tasks.liveNodes,
      durationMs: performance.now() - this.#startedAt,
    });
    this.#aroundClient = await enterAroundClient(spec.plugins, this.#pluginHandle(), cluster);
  }

  /**
   * Starts `others` (the head is started by the caller) and resolves once `minimum` nodes are ready;
   * rejects with the first failure once too few are left to get there. A node that fails is dropped
   * (its instance terminated); the reconcile loop starts another once the pool is ready.
   */
  #waitForNodes(
    minimum: number,
    head: Promise<void>,
    others: readonly NodeRuntime[],
    signal: AbortSignal,
  ): Promise<void> {
    let starting = others.length + 1;
    let failure: unknown;
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (this.#tasks.liveNodes >= minimum) resolve();
        else if (failure !== undefined && this.#tasks.liveNodes + starting < minimum) reject(failure);
      };
      const settled = (error?: unknown) => {
        starting -= 1;
        if (error !== undefined) failure ??= error;
        check();
      };
      // The head's failure is the caller's to report; here it only stops counting as starting.
      head.then(
        () => settled(),
        (error) => settled(error),
      );
      for (const node of others) {
        this.#startNode(node, signal).then(
          () => settled(),
          (error) => {
            this.#dropNode(node, error);
            settled(error);
          },
        );
      }
      check();
    });
  }

  #report(what: string, error: unknown, node?: number): void {
    if (this.#state === "shutting_down" || this.#state === "destroyed") return;
    this.#hub.emit({
      type: "error",
      timestamp: Date.now(),
      poolId: this.id,
      ...(node !== undefined ? { node } : {}),
      message: `${what}: ${(error as Error)?.message ?? String(error)}`,
      cause: error,
    });
  }

  // ————————————————————————————————————————————————————————————————— elastic size

  /** Nodes the pool has or is getting: ready, starting, being replaced, being provisioned. */
  #actualNodes(): number {
    return this.#nodes.length + this.#growing;
  }

  /** A task waits for a slot: with room to grow (or no node at all), the reconcile loop looks soon. */
  #onQueued(): void {
    const reconciler = this.#reconciler;
    if (!reconciler) return;
    const empty = this.#actualNodes() === 0;
    if (!empty && this.#desired >= this.#bounds.max) return;
    const now = performance.now();
    if (!empty && now - this.#lastPoke < 200) return;
    this.#lastPoke = now;
    reconciler.poke();
  }

  /** One step of the reconcile loop: the autoscaler's decision, then growth or shrinking toward it. */
  async #reconcile(): Promise<void> {
    if (this.#state !== "ready") return;
    const decision = this.#autoscaler?.decide(
      {
        actual: this.#actualNodes(),
        starting: Math.max(0, this.#actualNodes() - this.#tasks.liveNodes),
        queued: this.#tasks.queued,
        slotsPerNode: this.#concurrency(),
        // The head is let go of only as the last node, so while others remain its idleness counts for nothing.
        idleSince: this.#tasks
          .idleNodes()
          .filter(([index]) => index !== 0 || this.#nodes.length === 1)
          .map(([, since]) => since),
      },
      this.#bounds,
      this.#desired,
      performance.now(),
    );
    if (decision) this.#setDesired(decision.to, decision.reason);
    const actual = this.#actualNodes();
    // Indices awaiting a new start that the target no longer needs are given up (their tasks fail).
    let spare = actual + this.#awaiting() - this.#desired;
    for (const [index, state] of [...this.#pending].sort((a, b) => b[0] - a[0])) {
      if (spare <= 0) break;
      if (state !== "awaiting") continue;
      this.#pending.delete(index);
      this.#tasks.startFailed(index, "the pool's target no longer includes it", false);
      spare -= 1;
    }
    if (actual < this.#desired && performance.now() >= this.#growthPausedUntil)
      this.#grow(this.#desired - actual);
    else if (actual > this.#desired) this.#shrink(actual - this.#desired);
    this.#sizeChanged();
    // Once per tick (not on every poke): the provider's view of the connected nodes' instances.
    const now = performance.now();
    if (now - this.#instancesCheckedAt >= this.options.reconcileTickInterval * 1000) {
      this.#instancesCheckedAt = now;
      await this.#checkInstances();
    }
  }

  #setDesired(to: number, reason: string): void {
    if (to === this.#desired) return;
    this.#hub.emit({
      type: "scaling",
      timestamp: Date.now(),
      poolId: this.id,
      from: this.#desired,
      to,
      reason,
    });
    this.#desired = to;
  }

  #track(work: Promise<void>): void {
    this.#background.add(work);
    void work.finally(() => this.#background.delete(work));
  }

  /** Provisions `count` more nodes and starts them, each under the lowest free index. */
  #grow(count: number): void {
    const provider = this.#provider as Provider;
    const cluster = this.#cluster as Cluster;
    // Indices awaiting a new start first, then the lowest free ones.
    const indices = [...this.#pending]
      .filter(([, state]) => state === "awaiting")
      .map(([index]) => index)
      .sort((a, b) => a - b)
      .slice(0, count);
    const used = new Set([...this.#nodes.map((node) => node.index), ...this.#pending.keys()]);
    for (let next = 0; indices.length < count; next += 1) if (!used.has(next)) indices.push(next);
    for (const index of indices) {
      this.#pending.set(index, "provisioning");
      // Known to the task manager from now on: a broadcast covers it while it starts.
      this.#tasks.expect(index);
    }
    this.#growing += count;
    const signal = this.#abort.signal;
    this.#track(
      (async () => {
        let instances: Instance[];
        try {
          instances = await this.#provision(provider, cluster, count, signal);
        } catch (error) {
          this.#growing -= count;
          this.#growthFailed();
          this.#report(`could not add ${count} node${count === 1 ? "" : "s"}`, error);
          for (const index of indices) this.#awaitStart(index, (error as Error)?.message ?? String(error));
          this.#sizeFailed(error as Error);
          return;
        }
        this.#growing -= count;
        if (signal.aborted) {
          for (const index of indices) this.#pending.delete(index);
          await provider
            .terminate({
              cluster,
              ids: instances.map((instance) => instance.id),
              signal: AbortSignal.timeout(60_000),
            })
            .catch(() => undefined);
          return;
        }
        for (const [position, index] of indices.entries()) {
          const instance = instances[position];
          if (!instance) {
            this.#awaitStart(index, "the provider returned fewer instances than asked for");
            continue;
          }
          this.#pending.delete(index);
          const node: NodeRuntime = {
            index,
            instance,
            connection: undefined,
            endpoint: undefined,
            nextInstance: undefined,
          };
          this.#nodes.push(node);
          this.#nodes.sort((a, b) => a.index - b.index);
          this.#emitProvisioned(node, provider, cluster.offer);
          this.#startNode(node, signal).then(
            () => {
              this.#growthFailures = 0;
              this.#reconciler?.poke();
              this.#sizeChanged();
            },
            (error) => this.#dropNode(node, error),
          );
        }
      })(),
    );
  }

  /**
   * Retires up to `count` idle nodes, longest idle first; busy ones wait for a later step. The head
   * goes only as the last node (scaling to zero): the others' cluster settings name its address.
   */
  #shrink(count: number): void {
    let removed = 0;
    for (const [index] of this.#tasks.idleNodes()) {
      if (removed >= count) break;
      if (index === 0 && this.#nodes.length > 1) continue;
      const node = this.#nodes.find((candidate) => candidate.index === index);
      if (!node || !this.#tasks.remove(index)) continue;
      removed += 1;
      this.#nodes.splice(this.#nodes.indexOf(node), 1);
      this.#track(this.#retire(node));
    }
  }

  /** Stops an idle node's worker and has the provider terminate its instance. */
  async #retire(node: NodeRuntime): Promise<void> {
    node.retiring = true;
    this.#retiring += 1;
    try {
      await this.#stopAndTerminate(node);
    } finally {
      this.#retiring -= 1;
    }
    this.#sizeChanged();
  }

  async #stopAndTerminate(node: NodeRuntime): Promise<void> {
    const connection = node.connection;
    node.connection = undefined;
    if (connection?.isOpen) {
      try {
        connection.send({ t: "shutdown" });
      } catch {
        // lost meanwhile
      }
      await connection.close({ timeoutMs: 5000 });
    }
    node.endpoint?.close?.();
    node.endpoint = undefined;
    // An instance asked for after an interruption notice goes too: the node it was for is let go.
    const asked = await node.nextInstance?.then((instance) => instance.id).catch(() => undefined);
    node.nextInstance = undefined;
    try {
      await (this.#provider as Provider).terminate({
        cluster: this.#cluster as Cluster,
        ids: asked !== undefined ? [node.instance.id, asked] : [node.instance.id],
        signal: AbortSignal.timeout(this.options.shutdownTimeout * 1000),
      });
      this.#hub.emit({
        type: "node.destroyed",
        timestamp: Date.now(),
        poolId: this.id,
        node: node.index,
        instanceId: node.instance.id,
      });
    } catch (error) {
      this.#report(`terminating node ${node.index} (${node.instance.id}) failed`, error, node.index);
    }
  }

  /** Growth failed: the next attempt waits a tick, doubling with each failure in a row, up to 5 minutes. */
  #growthFailed(): void {
    const tick = this.options.reconcileTickInterval * 1000;
    this.#growthPausedUntil = performance.now() + Math.min(tick * 2 ** this.#growthFailures, 300_000);
    this.#growthFailures += 1;
  }

  /** A node that failed to start: reported, taken out of the pool, its instance terminated. */
  #dropNode(node: NodeRuntime, error: unknown): void {
    if (this.#state === "shutting_down" || this.#state === "destroyed") return;
    this.#growthFailed();
    this.#report(`node ${node.index} failed to start`, error, node.index);
    const position = this.#nodes.indexOf(node);
    if (position >= 0) this.#nodes.splice(position, 1);
    // Tasks pinned to it (a broadcast's parts) wait for the node the reconcile loop starts under its
    // index while the pool wants one, and fail otherwise.
    this.#awaitStart(
      node.index,
      `node ${node.index} failed to start: ${(error as Error)?.message ?? String(error)}`,
    );
    this.#track(this.#retire(node));
    this.#sizeFailed(error as Error);
  }

  /**
   * Starting a node under `index` failed: while the pool wants more nodes it waits for the reconcile
   * loop's next growth (tasks pinned to it wait, within `provisionTimeout`); otherwise it is given up
   * and those tasks fail.
   */
  #awaitStart(index: number, reason: string): void {
    const again = this.#actualNodes() + this.#awaiting() < this.#desired;
    if (again) this.#pending.set(index, "awaiting");
    else this.#pending.delete(index);
    this.#tasks.startFailed(index, reason, again);
  }

  /** Indices awaiting a new start. */
  #awaiting(): number {
    let count = 0;
    for (const state of this.#pending.values()) if (state === "awaiting") count += 1;
    return count;
  }

  #emitProvisioned(node: NodeRuntime, provider: Provider, offer: Offer): void {
    const { instance } = node;
    const asked = this.spec.accelerator?.formFactor;
    this.#hub.emit({
      type: "node.provisioned",
      timestamp: Date.now(),
      poolId: this.id,
      node: node.index,
      instanceId: instance.id,
      provider: provider.name,
      instanceType: offer.instanceType,
      spot: instance.spot,
      region: offer.region,
      accelerator: offer.accelerator
        ? `${offer.accelerator.count}x ${offer.accelerator.name}${offer.accelerator.formFactor === undefined ? "" : ` ${offer.accelerator.formFactor}`}`
        : null,
      ...(asked !== undefined && offerFormFactorFit(offer, offerQuery(this.spec)) === "unknown"
        ? { unverifiedFormFactor: asked }
        : {}),
      hourlyPrice: instanceHourlyPrice(instance, offer),
      publicIp: instance.publicIp,
      privateIp: instance.privateIp,
    });
  }

  #sizeChanged(): void {
    for (const waiter of [...this.#sizeWaiters]) waiter.check();
  }

  #sizeFailed(error: Error): void {
    for (const waiter of [...this.#sizeWaiters]) waiter.fail(error);
  }

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
  async resize(target: number | NodesInput | Nodes, options: WaitOptions = {}): Promise<void> {
    this.#checkOpen();
    const { signal } = options;
    if (signal?.aborted) throw abortError(signal, "resize");
    let topology: Nodes;
    if (typeof target === "number") {
      const { min, max } = this.#bounds;
      const fixed = min === max;
      const lowest = fixed ? 1 : min;
      const highest = fixed ? Number.POSITIVE_INFINITY : max;
      if (!Number.isInteger(target) || target < lowest || target > highest) {
        throw new ConfigurationError({
          issues: [
            {
              path: "nodes",
              message: fixed
                ? `expected a node count as a whole number >= 1, received ${String(target)}`
                : `expected a node count from ${min} to ${max} (the pool's bounds; to change them, pass sky.nodes({ desired, min, max })), received ${String(target)}`,
            },
          ],
        });
      }
      topology = fixed ? { desired: target, min: target, max: target } : { desired: target, min, max };
    } else {
      topology = resolveNodes(target as NodesInput);
    }
    checkNodeCeiling(this.#provider, topology, "nodes.max");
    this.#bounds = { min: topology.min, max: topology.max };
    this.#setDesired(topology.desired, "resize()");
    const desired = this.#desired;
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        check: () => {
          const ready = this.#tasks.liveNodes;
          const settled = ready === desired && this.#actualNodes() === desired && this.#retiring === 0;
          if (settled || this.#desired !== desired || this.#state !== "ready") done();
        },
        fail: (error: Error) => done(error),
      };
      const onAbort = () => done(abortError(signal as AbortSignal, "resize"));
      const done = (error?: Error) => {
        this.#sizeWaiters.delete(waiter);
        signal?.removeEventListener("abort", onAbort);
        if (error) reject(error);
        else if (this.#state !== "ready")
          reject(
            new CancelledError({ message: `The pool is ${this.#state.replace("_", " ")}; resize stopped` }),
          );
        else resolve();
      };
      this.#sizeWaiters.add(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#reconciler?.poke();
    });
  }

  #pluginHandle(): PoolHandle {
    return {
      id: this.id,
      spec: this.spec,
      currentNodes: () => this.currentNodes(),
    } as PoolHandle;
  }

  async #offerCandidates(
    specs: readonly PoolSpec[],
    signal: AbortSignal,
  ): Promise<{
    candidates: { spec: PoolSpec; provider: Provider; offer: Offer; price: number }[];
    attempts: ProvisionAttempt[];
  }> {
    const attempts: ProvisionAttempt[] = [];
    const candidates: {
      spec: PoolSpec;
      provider: Provider;
      offer: Offer;
      price: number;
      order: number;
      unverified: boolean;
    }[] = [];
    for (const [order, spec] of specs.entries()) {
      const provider = spec.provider ?? Local();
      const query = offerQuery(spec);
      let offers: readonly Offer[];
      try {
        offers = await cachedOffers(provider, query, { signal });
      } catch (error) {
        if (signal.aborted) throw abortError(signal, "Looking for offers");
        attempts.push({ provider: provider.name, reason: `offers failed: ${(error as Error).message}` });
        continue;
      }
      // A known form factor other than the one asked for never runs; an unknown one is kept, tried
      // after every offer known to fit, and reported when provisioned (node.provisioned's
      // unverifiedFormFactor).
      const usable = offers
        .map((offer) => ({ offer, fit: offerFormFactorFit(offer, query) }))
        .filter((entry) => entry.fit !== "differs")
        .map(({ offer, fit }) => ({
          offer,
          unverified: fit === "unknown",
          price: offerPrice(offer, spec.allocation),
        }))
        .filter(
          (entry): entry is { offer: Offer; unverified: boolean; price: number } => entry.price !== null,
        )
        .filter((entry) => spec.maxHourlyCost === undefined || entry.price <= spec.maxHourlyCost)
        .sort((a, b) => Number(a.unverified) - Number(b.unverified) || a.price - b.price)
        .slice(0, 3);
      if (usable.length === 0) {
        const wanted = spec.accelerator
          ? `${spec.accelerator.count}x ${spec.accelerator.name}${spec.accelerator.formFactor === undefined ? "" : ` ${spec.accelerator.formFactor}`}`
          : "CPU nodes";
        attempts.push({
          provider: provider.name,
          reason: `no offer for ${wanted}${spec.maxHourlyCost !== undefined ? ` under $${spec.maxHourlyCost}/h` : ""} (${spec.allocation})`,
        });
        continue;
      }
      for (const entry of usable) candidates.push({ spec, provider, ...entry, order });
    }
    if (candidates.length === 0) throw new NoOffersError({ attempts });
    // "cheapest": the lowest price first, across specs; "first": the specs in the order given. Within
    // either, offers known to have the form factor asked for come before those that do not say.
    candidates.sort((a, b) =>
      this.options.selection === "first"
        ? a.order - b.order || Number(a.unverified) - Number(b.unverified) || a.price - b.price
        : Number(a.unverified) - Number(b.unverified) || a.price - b.price,
    );
    return { candidates, attempts };
  }

  async #provision(
    provider: Provider,
    cluster: Cluster,
    count: number,
    signal: AbortSignal,
  ): Promise<Instance[]> {
    const instances: Instance[] = [];
    const attempts: ProvisionAttempt[] = [];
    for (let attempt = 1; instances.length < count; attempt += 1) {
      if (signal.aborted) throw abortError(signal, "Provisioning");
      try {
        instances.push(...(await provider.provision({ cluster, count: count - instances.length, signal })));
      } catch (error) {
        if (signal.aborted) throw abortError(signal, "Provisioning");
        attempts.push(
          ...attemptsOf(error, {
            provider: provider.name,
            offer: cluster.offer.instanceType,
            region: cluster.offer.region,
          }),
        );
        if (
          attempt >= this.spec.maxProvisionAttempts ||
          (ProvisionError.isInstance(error) && !error.isRetryable && !NoCapacityError.isInstance(error))
        ) {
          if (instances.length > 0)
            await provider.terminate({
              cluster,
              ids: instances.map((instance) => instance.id),
              signal: AbortSignal.timeout(60_000),
            });
          throw NoCapacityError.isInstance(error) || attempt >= this.spec.maxProvisionAttempts
            ? new NoCapacityError({ attempts, cause: error })
            : error;
        }
        await new Promise((resolve) => setTimeout(resolve, this.spec.provisionRetryDelay * 1000));
      }
    }
    try {
      return await this.#waitUntilRunning(provider, cluster, instances, signal);
    } catch (error) {
      await provider
        .terminate({
          cluster,
          ids: instances.map((instance) => instance.id),
          signal: AbortSignal.timeout(60_000),
        })
        .catch(() => undefined);
      throw error;
    }
  }

  /**
   * Polls `getInstance` until every instance runs and can be reached (an SSH address, or a provider
   * that starts workers itself), within `provisionTimeout`.
   */
  async #waitUntilRunning(
    provider: Provider,
    cluster: Cluster,
    instances: Instance[],
    signal: AbortSignal,
  ): Promise<Instance[]> {
    const reachable = (instance: Instance) => instance.status === "running";
    const deadline = performance.now() + this.spec.provisionTimeout * 1000;
    let interval = 1000;
    const current = [...instances];
    while (!current.every(reachable)) {
      if (signal.aborted) throw abortError(signal, "Waiting for instances");
      if (performance.now() > deadline) {
        const waiting = current
          .filter((instance) => !reachable(instance))
          .map((instance) => `${instance.id} (${instance.status})`);
        throw new ProvisionError({
          provider: provider.name,
          isRetryable: true,
          message: `Instances not running with an address within ${this.spec.provisionTimeout} s: ${waiting.join(", ")}`,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, interval));
      interval = Math.min(interval * 1.5, 5000);
      for (const [index, instance] of current.entries()) {
        if (reachable(instance)) continue;
        const latest = await provider.getInstance({ cluster, id: instance.id, signal });
        if (latest === null || latest.status === "terminated" || latest.status === "stopping") {
          throw new ProvisionError({
            provider: provider.name,
            isRetryable: true,
            message: `Instance ${instance.id} went away while starting (${latest?.status ?? "gone"})`,
          });
        }
        current[index] = latest;
      }
    }
    return current;
  }

  /** Task slots per node: the worker's concurrency, and at least one per worker a plugin asks for. */
  #concurrency(): number {
    return Math.max(this.spec.worker.concurrency, this.#workersPerNode);
  }

  /** The executor: the process one when a plugin asked for one worker (process) per accelerator. */
  #executor(): "thread" | "process" {
    return this.#processPerWorker ? "process" : this.spec.worker.executor;
  }

  /**
   * How many workers the pool's nodes run in all (nodes × workers per node, nodes still starting or
   * being replaced included): `broadcast`'s result count.
   */
  workerCount(): number {
    return this.#indices().length * this.#workersPerNode;
  }

  /** The pool's node indices, ascending: its nodes, and those it is starting a node under. */
  #indices(): number[] {
    return [...this.#nodes.map((node) => node.index), ...this.#pending.keys()].sort((a, b) => a - b);
  }

  #launchContext(
    node: NodeRuntime,
    pythonBin: string,
    venvDir: string | undefined,
    privateIp: string,
    root: string | undefined,
  ): LaunchContext {
    const head = this.#nodes[0]?.instance;
    return {
      nodeId: node.index,
      numNodes: this.#nodes.length,
      headAddr: head?.privateIp ?? "127.0.0.1",
      headPort: this.#headPort,
      privateIp,
      pythonBin,
      venvDir: venvDir ?? "",
      ...(root !== undefined ? { root } : venvDir ? { root: posix.dirname(venvDir) } : {}),
      concurrency: this.#concurrency(),
      executor: this.#executor(),
      workersPerNode: this.#workersPerNode,
    } as LaunchContext;
  }

  #workerArgs(node: NodeRuntime): string[] {
    const { worker, ttl } = this.spec;
    const args = [
      "--node",
      String(node.index),
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--concurrency",
      String(this.#concurrency()),
      "--buffer",
      String(worker.buffer === "auto" ? 0 : worker.buffer),
      "--executor",
      this.#executor(),
      "--ttl",
      String(ttl),
    ];
    if (!worker.reuseProcesses) args.push("--no-reuse-processes");
    const selfDestruct =
      this.#provider && this.#cluster
        ? this.#provider.selfDestruct({ cluster: this.#cluster, instance: node.instance })
        : "";
    if (selfDestruct) args.push("--self-destruct", selfDestruct);
    const notice =
      this.#provider && this.#cluster
        ? this.#provider.interruptionNotice?.({ cluster: this.#cluster, instance: node.instance })
        : null;
    if (notice) {
      args.push("--interruption-notice", `${notice.kind}=${notice.endpoint}`);
      if (notice.intervalSeconds !== undefined)
        args.push("--interruption-poll-interval", String(notice.intervalSeconds));
    }
    return args;
  }

  async #startNode(node: NodeRuntime, signal: AbortSignal): Promise<void> {
    const provider = this.#provider as Provider;
    const cluster = this.#cluster as Cluster;
    const started = performance.now();
    const phaseStarts = new Map<string, number>();
    const progress = (
      phase: string,
      status: "started" | "finished" | "failed",
      durationMs?: number,
      detail?: string,
    ) => {
      const now = performance.now();
      if (status === "started") phaseStarts.set(phase, now);
      const begun = phaseStarts.get(phase);
      const duration = durationMs ?? (status !== "started" && begun !== undefined ? now - begun : undefined);
      this.#hub.emit({
        type: "bootstrap.phase",
        timestamp: Date.now(),
        poolId: this.id,
        node: node.index,
        phase,
        status,
        ...(duration !== undefined ? { durationMs: duration } : {}),
        ...(detail ? { detail } : {}),
      } as SkywardEvent);
    };
    const command = (environment: WorkerEnvironment) =>
      applyLaunchers(
        this.spec.plugins,
        LaunchCommand.create({
          launcher: environment.pythonBin,
          entrypoint: environment.workerScript,
          args: this.#workerArgs(node),
        }),
        this.#launchContext(
          node,
          environment.pythonBin,
          environment.venvDir,
          environment.privateIp,
          environment.root,
        ),
      );
    const endpoint = await provider.launchWorker({
      cluster,
      instance: node.instance,
      nodeId: node.index,
      image: this.#image as Image,
      command,
      env: (this.#image as Image).env,
      token: this.#token,
      pluginOps: collectPluginBootstrapOps(this.spec.plugins, cluster),
      timeoutSeconds: this.spec.bootstrapTimeout,
      connectTimeoutSeconds: this.spec.sshTimeout,
      connectRetryIntervalSeconds: this.spec.sshRetryInterval,
      onExit: (code, exitSignal) => {
        if (this.#state === "shutting_down" || this.#state === "destroyed" || node.retiring) return;
        this.#hub.emit({
          type: "error",
          timestamp: Date.now(),
          poolId: this.id,
          node: node.index,
          message: `the worker process exited (${exitSignal ?? `code ${code}`})`,
        });
      },
      signal,
      progress: (report) => progress(report.phase, report.status, report.durationMs, report.detail),
    });
    let connection: WorkerConnection;
    try {
      const where = endpoint.openStream
        ? { stream: await endpoint.openStream(), host: endpoint.host }
        : { host: endpoint.host, port: endpoint.port };
      connection = await WorkerConnection.connect(where, {
        token: endpoint.token ?? this.#token,
        node: node.index,
        signal,
        timeoutMs: this.spec.sshTimeout * 1000,
        // A worker silent this long (stopped, hung, cut off) is lost; pings keep a quiet one talking.
        silenceTimeoutMs: this.options.livenessTimeout * 1000,
        pingIntervalMs: Math.min(5_000, (this.options.livenessTimeout * 1000) / 3),
      });
    } catch (error) {
      endpoint.close?.();
      throw error;
    }
    node.endpoint?.close?.();
    node.endpoint = endpoint;
    node.connection = connection;
    // An attached pool knows neither the plugins nor the metrics its workers were started with:
    // they are sent back as the worker has them (its plugins' worker layout with them).
    const kept = this.#attached ? connection.welcome.cluster : undefined;
    if (kept) this.#workersPerNode = kept.workers_per_node;
    await this.#sendCluster(node, connection, signal, kept ?? undefined);
    await this.#passFirstHealthCheck(node, connection, signal);
    this.#hub.emit({
      type: "node.bootstrapped",
      timestamp: Date.now(),
      poolId: this.id,
      node: node.index,
      instanceId: node.instance.id,
      durationMs: performance.now() - started,
    });
    const { buffer } = this.spec.worker;
    const capacity = buffer === "auto" ? "auto" : this.#concurrency() + buffer;
    // Through the task manager's listener, which also gets what the worker sent before it was attached.
    this.#tasks.attach(node.index, connection, capacity, this.#concurrency(), (event) => {
      if (event.type === "interruption") this.#nodeInterrupted(node, connection, event);
    });
    relayMetrics(connection, this.#hub, this.id, node.index);
    connection.onLost((loss) => this.#nodeLost(node, connection, loss.error.message));
    const checker = this.options.healthChecker;
    if (checker) {
      monitorHealth(connection, checker, this.#abort.signal, (reason, failures) =>
        this.#declareLost(node, `its health check failed ${failures} times in a row: ${reason}`),
      );
    }
    this.#hub.emit({
      type: "node.ready",
      timestamp: Date.now(),
      poolId: this.id,
      node: node.index,
      instanceId: node.instance.id,
    });
  }

  /** With a health checker, a node is ready only once a check succeeds. */
  async #passFirstHealthCheck(
    node: NodeRuntime,
    connection: WorkerConnection,
    signal: AbortSignal,
  ): Promise<void> {
    const checker = this.options.healthChecker;
    if (!checker) return;
    const started = performance.now();
    const reason = await firstHealthy(connection, checker, signal);
    if (signal.aborted) throw abortError(signal, `Starting node ${node.index}`);
    if (reason === undefined) {
      this.#hub.emit({
        type: "bootstrap.phase",
        timestamp: Date.now(),
        poolId: this.id,
        node: node.index,
        phase: "health",
        status: "finished",
        durationMs: performance.now() - started,
      });
      return;
    }
    if (node.connection === connection) node.connection = undefined;
    await connection.close({ timeoutMs: 1000 });
    throw new BootstrapError({
      node: node.index,
      phase: "health",
      logTail: "",
      message: `Node ${node.index} failed its health check ${checker.failures} times in a row: ${reason}`,
    });
  }

  async #sendCluster(
    node: NodeRuntime,
    connection: WorkerConnection,
    signal: AbortSignal,
    kept?: Omit<ClusterMessage, "env">,
  ): Promise<void> {
    const head = this.#nodes[0]?.instance;
    const accelerator = this.spec.accelerator;
    // The worker keeps its environment when a cluster comes with none.
    const message: ClusterMessage = kept
      ? { ...kept, t: "cluster", env: {} }
      : {
          t: "cluster",
          node: node.index,
          total_nodes: this.#nodes.length,
          workers_per_node: this.#workersPerNode,
          ...(this.#checkAccelerators ? { check_accelerators: true } : {}),
          ...(this.#pinAccelerators ? { pin_accelerators: true } : {}),
          head_addr: head?.privateIp ?? "127.0.0.1",
          head_port: this.#headPort,
          job_id: this.id,
          peers: this.#nodes.map((peer) => ({
            node: peer.index,
            private_ip: peer.instance.privateIp ?? "",
            public_ip: peer.instance.publicIp ?? "",
          })),
          accelerators: accelerator?.count ?? 0,
          accelerator: accelerator
            ? {
                type: accelerator.name,
                count: accelerator.count,
                memory_gb: accelerator.memoryGb ?? 0,
                is_trainium: accelerator.isTrainium,
              }
            : null,
          network: null,
          env: (this.#image as Image).env,
          plugins: workerModules(this.spec.plugins).map((module) => ({
            name: module.plugin,
            module: module.module,
            config: module.config as WireValue,
          })),
          metrics: clusterMetrics((this.#image as Image).metrics),
        };
    const ready = new Promise<void>((resolve, reject) => {
      const off = connection.onMessage((reply) => {
        if (reply.t === "ready") {
          off();
          resolve();
        } else if (reply.t === "reject") {
          // The worker could not apply the cluster settings (a plugin's worker module failed to import).
          off();
          reject(
            new BootstrapError({
              node: node.index,
              phase: "plugins",
              logTail: "",
              message: `Node ${node.index} refused its settings: ${reply.reason}`,
            }),
          );
        }
      });
      void connection.closed.then((loss) => {
        off();
        reject(
          loss?.error ??
            new CancelledError({
              message: `The connection to node ${node.index} closed before it was ready`,
            }),
        );
      });
      signal.addEventListener("abort", () => reject(abortError(signal, `Starting node ${node.index}`)), {
        once: true,
      });
    });
    connection.send(message);
    await ready;
  }

  /**
   * A step of the reconcile loop, once per tick: reads the connected nodes' instances from the
   * provider; one gone behind the pool's back (terminated, stopping, not found) is lost.
   */
  async #checkInstances(): Promise<void> {
    const provider = this.#provider;
    const cluster = this.#cluster;
    if (!provider || !cluster) return;
    await checkInstances({
      timeoutSeconds: this.options.reconcileTickInterval,
      signal: this.#abort.signal,
      nodes: this.#nodes
        .filter((node) => node.connection !== undefined && !node.retiring)
        .map((node) => ({ index: node.index, instanceId: node.instance.id })),
      getInstance: (id, signal) => provider.getInstance({ cluster, id, signal }),
      onGone: (watched, status) => {
        // Elastic pools can have gaps in their node indices: found by index, not by position.
        const node = this.#nodes.find((candidate) => candidate.index === watched.index);
        // A late answer about an instance the node no longer runs on (or a node let go of) changes nothing.
        if (node?.instance.id !== watched.instanceId || !node.connection || node.retiring) return;
        const reason = `the provider reports its instance ${watched.instanceId} ${status}`;
        // A spot instance ended behind the pool's back was, in all likelihood, reclaimed.
        if (node.instance.spot) {
          this.#hub.emit({
            type: "node.preempted",
            timestamp: Date.now(),
            poolId: this.id,
            node: node.index,
            instanceId: node.instance.id,
            reason,
          });
        }
        this.#declareLost(node, reason);
      },
    });
  }

  /** Declares a node lost while its connection may still look open, and closes that connection. */
  #declareLost(node: NodeRuntime, reason: string): void {
    const connection = node.connection;
    if (!connection) return;
    this.#nodeLost(node, connection, reason);
    void connection.close({ timeoutMs: 1000 });
  }

  /**
   * The cloud will reclaim the node's instance: it takes no new tasks, its tasks that have not
   * started move elsewhere, its replacement's instance is asked for at once, and the node is let go
   * as soon as its running tasks are done (or lost with them, which retries them).
   */
  #nodeInterrupted(node: NodeRuntime, connection: WorkerConnection, notice: WorkerEvent): void {
    if (node.connection !== connection || node.nextInstance !== undefined) return;
    if (this.#state === "shutting_down" || this.#state === "destroyed") return;
    const reason = [notice.kind, notice.action, notice.time ? `at ${notice.time}` : ""]
      .filter((part) => typeof part === "string" && part !== "")
      .join(" ");
    this.#hub.emit({
      type: "node.preempted",
      timestamp: Date.now(),
      poolId: this.id,
      node: node.index,
      instanceId: node.instance.id,
      reason,
    });
    this.#tasks.drain(node.index);
    const provider = this.#provider as Provider;
    const cluster = this.#cluster as Cluster;
    const next = this.#provision(provider, cluster, 1, this.#abort.signal).then(([instance]) => {
      if (!instance) throw new ProvisionError({ provider: provider.name, message: "no instance came back" });
      return instance;
    });
    next.catch(() => undefined);
    node.nextInstance = next;
    void this.#tasks
      .whenIdle(node.index)
      .then(() => this.#declareLost(node, `interruption notice: ${reason}`));
  }

  #nodeLost(node: NodeRuntime, connection: WorkerConnection, reason: string): void {
    if (node.connection !== connection) return;
    node.connection = undefined;
    this.#refs.nodeLost(node.index);
    this.#tasks.detach(node.index, reason);
    // Let go of on purpose (scale-down): not lost, so no event and no replacement.
    if (node.retiring) return;
    if (this.#state === "shutting_down" || this.#state === "destroyed") return;
    this.#hub.emit({
      type: "node.lost",
      timestamp: Date.now(),
      poolId: this.id,
      node: node.index,
      instanceId: node.instance.id,
      reason,
    });
    void this.#replaceNode(node, reason);
  }

  async #replaceNode(node: NodeRuntime, reason: string): Promise<void> {
    const provider = this.#provider as Provider;
    const cluster = this.#cluster as Cluster;
    // Lost nodes are always replaced (tasks count their own retries); a replacement that fails gives up.
    const previous = node.instance;
    const asked = node.nextInstance;
    try {
      await provider.terminate({ cluster, ids: [previous.id], signal: AbortSignal.timeout(60_000) });
      // The instance asked for at the interruption notice, or (none, or it failed) a new one now.
      const instance =
        (asked ? await asked.catch(() => undefined) : undefined) ??
        (await this.#provision(provider, cluster, 1, this.#abort.signal))[0];
      if (!instance) throw new ProvisionError({ provider: provider.name, message: "no instance came back" });
      node.instance = instance;
      node.nextInstance = undefined;
      await this.#startNode(node, this.#abort.signal);
      this.#hub.emit({
        type: "node.replaced",
        timestamp: Date.now(),
        poolId: this.id,
        node: node.index,
        instanceId: instance.id,
        previousInstanceId: previous.id,
      });
    } catch (error) {
      node.nextInstance = undefined;
      if (this.#state === "shutting_down" || this.#state === "destroyed") return;
      // An elastic pool lets the node go like one that failed to start: the reconcile loop starts
      // another in its place (tasks pinned to it wait for that one). A fixed pool gives it up.
      const elastic = this.#bounds.min !== this.#bounds.max;
      if (!elastic) this.#tasks.abandonNode(node.index, (error as Error).message);
      this.#hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: this.id,
        node: node.index,
        message: `could not replace node ${node.index} (lost: ${reason}): ${(error as Error).message}`,
        cause: error,
      });
      if (elastic) this.#dropNode(node, error);
    }
  }

  /**
   * Shuts the pool down: plugins' client hooks exited in reverse, queued and running tasks
   * cancelled, workers released, instances terminated and provider resources torn down.
   * Idempotent; never rejects (failures are reported as `error` events and on the console).
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  /**
   * Leaves the pool running and lets go of it: returns its id, for {@link attach} from this or
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
  async detach(options: DetachOptions = {}): Promise<string> {
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
    if (this.#closing) throw new Error(`pool ${this.id} is already closed or detached`);
    if (this.#state !== "ready")
      throw new Error(`pool ${this.id} can be detached once ready (it is ${this.#state})`);
    const provider = this.#provider;
    const cluster = this.#cluster;
    if (!provider || !cluster) throw new Error(`pool ${this.id} has no provider yet`);
    const local = provider.name === "local";
    if (!local && typeof provider.reconnectWorker !== "function") {
      throw new Error(
        `pool ${this.id} runs on "${provider.name}", which cannot reach a detached pool's workers again (the provider has no reconnectWorker): it cannot be detached`,
      );
    }
    const nodes: DetachedNode[] = [];
    for (const node of this.#nodes) {
      const endpoint = node.endpoint;
      if (!node.connection?.isOpen || !endpoint || (local && endpoint.openStream)) {
        throw new Error(
          `pool ${this.id}: node ${node.index} is not connected, so the pool cannot be detached now`,
        );
      }
      nodes.push({
        index: node.index,
        instanceId: node.instance.id,
        host: endpoint.host,
        port: endpoint.port,
        pid: endpoint.pid,
        hourlyPrice: node.instance.hourlyPrice ?? instanceHourlyPrice(node.instance, cluster.offer),
      });
    }
    const tasks = this.#tasks.onWorkers();
    const specific = cluster.specific as { root?: unknown; workdir?: unknown };
    const offer = cluster.offer;
    const now = Date.now();
    const cost = this.#cost.snapshot(now);
    const budget = this.options.budget ?? null;
    // The budget keeps applying while nobody is attached: at the pool's rate it runs out in
    // `budgetSeconds`, when the workers stop themselves (as at the end of their TTL).
    const budgetSeconds =
      budget && cost.hourlyRate > 0
        ? Math.max(0, ((budget.max - cost.total) / cost.hourlyRate) * 3600)
        : null;
    await writePoolState({
      version: 1,
      id: this.id,
      provider: provider.name,
      providerSettings: {},
      clusterId: cluster.id,
      root: local && typeof specific.root === "string" ? specific.root : null,
      workdir: local && typeof specific.workdir === "string" ? specific.workdir : null,
      instanceType: offer.instanceType,
      region: offer.region,
      spot: this.#nodes.some((node) => node.instance.spot),
      nodes,
      tasks,
      ttl: this.spec.ttl,
      detachedAt: now,
      pid: process.pid,
      // The workers' own token: an attached pool was constructed with the one they were started with.
      token: await sealToken(this.#token),
      ...(local
        ? {}
        : {
            cluster: withoutSecrets({
              id: cluster.id,
              provider: cluster.provider,
              poolId: cluster.poolId,
              region: cluster.region,
              offer: cluster.offer,
              ssh: cluster.ssh,
              specific: cluster.specific,
            }),
            instances: withoutSecrets(this.#nodes.map((node) => node.instance)),
          }),
      cost: { total: cost.total, hourlyRate: cost.hourlyRate },
      refs: this.#refs.snapshot(),
      worker: this.spec.worker,
      collectionsEnabled: this.options.cluster,
      budget: budget ? { max: budget.max, warnAt: budget.warnAt } : null,
      budgetDeadline: budgetSeconds === null ? null : now + budgetSeconds * 1000,
    });
    // The workers keep the results and outlive this process; a ping after the release tells when
    // each has applied it.
    await Promise.all(
      this.#nodes.map(async (node) => {
        const connection = node.connection as WorkerConnection;
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
          ttl: this.spec.ttl,
          keep: true,
          keep_items_bytes: keepItemsBytes,
          ...(budgetSeconds !== null ? { deadline: budgetSeconds } : {}),
        });
        connection.send({ t: "ping", ts });
        await ponged;
      }),
    );
    // Every collection operation a worker sent came before its pong: the collections are final.
    await saveCollections(this.id, this.#collections);
    if (local) detachLocalWorkers(nodes.map((node) => node.instanceId));
    this.#closing = this.#shutdown(true);
    await this.#closing;
    return this.id;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Tears the pool down; `detached`: only this process's side (the workers were released with `keep`). */
  async #shutdown(detached = false): Promise<void> {
    const wasStarted = this.#state !== "init";
    this.#refs.closeAll();
    this.#setState("shutting_down");
    this.#budget?.stop();
    this.#abort.abort(new CancelledError({ message: "The pool is shutting down" }));
    this.#sizeChanged();
    await this.#reconciler?.stop();
    if (detached) {
      // No `cancel` may reach the workers: connections go first, then the waiting callers.
      await Promise.all(
        this.#nodes.map(async (node) => {
          const connection = node.connection;
          node.connection = undefined;
          await connection?.close({ timeoutMs: 5000 });
        }),
      );
    }
    const report = (what: string, error: unknown) =>
      this.#hub.emit({
        type: "error",
        timestamp: Date.now(),
        poolId: this.id,
        message: `${what}: ${(error as Error)?.message ?? String(error)}`,
        cause: error,
      });
    try {
      await this.#aroundClient?.[Symbol.asyncDispose]();
    } catch (error) {
      report("a plugin's client hook failed on exit", error);
    }
    this.#tasks.close("the pool is shutting down");
    this.#collections.close("the pool is shutting down");
    // Growth stops at the abort; nodes being retired finish (their instances terminated by then).
    await Promise.allSettled([...this.#background]);
    await Promise.all(
      this.#nodes.map(async (node) => {
        const connection = node.connection;
        node.connection = undefined;
        if (!connection?.isOpen) return;
        try {
          connection.send({ t: "release", ttl: this.spec.ttl });
        } catch {
          // lost meanwhile
        }
        await connection.close({ timeoutMs: 5000 });
      }),
    );
    await Promise.all(
      this.#nodes.map(async (node) => {
        const endpoint = node.endpoint;
        node.endpoint = undefined;
        endpoint?.close?.();
      }),
    );
    const provider = this.#provider;
    const cluster = this.#cluster;
    if (provider && cluster && !detached) {
      const deadline = AbortSignal.timeout(this.options.shutdownTimeout * 1000);
      try {
        // Replacements asked for after an interruption notice and not started yet go too.
        const asked = await Promise.all(
          this.#nodes.map((node) =>
            node.nextInstance?.then((instance) => instance.id).catch(() => undefined),
          ),
        );
        await provider.terminate({
          cluster,
          ids: [
            ...this.#nodes.map((node) => node.instance.id),
            ...asked.filter((id): id is string => id !== undefined),
          ],
          signal: deadline,
        });
        for (const node of this.#nodes) {
          this.#hub.emit({
            type: "node.destroyed",
            timestamp: Date.now(),
            poolId: this.id,
            node: node.index,
            instanceId: node.instance.id,
          });
        }
      } catch (error) {
        report("terminating the instances failed", error);
      }
      try {
        await provider.teardown({ cluster, signal: deadline });
      } catch (error) {
        report("tearing down the provider's resources failed", error);
      }
    }
    this.#setState("destroyed");
    if (wasStarted && !detached)
      this.#hub.emit({ type: "pool.destroyed", timestamp: Date.now(), poolId: this.id });
    this.#detachConsole();
    await this.#logFile.close();
    this.#hub.close();
    livePools.delete(this);
    if (livePools.size === 0) removeSignalHandlers();
  }

  // ————————————————————————————————————————————————————————————————— dispatch

  #request(pending: Pending<unknown>, where?: { node: number; worker?: number }): TaskRequest {
    return {
      ref: pending.ref,
      args: pending.args,
      kwargs: pending.kwargs,
      timeout: pending.timeout ?? this.spec.defaultComputeTimeout,
      ...(pending.timeout === undefined ? { defaultTimeout: true } : {}),
      stream: pending.kind === "stream",
      ...(where !== undefined ? { node: where.node } : {}),
      ...(where?.worker !== undefined ? { worker: where.worker } : {}),
      ...(pending.retry?.retries !== undefined ? { retries: pending.retry.retries } : {}),
      ...(pending.kind === "stream" && pending.retry?.restartStream ? { restartStream: true } : {}),
      ...(pending.kind === "task" && pending.keep ? { keep: true } : {}),
    };
  }

  /**
   * Hands a call to the task manager. A kept result (`withKeep()`) is taken in as a remote
   * reference of this pool. Remote references among the arguments: a call with no node of its own
   * runs on a node holding the first one when `affinity` (run, submit), and a reference moves once
   * to a node that does not hold it — brought to the client first, then sent along with the call.
   */
  #dispatch(
    pending: Pending<unknown>,
    where: { node: number; worker?: number } | undefined,
    callbacks: TaskCallbacks,
    affinity: boolean,
  ): TaskTicket {
    const kept: TaskCallbacks =
      pending.kind === "task" && pending.keep
        ? {
            ...callbacks,
            result: (value) => {
              if (value instanceof RemoteRef) this.#refs.adopt(value);
              callbacks.result?.(value);
            },
          }
        : callbacks;
    const refs = remoteRefsIn(pending.args, pending.kwargs);
    if (refs.length === 0) return this.#tasks.submit(this.#request(pending, where), kept);
    const first = this.#refs.check(refs[0]!);
    const target = where ?? (affinity ? { node: Math.min(...first.holders) } : undefined);
    const indices = this.#indices();
    const prepared = this.#refs.prepare(
      refs,
      pending.args,
      pending.kwargs,
      target?.node,
      indices,
      indices.length < this.#bounds.max,
    );
    const send = (call: PreparedCall): TaskTicket =>
      this.#tasks.submit(
        { ...this.#request(pending, target), args: call.args, kwargs: call.kwargs, refs: true },
        { ...kept, ...call.hooks },
      );
    if (prepared.ready) return send(prepared);
    let ticket: TaskTicket | undefined;
    let cancelled: string | undefined;
    const stopped = () =>
      new CancelledError({
        message: `${pending.ref} was cancelled (${cancelled}) while a remote reference it takes moved to its node`,
      });
    prepared.later.then(
      (call) => {
        if (cancelled !== undefined) kept.error(stopped());
        else ticket = send(call);
      },
      (error: Error) => kept.error(cancelled !== undefined ? stopped() : error),
    );
    return {
      get id() {
        return ticket?.id ?? "";
      },
      cancel(reason?: string) {
        if (ticket !== undefined) ticket.cancel(reason);
        else cancelled ??= reason ?? "cancel() was called";
      },
    };
  }

  #resolveTarget(target: RunOptions["target"]): { node: number; worker?: number } | undefined {
    if (target === undefined) return undefined;
    if (target === "head") return { node: 0 };
    const nodes = this.#nodes.length;
    const perNode = this.#workersPerNode;
    const fail = (path: string, message: string) => new ConfigurationError({ issues: [{ path, message }] });
    const index = (value: unknown, below: number) =>
      typeof value === "number" && Number.isInteger(value) && value >= 0 && value < below;
    // Elastic pools can have gaps in their node indices: a node target must name a node the pool has.
    const known = (value: unknown) =>
      typeof value === "number" &&
      (this.#nodes.some((node) => node.index === value) || this.#pending.has(value));
    const indices = this.#nodes.map((node) => node.index).join(", ") || "none now";
    if (typeof target === "number") {
      if (!known(target))
        throw fail(
          "target",
          `expected "head" or the index of one of the pool's nodes (${indices}), received ${String(target)}`,
        );
      return { node: target };
    }
    if (typeof target === "object" && target !== null && "rank" in target) {
      const node = typeof target.rank === "number" ? Math.floor(target.rank / perNode) : Number.NaN;
      if (!index(target.rank, nodes * perNode))
        throw fail(
          "target.rank",
          `expected a global rank from 0 to ${nodes * perNode - 1} (${nodes} nodes × ${perNode} workers), received ${String(target.rank)}`,
        );
      if (!known(node))
        throw fail(
          "target.rank",
          `rank ${String(target.rank)} belongs to node ${node}, which the pool does not have now (its nodes: ${indices})`,
        );
      return { node, worker: (target.rank as number) % perNode };
    }
    if (typeof target === "object" && target !== null && "node" in target) {
      if (!known(target.node))
        throw fail(
          "target.node",
          `expected the index of one of the pool's nodes (${indices}), received ${String(target.node)}`,
        );
      if (target.worker === undefined) return { node: target.node };
      if (!index(target.worker, perNode))
        throw fail(
          "target.worker",
          `expected a worker index from 0 to ${perNode - 1} (workers per node), received ${String(target.worker)}`,
        );
      return { node: target.node, worker: target.worker };
    }
    throw fail(
      "target",
      `expected "head", a node index, { node, worker? } or { rank }, received ${typeof target === "object" ? JSON.stringify(target) : String(target)}`,
    );
  }

  #validate<R>(pending: Pending<R>, value: unknown, taskId: string): R {
    const schema = pending.resultSchema;
    if (!schema) return value as R;
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    throw new SerializationError({
      taskId,
      side: "client",
      message: `The result of ${pending.ref} does not match its schema: ${parsed.error.issues.map((issue) => `${issue.path.join(".") || "(result)"}: ${issue.message}`).join("; ")}`,
    });
  }

  /** Submits one task and returns its handle at once (the `>` operator of the Python project). */
  submit<R>(pending: PendingTask<R>, options: RunOptions = {}): TaskHandle<R> {
    this.#checkOpen();
    const node = this.#resolveTarget(options.target);
    let ticket: TaskTicket | undefined;
    let cancel: () => void = () => {};
    const result = new Promise<R>((resolve, reject) => {
      const { signal } = options;
      if (signal?.aborted) {
        reject(abortError(signal, `${pending.ref}`));
        return;
      }
      const onAbort = () => ticket?.cancel("its signal was aborted");
      const callbacks: TaskCallbacks = {
        result: (value) => {
          signal?.removeEventListener("abort", onAbort);
          try {
            resolve(this.#validate(pending, value, ticket?.id ?? ""));
          } catch (error) {
            reject(error);
          }
        },
        error: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      const made = this.#dispatch(pending, node, callbacks, true);
      ticket = made;
      cancel = () => made.cancel("cancel() was called");
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    return {
      get id() {
        return ticket?.id ?? "";
      },
      result,
      cancel: () => cancel(),
    };
  }

  /**
   * Runs one call: a function's result (`>>` in the Python project), or — for a generator — an
   * async iterable of its items. Round-robin unless `target` pins it.
   */
  run<R>(pending: PendingTask<R>, options?: RunOptions): Promise<R>;
  run<T>(pending: PendingStream<T>, options?: RunOptions): AsyncIterable<T>;
  run<R>(pending: Pending<R>, options: RunOptions = {}): Promise<R> | AsyncIterable<R> {
    if (pending.kind === "stream") return this.#runStream(pending, options);
    try {
      return this.submit(pending, options).result;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #runStream<T>(pending: PendingStream<T>, options: RunOptions): AsyncIterable<T> {
    const pool = this;
    return {
      [Symbol.asyncIterator](): AsyncIterator<T> {
        pool.#checkOpen();
        const node = pool.#resolveTarget(options.target);
        const buffered: T[] = [];
        let finished = false;
        let failure: Error | undefined;
        let wake: (() => void) | undefined;
        const notify = () => {
          wake?.();
          wake = undefined;
        };
        const ticket = pool.#dispatch(
          pending,
          node,
          {
            item: (value) => {
              try {
                buffered.push(pool.#validate(pending, value, ticket.id));
              } catch (error) {
                failure ??= error as Error;
                ticket.cancel("an item did not match its schema");
              }
              notify();
            },
            end: () => {
              finished = true;
              notify();
            },
            error: (error) => {
              failure ??= error;
              finished = true;
              notify();
            },
          },
          true,
        );
        const onAbort = () => ticket.cancel("its signal was aborted");
        options.signal?.addEventListener("abort", onAbort, { once: true });
        const cleanup = () => options.signal?.removeEventListener("abort", onAbort);
        return {
          async next(): Promise<IteratorResult<T>> {
            for (;;) {
              if (buffered.length > 0) return { value: buffered.shift() as T, done: false };
              if (failure) {
                cleanup();
                throw failure;
              }
              if (finished) {
                cleanup();
                return { value: undefined, done: true };
              }
              await new Promise<void>((resolve) => {
                wake = resolve;
              });
            }
          },
          async return(): Promise<IteratorResult<T>> {
            cleanup();
            ticket.cancel("the consumer stopped reading");
            return { value: undefined, done: true };
          },
        };
      },
    };
  }

  /**
   * Runs the call on every worker (`@` in the Python project): once per node when nodes run one
   * worker; once per worker, each pinned to its worker, when they run several (one per accelerator,
   * MIG). Results ordered by node, then by worker on the node (so index = global rank); `places`
   * says where each came from (see {@link BroadcastResults}). Every node of the pool's size counts,
   * those still starting included: a node starting or being replaced is waited for (a replacement up
   * to `provisionTimeout`) and its part runs there, with its rank; if it cannot come, the call fails
   * with a `NodeUnavailableError` naming the node — never with fewer results.
   */
  async broadcast<R>(pending: PendingTask<R>, options: WaitOptions = {}): Promise<BroadcastResults<R>> {
    this.#checkOpen();
    const perNode = this.#workersPerNode;
    const places: WorkerPlace[] = this.#indices().flatMap((index) =>
      Array.from({ length: perNode }, (_, worker) => ({
        node: index,
        worker,
        rank: index * perNode + worker,
      })),
    );
    const handles = places.map((place) =>
      this.submit(pending, {
        ...options,
        target: perNode > 1 ? { node: place.node, worker: place.worker } : place.node,
      }),
    );
    const results = await Promise.all(handles.map((handle) => handle.result)).catch((error) => {
      for (const handle of handles) handle.cancel();
      throw error;
    });
    // Not enumerable: the results stay a plain array to compare and print.
    Object.defineProperty(results, "places", { value: Object.freeze(places), enumerable: false });
    return results as BroadcastResults<R>;
  }

  /** Runs the calls in parallel; their results as a tuple, in order (`&` in the Python project). */
  gather<const T extends readonly PendingTask<unknown>[]>(
    ...tasks: T
  ): Promise<{ -readonly [K in keyof T]: ResultOf<T[K]> }>;
  gather<const T extends readonly PendingTask<unknown>[]>(
    tasks: T,
    options?: WaitOptions,
  ): Promise<{ -readonly [K in keyof T]: ResultOf<T[K]> }>;
  gather(...input: unknown[]): Promise<unknown[]> {
    const [first, second] = input;
    const tasks = (Array.isArray(first) ? first : input) as PendingTask<unknown>[];
    const options = (Array.isArray(first) ? second : undefined) as WaitOptions | undefined;
    this.#checkOpen();
    const handles = tasks.map((task) => this.submit(task, options ?? {}));
    return Promise.all(handles.map((handle) => handle.result)).catch((error) => {
      for (const handle of handles) handle.cancel();
      throw error;
    });
  }

  /** Runs the calls in parallel and yields each result as it is ready: in order (default) or as completed. */
  async *stream<R>(tasks: Iterable<PendingTask<R>>, options: StreamOptions = {}): AsyncGenerator<R> {
    this.#checkOpen();
    const handles = [...tasks].map((task) => this.submit(task, options));
    try {
      if (options.ordered ?? true) {
        for (const handle of handles) yield await handle.result;
        return;
      }
      const pending = new Map(
        handles.map((handle, index) => [index, handle.result.then((value) => ({ index, value }))]),
      );
      while (pending.size > 0) {
        const { index, value } = await Promise.race(pending.values());
        pending.delete(index);
        yield value;
      }
    } finally {
      for (const handle of handles) handle.cancel();
    }
  }

  // Items are typed from `fn` alone (NoInfer): inferring from them too widens `[[{ lr: 0.1 }]]` to
  // `{ lr: number }[][]`, which no longer matches the function's parameter tuple.
  /**
   * Calls `fn` once per item (each item is the call's argument list, optionally ending in
   * `sky.kwargs(…)`) across the pool; results in input order. Items are read lazily, so a large or
   * endless iterable is not queued all at once.
   */
  async map<A extends unknown[], R>(
    fn: PythonFunction<A, R>,
    items: Iterable<NoInfer<MapItem<A>>> | AsyncIterable<NoInfer<MapItem<A>>>,
    options?: WaitOptions,
  ): Promise<R[]>;
  /**
   * Calls a task factory once per item — `sky.shell`, `sky.script`, or a function of your own returning
   * a pending task — each item being its argument list; results in input order.
   */
  async map<A extends unknown[], R>(
    fn: (...args: A) => PendingTask<R>,
    items: Iterable<NoInfer<Readonly<A>>> | AsyncIterable<NoInfer<Readonly<A>>>,
    options?: WaitOptions,
  ): Promise<R[]>;
  async map<A extends unknown[], R>(
    fn: (...args: CallArguments<A>) => PendingTask<R>,
    items: Iterable<NoInfer<MapItem<A>>> | AsyncIterable<NoInfer<MapItem<A>>>,
    options: WaitOptions = {},
  ): Promise<R[]> {
    this.#checkOpen();
    const { signal } = options;
    if (signal?.aborted) throw abortError(signal, "map");
    const results: R[] = [];
    // Only the tickets still running, so that cancelling on failure is cheap and memory stays flat.
    const tickets = new Set<{ cancel(reason?: string): void }>();
    let outstanding = 0;
    let failure: Error | undefined;
    let settle: (() => void) | undefined;
    const onAbort = () => {
      failure ??= abortError(signal as AbortSignal, "map");
      for (const ticket of [...tickets]) ticket.cancel("map was aborted");
      settle?.();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const window = Math.max(64, this.#tasks.capacity * 4);
    let index = 0;
    try {
      for await (const item of items as AsyncIterable<MapItem<A>>) {
        if (failure) break;
        if (!Array.isArray(item)) {
          throw new ConfigurationError({
            issues: [
              {
                path: `items[${index}]`,
                message: "expected the call's arguments as an array, e.g. [[1, 2], [3, 4]]",
              },
            ],
          });
        }
        const position = index;
        index += 1;
        const pending = fn(...(item as CallArguments<A>));
        outstanding += 1;
        let ticket: TaskTicket;
        try {
          ticket = this.#dispatch(
            pending,
            undefined,
            {
              result: (value) => {
                tickets.delete(ticket);
                try {
                  results[position] = this.#validate(pending, value, "");
                } catch (error) {
                  failure ??= error as Error;
                }
                outstanding -= 1;
                if (outstanding === 0 || failure) settle?.();
              },
              error: (error) => {
                tickets.delete(ticket);
                failure ??= error;
                outstanding -= 1;
                settle?.();
              },
            },
            false,
          );
        } catch (error) {
          // A remote reference that cannot be used: the map fails as if that call had.
          outstanding -= 1;
          failure ??= error as Error;
          break;
        }
        tickets.add(ticket);
        await this.#tasks.whenQueueBelow(window);
      }
      if (outstanding > 0 && !failure) {
        await new Promise<void>((resolve) => {
          settle = resolve;
          if (outstanding === 0 || failure) resolve();
        });
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    if (failure) {
      for (const ticket of [...tickets]) ticket.cancel("another item of the map failed");
      throw failure;
    }
    return results;
  }
}

/** Options of {@link compute} itself (the pool's own options go in the input's `options`). */
export interface ComputeOptions {
  /** Aborts provisioning; whatever was started is torn down. */
  readonly signal?: AbortSignal;
  /** Receives every event from the start, including provisioning and bootstrap progress. */
  readonly onEvent?: (event: SkywardEvent) => void;
  /**
   * Whether the pool installs SIGINT/SIGTERM handlers that tear it down and then end the process as
   * the signal means. Default true; set false when the application handles signals itself (a server
   * with its own shutdown), and close the pool there.
   */
  readonly handleSignals?: boolean;
  /** @internal The pool's id, when it picks up a detached pool (`attach`). */
  readonly id?: string;
  /** @internal What its task ids start with: an attached pool's must not clash with those still on its workers. */
  readonly taskIdPrefix?: string;
  /** @internal USD the pool cost before this process picked it up (`attach`): `cost()` goes on from there. */
  readonly carriedCost?: number;
  /** @internal The workers' token, when it picks up a detached pool (`attach`): detached again, it records that one. */
  readonly token?: string;
  /** @internal An attached pool's collections, restored from its state file (`attach`). */
  readonly collections?: CollectionStore;
  /** @internal Its workers are a detached pool's (`attach`): they keep their cluster settings. */
  readonly attached?: boolean;
}

/**
 * Provisions a pool and returns it once ready (its minimum node count up). Use it with `await using`
 * (or call `close()`): the pool is torn down when it goes out of scope, on an exception, and on
 * SIGINT/SIGTERM.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const info = sky.python<[], { node: number }>("tasks:info");
 * await using pool = await sky.compute({ nodes: 4 });
 * const results = await pool.broadcast(info());
 * ```
 */
export async function compute(input: ComputeInput, options: ComputeOptions = {}): Promise<Pool> {
  const resolved = await resolveComputeInput(input);
  const first = resolved.specs[0] as PoolSpec;
  if (options.handleSignals !== undefined && typeof options.handleSignals !== "boolean") {
    throw new ConfigurationError({
      issues: [
        {
          path: "handleSignals",
          message: `expected a boolean, received ${JSON.stringify(options.handleSignals)}`,
        },
      ],
    });
  }
  for (const [index, spec] of resolved.specs.entries()) {
    const path = resolved.specs.length > 1 ? `specs[${index}].nodes.max` : "nodes.max";
    checkNodeCeiling(spec.provider, spec.nodes, path);
    checkVolumeSources(
      spec.provider?.name,
      spec.volumes,
      resolved.specs.length > 1 ? `specs[${index}].volumes` : "volumes",
    );
  }
  const pool = new PoolRuntime(
    first,
    resolved.options,
    options.onEvent,
    options.id,
    options.taskIdPrefix,
    options.carriedCost,
    options.token,
    options.collections,
    options.attached === true,
  );
  if (options.handleSignals !== false) {
    livePools.add(pool);
    installSignalHandlers();
  }
  try {
    await pool.start(resolved.specs, options.signal);
  } catch (error) {
    await pool.close();
    if (SkywardError.isInstance(error)) throw error;
    throw new ProvisionError({
      provider: first.provider?.name ?? "local",
      message: (error as Error).message,
      cause: error,
    });
  }
  return pool;
}

/** Runs `body` with a pool and tears the pool down afterwards, whatever happens. */
export async function withCompute<T>(
  input: ComputeInput,
  body: (pool: Pool) => Promise<T>,
  options: Pick<ComputeOptions, "signal" | "handleSignals" | "onEvent"> = {},
): Promise<T> {
  const pool = await compute(input, options);
  try {
    return await body(pool);
  } finally {
    await pool.close();
  }
}
