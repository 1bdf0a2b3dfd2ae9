/**
 * What a pool reports while it lives: one discriminated union of plain, JSON-friendly events
 * (discriminated on `type`), and {@link EventHub}, the small typed hub the pool publishes them on.
 * Events never carry secrets (keys, tokens).
 */

/** A pool's lifecycle states, in the order it moves through them. */
export type PoolState = "init" | "requesting" | "provisioning" | "ready" | "shutting_down" | "destroyed";

/** The pool states, in lifecycle order. */
export const POOL_STATES: readonly PoolState[] = Object.freeze([
  "init",
  "requesting",
  "provisioning",
  "ready",
  "shutting_down",
  "destroyed",
]);

/** Fields every event has. */
export interface EventBase {
  /** When it happened, milliseconds since the epoch. */
  readonly timestamp: number;
  /** The pool it concerns. */
  readonly poolId: string;
}

/** The pool moved to another state. */
export interface PoolStateEvent extends EventBase {
  readonly type: "pool.state";
  /** The new state. */
  readonly state: PoolState;
  /** The state before, or null for the first one. */
  readonly previous: PoolState | null;
}

/** The pool is usable: its minimum number of nodes is ready. */
export interface PoolReadyEvent extends EventBase {
  readonly type: "pool.ready";
  /** Nodes ready now. */
  readonly nodes: number;
  /** Milliseconds from the start of provisioning. */
  readonly durationMs: number;
}

/** The pool is gone: instances terminated and provider resources torn down. */
export interface PoolDestroyedEvent extends EventBase {
  readonly type: "pool.destroyed";
}

/** The pool's dashboard (`options.dashboard`) is up: its link, token included, for the console and the log. */
export interface DashboardReadyEvent extends EventBase {
  readonly type: "dashboard.ready";
  /** The page's URL (`http://127.0.0.1:PORT/?token=…`). */
  readonly url: string;
}

/**
 * The provider says how getting instances goes while the pool waits for them: a scheduler's job
 * pending in its queue (why, and its place in line). Sent when what it says changes.
 */
export interface ProvisionProgressEvent extends EventBase {
  readonly type: "provision.progress";
  /** The provider's name. */
  readonly provider: string;
  /** The instance it concerns, when it is about one the pool already has. */
  readonly instanceId?: string;
  /** The step (`queue`, …). */
  readonly phase: string;
  /** Where it is. */
  readonly status: "started" | "finished" | "failed";
  /** What the provider says (`pending (Priority), 2nd in partition main's queue`); never a secret. */
  readonly detail?: string;
}

/** Events about the pool as a whole. */
export type PoolEvent =
  | PoolStateEvent
  | PoolReadyEvent
  | PoolDestroyedEvent
  | DashboardReadyEvent
  | ProvisionProgressEvent;

/** Fields every node event has. */
export interface NodeEventBase extends EventBase {
  /** The node's index in the pool; 0 is the head. */
  readonly node: number;
  /** The provider's id for the node's instance. */
  readonly instanceId: string;
}

/** A provider created the node's instance. */
export interface NodeProvisionedEvent extends NodeEventBase {
  readonly type: "node.provisioned";
  /** The provider's name. */
  readonly provider: string;
  /** The provider's machine type. */
  readonly instanceType: string;
  /** True for spot capacity. */
  readonly spot: boolean;
  /** The offer's region, when known. */
  readonly region?: string;
  /** The offer's accelerators (`"4x A100"`, `"8x H100 SXM"` when the provider says the form factor), or null for none; absent when unknown. */
  readonly accelerator?: string | null;
  /**
   * The form factor the spec asked for (`"SXM"`) when the offer does not say its own — the
   * provider's data cannot tell form factors apart, so it was kept but not checked; absent otherwise.
   */
  readonly unverifiedFormFactor?: string;
  /** USD per hour, when known. */
  readonly hourlyPrice: number | null;
  /** Its addresses, when known. */
  readonly publicIp: string | null;
  /** Its private address, when known. */
  readonly privateIp: string | null;
}

/** The node's bootstrap script finished. */
export interface NodeBootstrappedEvent extends NodeEventBase {
  readonly type: "node.bootstrapped";
  /** How long the bootstrap took, milliseconds. */
  readonly durationMs: number;
  /**
   * The round trip from the client to the node's worker, milliseconds, measured by the handshake:
   * how far the node is (the schedule keeps enough tasks in flight to cover it).
   */
  readonly roundTripMs: number;
}

