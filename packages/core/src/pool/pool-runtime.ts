/**
 * The pool object: it owns the pool's state machine (init → requesting → provisioning → ready →
 * shutting down → destroyed) and wires the parts that do the work: {@link provisionAndStart}, the
 * {@link Membership} of nodes, the dispatch verbs, detach and shutdown. Users see it as a
 * {@link Pool}; nothing here is public by being a member.
 */
import { randomBytes, randomUUID } from "node:crypto";
import {
  type CollectionHost,
  DistributedBarrier,
  DistributedCounter,
  DistributedDict,
  DistributedLock,
  DistributedQueue,
  DistributedSet,
} from "../collections/client.js";
import { checkCollectionsEnabled } from "../collections/operation.js";
import { RemoteCollections } from "../collections/remote.js";
import { enterAroundClient, type PoolHandle } from "../contract/plugin.js";
import type { Provider } from "../contract/provider.js";
import { type BudgetExceededError, CancelledError, TaskDetachedError } from "../errors/errors.js";
import { attachConsole } from "../observe/console.js";
import {
  type DashboardReadyEvent,
  EventHub,
  type EventOf,
  type PoolState,
  type SkywardEvent,
  type SkywardEventType,
} from "../observe/events.js";
import type { LiveConsoleStatus } from "../observe/live-console.js";
import { attachLogFile, type LogFileAttachment } from "../observe/log-file.js";
import { maskEventText, Redactor } from "../observe/redact.js";
import type { RemoteRef } from "../protocol/values.js";
import type { Nodes, NodesInput } from "../spec/nodes.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import { PoolBudget } from "./budget.js";
import { CALL_OPTION_FIELDS, checkCallOptions } from "./call-options.js";
import { CostMeter, type PoolCost } from "./cost.js";
import {
  type DetachHandler,
  DetachTurn,
  detachSnapshot,
  keepItemsBytesOf,
  releaseKeeping,
} from "./detach.js";
import { type DispatchHost, runStream, submitTask } from "./dispatch.js";
import { broadcastTask, gatherTasks, mapTasks, streamTasks } from "./dispatch-verbs.js";
import { Membership } from "./membership.js";
import type {
  BroadcastResults,
  DetachOptions,
  MapItem,
  NodeTraffic,
  Pool,
  PoolNode,
  PoolSettings,
  ResultOf,
  RunOptions,
  StreamOptions,
  TaskHandle,
  WaitOptions,
} from "./pool.js";
import {
  abortError,
  isClosing,
  nodeIndices,
  type PoolContext,
  SINGLE_WORKER,
  setPoolState,
} from "./pool-context.js";
import type { CallArguments, Pending, PendingStream, PendingTask } from "./python-function.js";
import { type RecordedRef, RemoteRefRegistry, type RemoteRefStats } from "./remote-refs.js";
import { resizePool } from "./resize.js";
import { NO_SECRET_VALUES, type SecretValues } from "./secret-values.js";
import { dropConnections, releaseWorkers, shutdownReporter, terminateNodes } from "./shutdown.js";
import { forgetOnSignals } from "./signals.js";
import { provisionAndStart } from "./start.js";
import { type SubtaskRunner, TaskManager } from "./task-manager.js";
import type { WorkerConnection } from "./worker-connection.js";

/** What a pool that picks up a detached pool's workers starts from (see `resumePool`). */
export interface PoolResume {
  /** The detached pool's id. */
  readonly id: string;
  /** What its task ids start with: they must not clash with those still on its workers. */
  readonly taskIdPrefix: string;
  /** USD the pool cost before this process picked it up: `cost()` goes on from there. */
  readonly carriedCost: number;
  /** The workers' token: detached again, the pool records that one. */
  readonly token: string;
  /** Why it cannot start new nodes, when it cannot: a resize above its size is refused with it. */
  readonly growthRefusal?: string | undefined;
}

/** What a resumed pool's picker-up needs of it, beyond {@link Pool}. */
export interface PoolInternals {
  /** Runs the nested tasks of tasks the pool has no record of (those an attach picked up). */
  readonly runSubtask: SubtaskRunner;
  /** Takes in a remote reference a picked-up task returned (as if the pool had run it). */
  readonly adoptRef: (ref: RemoteRef) => void;
  /** Takes in the references the detached pool held (its state file's); returns them. */
  readonly restoreRefs: (recorded: readonly RecordedRef[]) => RemoteRef[];
}