/** The node's worker is up and connected: it takes tasks. */
export interface NodeReadyEvent extends NodeEventBase {
  readonly type: "node.ready";
}

/** The provider reclaimed the node's (spot) instance. */
export interface NodePreemptedEvent extends NodeEventBase {
  readonly type: "node.preempted";
  /** What the provider said, when anything. */
  readonly reason?: string;
}

/** A lost or preempted node got a new instance, and its worker is up. */
export interface NodeReplacedEvent extends NodeEventBase {
  readonly type: "node.replaced";
  /** The instance it replaced. */
  readonly previousInstanceId: string;
}

/**
 * The node's instance was terminated (shutdown, scale-down, a lost node's instance before its
 * replacement, whose new instance has its own `node.provisioned`).
 */
export interface NodeDestroyedEvent extends NodeEventBase {
  readonly type: "node.destroyed";
}

/** The connection to the node's worker was lost and did not come back. */
export interface NodeLostEvent extends NodeEventBase {
  readonly type: "node.lost";
  /** Why it is considered lost. */
  readonly reason: string;
}

/** Events about one node. */
export type NodeEvent =
  | NodeProvisionedEvent
  | NodeBootstrappedEvent
  | NodeReadyEvent
  | NodePreemptedEvent
  | NodeReplacedEvent
  | NodeDestroyedEvent
  | NodeLostEvent;

/** A bootstrap phase (`apt`, `python`, `pip`, `includes`, a plugin's ops…) started, finished or failed on a node. */
export interface BootstrapPhaseEvent extends EventBase {
  readonly type: "bootstrap.phase";
  /** The node's index. */
  readonly node: number;
  /** The phase's name. */
  readonly phase: string;
  /** Where it is. */
  readonly status: "started" | "finished" | "failed";
  /** How long it took, milliseconds; set when `status` is `finished` or `failed`. */
  readonly durationMs?: number;
}

/** Fields every task event has. */
export interface TaskEventBase extends EventBase {
  /** The task's id. */
  readonly taskId: string;
  /** What it runs: the callable's `module:qualname`, or a shell command/script label. */
  readonly name: string;
}

/** A task was submitted and waits for a slot. */
export interface TaskQueuedEvent extends TaskEventBase {
  readonly type: "task.queued";
}

/** A task started on a node. */
export interface TaskStartedEvent extends TaskEventBase {
  readonly type: "task.started";
  /** The node it runs on. */
  readonly node: number;
  /** Which attempt this is, from 1 (retries after preemption count up). */
  readonly attempt: number;
}

/** A task returned. */
export interface TaskCompletedEvent extends TaskEventBase {
  readonly type: "task.completed";
  /** The node it ran on. */
  readonly node: number;
  /** How long it ran, milliseconds. */
  readonly durationMs: number;
}

/** A task failed: it raised, timed out, or its node was lost with no retry left. */
export interface TaskFailedEvent extends TaskEventBase {
  readonly type: "task.failed";
  /** The node it ran on, or null when it never started. */
  readonly node: number | null;
  /** How long it ran, milliseconds, when it started. */
  readonly durationMs?: number;
  /** The error's type (`ValueError`, `TaskTimeoutError`…) and message. */
  readonly error: { readonly type: string; readonly message: string };
  /** True when it will be tried again (e.g. after a preemption). */
  readonly willRetry: boolean;
}

/** A task was cancelled (an abort signal, or the pool shutting down). */
export interface TaskCancelledEvent extends TaskEventBase {
  readonly type: "task.cancelled";
  /** The node it ran on, or null when it never started. */
  readonly node: number | null;
}

/** Events about one task. */
export type TaskEvent =
  | TaskQueuedEvent
  | TaskStartedEvent
  | TaskCompletedEvent
  | TaskFailedEvent
  | TaskCancelledEvent;

/** One telemetry sample from a node (CPU, memory, GPU, disk, network, custom). */
export interface MetricEvent extends EventBase {
  readonly type: "metric";
  /** The node sampled. */
  readonly node: number;
  /** The metric's name: a collector's (`cpu`, `memory`, `gpu`, `gpu_memory`, `disk`, …) or a custom one's. */
  readonly name: string;
  /** Its value. */
  readonly value: number;
  /** Its unit (`%`, `B`, `B/s`, `°C`), when it has one; custom metrics have none. */
  readonly unit?: string;
  /** The GPU's index on the node, for the per-GPU metrics (`gpu`, `gpu_memory`, `gpu_memory_total`, `gpu_temp`). */
  readonly gpu?: number;
  /** The worker on the node, for a value a task reported (`skyward.report_metric`). */
  readonly worker?: number;
  /** The task that reported it, for a value a task reported. */
  readonly taskId?: string;
  /** The step it belongs to (a training step), when the task gave one. */
  readonly step?: number;
}

/** One line a task or worker wrote to stdout or stderr. */
export interface LogEvent extends EventBase {
  readonly type: "log";
  /** The node it came from. */
  readonly node: number;
  /** The worker (slot or process) on that node. */
  readonly worker: number;
  /** Which stream. */
  readonly stream: "stdout" | "stderr";
  /** The line, without its line break. */
  readonly line: string;
  /** The task that wrote it, when known. */
  readonly taskId?: string;
}

/** Something went wrong that the pool reports but that did not (yet) end it. */
export interface ErrorOccurredEvent extends EventBase {
  readonly type: "error";
  /** What went wrong. */
  readonly message: string;
  /** The node concerned, when one is. */
  readonly node?: number;
  /**
   * The underlying error, when there is one: the object itself, as the call that failed rejected
   * with it, so its fields are NOT masked; `message` is (the console, the log file and the dashboard
   * print `message`, never the cause).
   */
  readonly cause?: unknown;
}

/** The pool is growing or shrinking. */
export interface ScalingEvent extends EventBase {
  readonly type: "scaling";
  /** Node count before. */
  readonly from: number;
  /** Node count aimed at. */
  readonly to: number;
  /** Why (`pending tasks`, `idle`, `resize()`, `replacing lost node`). */
  readonly reason: string;
}

/** The pool's cost reached the warning amount of its `options.budget` (once per pool). */
export interface BudgetWarningEvent extends EventBase {
  readonly type: "budget.warning";
  /** What the pool has cost so far, USD. */
  readonly total: number;
  /** The budget's maximum, USD. */
  readonly budget: number;
  /** The warning amount, USD. */
  readonly warnAt: number;
  /** What the pool costs now, USD per hour. */
  readonly hourlyRate: number;
}

/** The pool's cost reached its `options.budget`: it stops taking tasks and tears down. */
export interface BudgetExceededEvent extends EventBase {
  readonly type: "budget.exceeded";
  /** What the pool has cost so far, USD. */
  readonly total: number;
  /** The budget's maximum, USD. */
  readonly budget: number;
  /** What the pool cost when it was stopped, USD per hour. */
  readonly hourlyRate: number;
}

/** Events about the pool's spending. */
export type BudgetEvent = BudgetWarningEvent | BudgetExceededEvent;

/** Every event a pool emits, discriminated on `type`. */
export type SkywardEvent =
  | PoolEvent
  | NodeEvent
  | BootstrapPhaseEvent
  | TaskEvent
  | MetricEvent
  | LogEvent
  | ErrorOccurredEvent
  | ScalingEvent
  | BudgetEvent;

/** The `type` of any event. */
export type SkywardEventType = SkywardEvent["type"];

/** The event with the given `type`: `EventOf<"node.ready">` is {@link NodeReadyEvent}. */
export type EventOf<T extends SkywardEventType> = Extract<SkywardEvent, { type: T }>;

/** A handler for events of type `T` (or all events). */
export type EventHandler<T extends SkywardEventType = SkywardEventType> = (event: EventOf<T>) => void;

/** Options for an {@link EventHub}. */
export interface EventHubOptions {
  /**
   * Called when a handler throws; the other handlers still run. Default: a process warning, so a
   * faulty observer never breaks the pool.
   */
  onHandlerError?: (error: unknown, event: SkywardEvent) => void;
  /**
   * What every event becomes before any handler or iterator sees it: the pool masks its secrets
   * in the text events carry (a provider's or an error's words), so that no observer — the console,
   * the dashboard, the user's own handler — is handed one.
   */
  mask?: (event: SkywardEvent) => SkywardEvent;
}

interface Subscriber {
  push(event: SkywardEvent): void;
  end(): void;
}

function warnHandlerError(error: unknown, event: SkywardEvent): void {
  const detail = error instanceof Error ? error.message : String(error);
  process.emitWarning(`a handler of "${event.type}" events threw: ${detail}`, {
    type: "SkywardEventHandlerWarning",
  });
}

/**
 * A typed publish/subscribe hub for {@link SkywardEvent}s. Handlers run synchronously, in the order
 * they subscribed; every handler and every iterator sees events in the order they were emitted, even
 * when a handler emits in turn (such events are delivered after the current one).
 */