/** How a pool object is made. */
export interface PoolRuntimeSettings {
  /** The first spec: what the pool shows until one is chosen. */
  readonly spec: PoolSpec;
  readonly options: Options;
  readonly onEvent?: ((event: SkywardEvent) => void) | undefined;
  /** Makes the provider of a spec that names none. */
  readonly defaultProvider: () => Provider;
  /** Records the pool on `detach()`. */
  readonly detach: DetachHandler;
  /** Set when the pool picks up a detached pool's workers. */
  readonly resume?: PoolResume | undefined;
  /** The values of the specs' secrets, read at start (none when absent). */
  readonly secrets?: SecretValues | undefined;
  /** Emitted when the pool starts (after the console and the log file are attached). */
  readonly announcement?: PoolAnnouncement | undefined;
}

/** An event a pool emits for its creator when it starts: the dashboard's link. */
export type PoolAnnouncement = Omit<DashboardReadyEvent, "timestamp" | "poolId">;

/**
 * Teaches `redactor` what the pool must never show: the spec's image environment and provider
 * settings, and at start the client's credential-looking environment, the token and the secrets.
 */
function maskPoolSecrets(redactor: Redactor, spec: PoolSpec, token?: string, secrets?: SecretValues): void {
  redactor.addEnvironment(spec.image.env);
  redactor.addSettings(spec.provider);
  if (token === undefined) return;
  redactor.addEnvironment(process.env);
  redactor.add(token);
  for (const value of secrets?.values ?? []) redactor.add(value, 1);
}