export class EventHub {
  readonly #handlers = new Set<{ readonly type: string; readonly handler: (event: SkywardEvent) => void }>();
  readonly #subscribers = new Set<Subscriber>();
  readonly #queue: SkywardEvent[] = [];
  readonly #onHandlerError: (error: unknown, event: SkywardEvent) => void;
  readonly #mask: ((event: SkywardEvent) => SkywardEvent) | undefined;
  #dispatching = false;
  #closed = false;

  constructor(options: EventHubOptions = {}) {
    this.#onHandlerError = options.onHandlerError ?? warnHandlerError;
    this.#mask = options.mask;
  }

  /** True once {@link EventHub.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** True when some handler or iterator receives events of `type`: publishers may skip building them otherwise. */
  listensTo(type: SkywardEventType): boolean {
    if (this.#subscribers.size > 0) return true;
    for (const entry of this.#handlers) if (entry.type === type || entry.type === "*") return true;
    return false;
  }

  /** Publishes an event to every handler and iterator. Ignored once the hub is closed. */
  emit(event: SkywardEvent): void {
    if (this.#closed) return;
    this.#queue.push(this.#mask ? this.#mask(event) : event);
    if (this.#dispatching) return;
    this.#dispatching = true;
    try {
      for (let next = this.#queue.shift(); next !== undefined; next = this.#queue.shift()) {
        this.#deliver(next);
      }
    } finally {
      this.#dispatching = false;
    }
  }

  #deliver(event: SkywardEvent): void {
    for (const subscriber of this.#subscribers) subscriber.push(event);
    // A snapshot: handlers added or removed by a handler take effect from the next event.
    for (const { type, handler } of [...this.#handlers]) {
      if (type !== "*" && type !== event.type) continue;
      try {
        handler(event);
      } catch (error) {
        this.#onHandlerError(error, event);
      }
    }
  }

  /**
   * Calls `handler` for every event of `type` (or every event, for `"*"`) from now on. Returns a
   * function that unsubscribes it. After {@link EventHub.close} it does nothing.
   */
  on<T extends SkywardEventType>(type: T, handler: (event: EventOf<T>) => void): () => void;
  on(type: "*", handler: (event: SkywardEvent) => void): () => void;
  on(type: SkywardEventType | "*", handler: (event: never) => void): () => void {
    if (this.#closed) return () => {};
    // A fresh entry, so the same function can subscribe twice and unsubscribe each time independently.
    const entry = { type, handler: handler as (event: SkywardEvent) => void };
    this.#handlers.add(entry);
    return () => {
      this.#handlers.delete(entry);
    };
  }

  /**
   * Every event emitted from this call on, as an async iterable (buffered: nothing is missed while
   * the consumer is busy). It ends when the hub is closed — after delivering what was buffered — or
   * as soon as `signal` aborts (dropping what was not read yet), or when the loop breaks out.
   */
  events(signal?: AbortSignal): AsyncIterableIterator<SkywardEvent> {
    const buffer: SkywardEvent[] = [];
    const waiting: ((result: IteratorResult<SkywardEvent, undefined>) => void)[] = [];
    let ended = false;
    const done = (): IteratorResult<SkywardEvent, undefined> => ({ done: true, value: undefined });

    const finish = (dropBuffered: boolean) => {
      if (dropBuffered) buffer.length = 0;
      if (ended) return;
      ended = true;
      this.#subscribers.delete(subscriber);
      signal?.removeEventListener("abort", onAbort);
      for (const resolve of waiting.splice(0)) resolve(done());
    };
    const onAbort = () => finish(true);
    const subscriber: Subscriber = {
      push(event) {
        const resolve = waiting.shift();
        if (resolve) resolve({ done: false, value: event });
        else buffer.push(event);
      },
      end: () => finish(false),
    };

    if (this.#closed || signal?.aborted) ended = true;
    else {
      this.#subscribers.add(subscriber);
      signal?.addEventListener("abort", onAbort, { once: true });
    }

    const iterator: AsyncIterableIterator<SkywardEvent> = {
      next: () => {
        const event = buffer.shift();
        if (event !== undefined) return Promise.resolve({ done: false, value: event });
        if (ended) return Promise.resolve(done());
        return new Promise((resolve) => waiting.push(resolve));
      },
      return: () => {
        finish(true);
        return Promise.resolve(done());
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** Closes the hub: handlers are dropped, iterators end after their buffered events, emits are ignored. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#handlers.clear();
    for (const subscriber of [...this.#subscribers]) subscriber.end();
    this.#queue.length = 0;
  }
}