/** The pool's implementation; users see it as a {@link Pool}. */
export class PoolRuntime implements Pool {
  readonly id: string;
  readonly options: Options;
  readonly #context: PoolContext;
  readonly #membership: Membership;
  readonly #dispatch: DispatchHost;
  /** Every event's text masked before any observer sees it (the secrets are learned in the constructor). */
  readonly #hub = new EventHub({
    mask: (event) => maskEventText(event, (text) => this.#secrets.redact(text)),
  });
  readonly #tasks: TaskManager;
  readonly #refs: RemoteRefRegistry;
  /** Whether the distributed collections are on (`options.cluster`); the head node holds them. */
  readonly #collectionsEnabled: boolean;
  readonly #onHead = collectionsOnHolder(() => this.#context);
  readonly #detachConsole: () => void;
  /** The secrets the log file masks: credential-looking environment, image env and provider settings, the token. */
  readonly #secrets = new Redactor();
  readonly #logFile: LogFileAttachment;
  readonly #defaultProvider: () => Provider;
  readonly #announcement: PoolAnnouncement | undefined;
  readonly #detachHandler: DetachHandler;
  #closing: Promise<void> | undefined;
  /** A detach under way: a close meanwhile waits for it (and is then its shutdown). */
  readonly #detaching = new DetachTurn();
  #aroundClient: AsyncDisposable | undefined;
  #startedAt = performance.now();
  /** The pool's running cost, kept from its own events and what provisioning tells it (`context.billing`). */
  readonly #cost = new CostMeter();
  /** Once spent, what tasks and calls fail with (undefined only while the constructor runs). */
  readonly #budget: PoolBudget | undefined;

  /** What a resumed pool's picker-up needs of `pool` (a static: no instance member becomes public). */
  static internals(pool: PoolRuntime): PoolInternals {
    return {
      runSubtask: (message, reply) => pool.#tasks.runSubtask(message, null, reply),
      adoptRef: (ref) => pool.#refs.adopt(ref),
      restoreRefs: (recorded) => pool.#refs.restore(recorded),
    };
  }

  constructor(settings: PoolRuntimeSettings) {
    const { spec, options, resume } = settings;
    const id = resume?.id ?? randomUUID().slice(0, 8);
    const token = resume?.token ?? randomBytes(24).toString("hex");
    this.id = id;
    this.options = options;
    this.#defaultProvider = settings.defaultProvider;
    this.#announcement = settings.announcement;
    this.#detachHandler = settings.detach;
    this.#cost.carry(resume?.carriedCost ?? 0);
    if (settings.onEvent) this.#hub.on("*", settings.onEvent);
    this.#collectionsEnabled = options.cluster;
    this.#refs = new RemoteRefRegistry({
      run: (pending, node, signal) => this.run(pending, { target: node, ...(signal ? { signal } : {}) }),
      unref: (node, ids) => {
        // A node gone took what it kept with it.
        this.#context.nodes.find((each) => each.index === node)?.connection?.sendIfOpen({ t: "unref", ids });
      },
      betweenNodes: true,
      notice: (message, node) =>
        this.#hub.emit({ type: "error", timestamp: Date.now(), poolId: id, message, node }),
    });
    this.#tasks = new TaskManager({
      poolId: id,
      hub: this.#hub,
      onQueued: () => this.#membership.onQueued(),
      retryOnInterruption: options.retryOnInterruption,
      // The effective provision timeout (the option, else the provider's capability, else 300): the
      // spec changes with the offer chosen at start, so it is read when a wait begins.
      nodeWaitSeconds: () => this.spec.provisionTimeout,
      ...(resume ? { idPrefix: resume.taskIdPrefix } : {}),
    });
    this.#context = {
      id,
      hub: this.#hub,
      tasks: this.#tasks,
      refs: this.#refs,
      options,
      token,
      abort: new AbortController(),
      nodes: [],
      pending: new Map(),
      spec: Object.freeze({ ...spec, shutdownTimeoutSeconds: options.shutdownTimeout }),
      state: "init",
      provider: undefined,
      cluster: undefined,
      image: undefined,
      headPort: 29500,
      layout: SINGLE_WORKER,
      resumed: resume !== undefined,
      secrets: settings.secrets ?? NO_SECRET_VALUES,
      growthRefusal: resume?.growthRefusal,
      billing: this.#cost.billing(),
    };
    this.#membership = new Membership(this.#context);
    this.#dispatch = {
      context: this.#context,
      checkOpen: () => this.#checkOpen(),
      maxNodes: () => this.#membership.bounds.max,
    };
    this.#detachConsole = attachConsole(this.#hub, options.console, process.stderr, {
      poolId: id,
      status: () => consoleStatus(this.#membership, this.cost()),
    });
    this.#cost.observe(this.#hub);
    this.#budget = new PoolBudget(
      this.#cost,
      options.budget,
      { hub: this.#hub, poolId: id },
      () => !isClosing(this.#context),
      (spent) => {
        this.#context.abort.abort(spent.error());
        this.#tasks.close("the budget is spent", (taskId) => spent.error(taskId) as BudgetExceededError);
        void this.close();
      },
    );
    maskPoolSecrets(this.#secrets, spec, token, this.#context.secrets);
    this.#logFile = attachLogFile(this.#hub, {
      poolId: id,
      logging: options.logging,
      console: options.console,
      redactor: this.#secrets,
    });
  }

  get spec(): PoolSpec & PoolSettings {
    return this.#context.spec;
  }

  get state(): PoolState {
    return this.#context.state;
  }

  cancel(taskId: string): boolean {
    return this.#tasks.cancel(taskId, "cancelled with pool.cancel()");
  }

  currentNodes(): number {
    return this.#tasks.liveNodes;
  }

  nodes(): readonly PoolNode[] {
    return this.#context.nodes.map((node) => ({
      index: node.index,
      instanceId: node.instance.id,
      privateIp: node.instance.privateIp ?? "",
      ready: node.connection?.isOpen === true,
      roundTripMs: node.connection?.isOpen === true ? node.connection.roundTripMs : undefined,
    }));
  }

  workerCount(): number {
    return nodeIndices(this.#context).length * this.#context.layout.workersPerNode;
  }

  refs(): RemoteRefStats {
    return this.#refs.stats();
  }

  fetch<T>(ref: RemoteRef<T>, options: WaitOptions = {}): Promise<T> {
    return ref.fetch(options);
  }

  release(ref: RemoteRef): Promise<void> {
    return ref.release();
  }

  traffic(): readonly NodeTraffic[] {
    return nodeTraffic(this.#context, this.#refs);
  }

  cost(): PoolCost {
    return this.#cost.snapshot();
  }

  events(signal?: AbortSignal): AsyncIterableIterator<SkywardEvent> {
    return this.#hub.events(signal);
  }

  on<T extends SkywardEventType>(type: T, handler: (event: EventOf<T>) => void): () => void;
  on(type: "*", handler: (event: SkywardEvent) => void): () => void;
  on(type: SkywardEventType | "*", handler: (event: never) => void): () => void {
    return this.#hub.on(type as "*", handler as (event: SkywardEvent) => void);
  }

  // ————————————————————————————————————————————————————————————————— distributed collections

  /** The collections' host, once they are found on (`options.cluster`). */
  #collections(): CollectionHost {
    checkCollectionsEnabled(this.#collectionsEnabled);
    return {
      apply: (owner, request) => this.#onHead.apply(owner, request),
      check: () => {
        checkCollectionsEnabled(this.#collectionsEnabled);
        this.#checkOpen();
      },
    };
  }

  dict<V = unknown, K = string>(name: string): DistributedDict<V, K> {
    return new DistributedDict<V, K>(this.#collections(), name);
  }

  set<T = unknown>(name: string): DistributedSet<T> {
    return new DistributedSet<T>(this.#collections(), name);
  }

  counter(name: string): DistributedCounter {
    return new DistributedCounter(this.#collections(), name);
  }

  queue<T = unknown>(name: string): DistributedQueue<T> {
    return new DistributedQueue<T>(this.#collections(), name);
  }

  barrier(name: string, n: number): DistributedBarrier {
    return new DistributedBarrier(this.#collections(), name, n);
  }

  lock(name: string, timeout?: number): DistributedLock {
    return new DistributedLock(this.#collections(), name, timeout);
  }

  #checkOpen(): void {
    const spent = this.#budget?.error();
    if (spent) throw spent;
    const state = this.#context.state;
    if (state !== "ready") {
      throw new CancelledError({
        message: `The pool is ${state.replace("_", " ")}; it runs no more tasks`,
      });
    }
  }

  // ————————————————————————————————————————————————————————————————— lifecycle

  /** Provisions the nodes and connects to them (the pool's factory calls it once). */
  async start(specs: readonly PoolSpec[], signal?: AbortSignal): Promise<void> {
    try {
      const abort = this.#context.abort.signal;
      const combined = signal ? AbortSignal.any([signal, abort]) : abort;
      this.#startedAt = performance.now();
      for (const spec of specs) maskPoolSecrets(this.#secrets, spec);
      if (this.#announcement)
        this.#hub.emit({ ...this.#announcement, timestamp: Date.now(), poolId: this.id });
      setPoolState(this.#context, "requesting");
      const { spec, cluster } = await provisionAndStart(
        this.#context,
        this.#membership,
        specs,
        this.#defaultProvider,
        combined,
      );
      setPoolState(this.#context, "ready");
      this.#membership.startLoops(this.#startedAt);
      this.#hub.emit({
        type: "pool.ready",
        timestamp: Date.now(),
        poolId: this.id,
        nodes: this.#tasks.liveNodes,
        durationMs: performance.now() - this.#startedAt,
      });
      const handle = { id: this.id, spec: this.spec, currentNodes: () => this.currentNodes() } as PoolHandle;
      this.#aroundClient = await enterAroundClient(spec.plugins, handle, cluster);
      // Closed while they were entered (a signal, the budget): the shutdown may have passed them.
      if (isClosing(this.#context)) {
        await this.#aroundClient[Symbol.asyncDispose]();
        throw abortError(this.#context.abort.signal, "Starting the pool");
      }
    } catch (error) {
      // A budget spent while starting aborts whatever was under way: report the budget.
      throw this.#budget?.error() ?? error;
    }
  }

  async resize(target: number | NodesInput | Nodes, options: WaitOptions = {}): Promise<void> {
    this.#checkOpen();
    await resizePool(this.#context, this.#membership, target, options.signal);
  }

  close(): Promise<void> {
    // Closed during a detach (a signal, a session, the budget): the detach goes first (a pool
    // detached is closed already; one that could not be is closed then).
    const detaching = this.#detaching.underway;
    if (detaching && !this.#closing) return detaching.then(() => this.close());
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async detach(options: DetachOptions = {}): Promise<string> {
    const keepItemsBytes = keepItemsBytesOf(options);
    if (this.#closing) throw new Error(`pool ${this.id} is already closed or detached`);
    if (this.#detaching.underway) throw new Error(`pool ${this.id} is being detached already`);
    const state = this.#context.state;
    if (state !== "ready") throw new Error(`pool ${this.id} can be detached once ready (it is ${state})`);
    return this.#detaching.run(this.id, () => this.#detach(keepItemsBytes));
  }

  async #detach(keepItemsBytes: number): Promise<string> {
    const snapshot = detachSnapshot(this.#context, this.#cost);
    await this.#detachHandler.detach(snapshot, () =>
      releaseKeeping(this.#context, keepItemsBytes, snapshot.budgetSeconds),
    );
    this.#closing = this.#shutdown(true);
    await this.#closing;
    await this.#detachHandler.detached?.(this.id);
    return this.id;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Tears the pool down; `detached`: only this process's side (the workers were released with `keep`). */
  async #shutdown(detached = false): Promise<void> {
    const context = this.#context;
    const wasStarted = context.state !== "init";
    this.#refs.closeAll();
    setPoolState(context, "shutting_down");
    this.#budget?.stop();
    context.abort.abort(new CancelledError({ message: "The pool is shutting down" }));
    await context.provisioning; // closed while starting: what it provisioned goes first
    await this.#membership.stop();
    // No `cancel` may reach a detached pool's workers: connections go first, then the waiting callers.
    if (detached) await dropConnections(context);
    const report = shutdownReporter(context);
    try {
      await this.#aroundClient?.[Symbol.asyncDispose]();
    } catch (error) {
      report("a plugin's client hook failed on exit", error);
    }
    // A detached pool's tasks on workers go on there: their callers are told so, truly.
    this.#tasks.close(
      detached ? "the pool was detached" : "the pool is shutting down",
      (taskId, ref, running) =>
        detached && running ? new TaskDetachedError({ taskId, ref, poolId: this.id }) : undefined,
    );
    this.#onHead.close(detached ? "the pool was detached" : "the pool is shutting down");
    await this.#membership.settled();
    await releaseWorkers(context);
    if (!detached) await terminateNodes(context, report);
    setPoolState(context, "destroyed");
    if (wasStarted && !detached)
      this.#hub.emit({ type: "pool.destroyed", timestamp: Date.now(), poolId: this.id });
    this.#detachConsole();
    await this.#logFile.close();
    this.#hub.close();
    forgetOnSignals(this);
  }

  // ————————————————————————————————————————————————————————————————— dispatch

  submit<R>(pending: PendingTask<R>, options: RunOptions = {}): TaskHandle<R> {
    checkCallOptions(options, CALL_OPTION_FIELDS.run);
    return submitTask(this.#dispatch, pending, options);
  }

  run<R>(pending: PendingTask<R>, options?: RunOptions): Promise<R>;
  run<T>(pending: PendingStream<T>, options?: RunOptions): AsyncIterable<T>;
  run<R>(pending: Pending<R>, options: RunOptions = {}): Promise<R> | AsyncIterable<R> {
    if (pending.kind === "stream") return runStream(this.#dispatch, pending, options);
    try {
      return this.submit(pending, options).result;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  broadcast<R>(pending: PendingTask<R>, options: WaitOptions = {}): Promise<BroadcastResults<R>> {
    return broadcastTask(this.#dispatch, pending, options);
  }

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
    return gatherTasks(this.#dispatch, tasks, options ?? {});
  }

  stream<R>(tasks: Iterable<PendingTask<R>>, options: StreamOptions = {}): AsyncGenerator<R> {
    return streamTasks(this.#dispatch, tasks, options);
  }

  map<A extends unknown[], R>(
    fn: (...args: CallArguments<A>) => PendingTask<R>,
    items: Iterable<NoInfer<MapItem<A>>> | AsyncIterable<NoInfer<MapItem<A>>>,
    options: WaitOptions = {},
  ): Promise<R[]> {
    return mapTasks(this.#dispatch, fn, items, options);
  }
}

/** What the live console shows besides events: the size bounds and the pool's cost. */
function consoleStatus(membership: Membership, cost: PoolCost): LiveConsoleStatus {
  const { min, max } = membership.bounds;
  return {
    nodes: { min, max, desired: membership.desired },
    cost: { hourlyRate: cost.hourlyRate, total: cost.total },
  };
}

/** `pool.traffic()`: each connected node's bytes through the client, and node to node for references. */
function nodeTraffic(context: PoolContext, refs: RemoteRefRegistry): NodeTraffic[] {
  return context.nodes.flatMap((node) =>
    node.connection === undefined
      ? []
      : [
          {
            node: node.index,
            sent: node.connection.bytesSent,
            received: node.connection.bytesReceived,
            ...refs.peerBytes(node.index),
          },
        ],
  );
}

/** The client's way to the collections: on the node holding them, while one does. */
function collectionsOnHolder(context: () => PoolContext): RemoteCollections {
  return new RemoteCollections(
    () => headConnection(context()),
    () => context().collectionsUnavailable,
  );
}

/** The connection to the node that holds the distributed collections (the head, or its promoted replica). */
function headConnection(context: PoolContext): WorkerConnection | undefined {
  return context.nodes.find((node) => node.index === (context.collectionsNode ?? 0))?.connection;
}
