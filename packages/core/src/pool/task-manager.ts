/**
 * Dispatch: which node runs each task. Every node has `concurrency + buffer` slots; tasks wait in a
 * queue until a slot is free and go round-robin across nodes (or to the node they are pinned to).
 * Results, stream items, input-stream pulls, output and errors come back per task id.
 */

import { COLLECTION_REF, type CollectionStore } from "../collections/store.js";
import {
  CancelledError,
  ConnectionError,
  FunctionNotFoundError,
  NodeUnavailableError,
  RemoteTaskError,
  SerializationError,
  SkywardError,
  TaskTimeoutError,
  WorkerDiedError,
} from "../errors/errors.js";
import type { EventHub } from "../observe/events.js";
import {
  type InputStream,
  markInputStreams,
  type TaskMessage,
  type WireValue,
  type WorkerEvent,
} from "../protocol/protocol.js";
import { commandFailedError } from "./commands.js";
import { AdaptiveSchedule, PREFETCH_BUDGET_MS } from "./schedule.js";
import { decideRetry, type InterruptedTask, interruptedError } from "./task-retry.js";
import type { WorkerConnection } from "./worker-connection.js";

/** How a task ends, told to whoever submitted it. */
export interface TaskCallbacks {
  /** The function returned (not for streams). */
  readonly result?: (value: unknown) => void;
  /** A generator yielded. */
  readonly item?: (value: unknown) => void;
  /** A generator finished. */
  readonly end?: () => void;
  /** The task failed, timed out or was cancelled. */
  readonly error: (error: Error) => void;
  /** Its `submit` is about to be written to this node's connection (once per run). */
  readonly sending?: (node: number) => void;
  /** Its `submit` was written to this node's connection (once per run). */
  readonly sent?: (node: number) => void;
}

/** A task to dispatch. */
export interface TaskRequest {
  readonly ref: string;
  readonly args: readonly unknown[];
  readonly kwargs: Readonly<Record<string, unknown>>;
  /** Seconds, or null for none. */
  readonly timeout: number | null;
  readonly stream: boolean;
  /** Pin to this node index. */
  readonly node?: number;
  /** With `node`: pin to this worker of the node (its local rank). */
  readonly worker?: number;
  /** A subtask of a running task (nested dispatch): it uses the nodes' separate nested slots. */
  readonly nested?: boolean;
  /** How many times it may run again when its node is lost; default the manager's `retryOnInterruption`. */
  readonly retries?: number;
  /** A stream that yielded items may start over when its node is lost (the items delivered are skipped). */
  readonly restartStream?: boolean;
  /** `timeout` is the pool's default: a `@sky.function(timeout=…)` on the worker replaces it. */
  readonly defaultTimeout?: boolean;
  /** The result stays on the node; the task resolves to a `RemoteRef`. */
  readonly keep?: boolean;
  /** The arguments hold remote references. */
  readonly refs?: boolean;
}

/** A dispatched task, as its submitter holds it. */
export interface TaskTicket {
  readonly id: string;
  /** Cancels it: dropped if queued, cancelled on the worker if running. Idempotent. */
  cancel(reason?: string): void;
}

interface TaskRecord extends TaskTicket {
  readonly request: TaskRequest;
  readonly callbacks: TaskCallbacks;
  node: NodeState | undefined;
  startedAt: number;
  /** When it got a worker slot, as far as the client can tell (later than `startedAt` if it waited). */
  begunAt: number;
  done: boolean;
  streams: InputStream[];
  pumps: Map<number, InputPump>;
  /** Subtasks it started (nested dispatch), cancelled when it ends. */
  children: Map<number, TaskTicket> | undefined;
  /** Which run this is, from 1; messages of an earlier run (a node since lost) are dropped. */
  attempt: number;
  /**
   * The id its current run goes by on the wire: the task id for the first run, `<id>.<attempt>` for
   * later ones, so that a worker still holding an earlier run (one the pool reattached to) never
   * takes the new run for it.
   */
  wireId: string;
  /** Runs cut short by the loss of their node (those withdrawn before they started do not count). */
  interruptions: number;
  /** Stream items delivered to the submitter. */
  itemsDelivered: number;
  /** Items of a restarted stream still to skip (delivered by an earlier run). */
  skipItems: number;
  /** When it started waiting for a slot (performance.now()). */
  queuedAt: number;
}

interface NodeState {
  readonly index: number;
  connection: WorkerConnection | undefined;
  capacity: number;
  /** With an adaptive buffer (`"auto"`), its slot count follows the tasks' durations; `capacity` otherwise. */
  adaptive: boolean;
  /** When its last task ended (or it joined), and when its last result came: `performance.now()`. */
  idleSince: number;
  lastDone: number;
  readonly running: Map<string, TaskRecord>;
  readonly pinned: TaskRecord[];
  /** Nested tasks running on it, and how many it may run (its concurrency). */
  nestedRunning: number;
  nestedCapacity: number;
  /** Lost for good (its replacement failed): tasks pinned to it fail. */
  abandoned: boolean;
  /** Going away (an interruption notice): it takes no new tasks. */
  draining: boolean;
  /** Called once nothing runs on it any more. */
  idleWaiters: (() => void)[];
  /**
   * Whether tasks pinned to it wait at most `nodeWaitSeconds` while it has no worker: it was lost, or
   * failed to start and another is coming (false: it is starting for the first time; if that fails,
   * they fail with it).
   */
  bounded: boolean;
}

/** A simple array-backed FIFO with O(1) amortised shift. */
class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head += 1;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  drain(): T[] {
    const rest = this.#items.slice(this.#head) as T[];
    this.#items = [];
    this.#head = 0;
    return rest;
  }
}

/** Reads an input stream's source as the worker grants credit. */
class InputPump {
  readonly #iterator: AsyncIterator<unknown> | Iterator<unknown>;
  readonly #send: (
    message: { t: "in"; value: unknown } | { t: "in_end" } | { t: "in_error"; message: string },
  ) => void;
  #credit = 0;
  #running = false;
  #finished = false;

  constructor(
    source: AsyncIterable<unknown> | Iterable<unknown>,
    send: (
      message: { t: "in"; value: unknown } | { t: "in_end" } | { t: "in_error"; message: string },
    ) => void,
  ) {
    this.#send = send;
    this.#iterator =
      Symbol.asyncIterator in source
        ? (source as AsyncIterable<unknown>)[Symbol.asyncIterator]()
        : (source as Iterable<unknown>)[Symbol.iterator]();
  }

  grant(n: number): void {
    this.#credit += n;
    if (!this.#running) void this.#run();
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (this.#credit > 0 && !this.#finished) {
        let next: IteratorResult<unknown>;
        try {
          next = await this.#iterator.next();
        } catch (error) {
          this.#finished = true;
          this.#send({ t: "in_error", message: error instanceof Error ? error.message : String(error) });
          return;
        }
        if (next.done) {
          this.#finished = true;
          this.#send({ t: "in_end" });
          return;
        }
        this.#credit -= 1;
        this.#send({ t: "in", value: next.value });
      }
    } finally {
      this.#running = false;
    }
  }

  close(): void {
    if (this.#finished) return;
    this.#finished = true;
    void this.#iterator.return?.();
  }
}

/** Options of a {@link TaskManager}. */
export interface TaskManagerOptions {
  readonly poolId: string;
  readonly hub: EventHub;
  /** Extra seconds past a task's timeout before the client gives up on hearing from the worker. */
  readonly timeoutGraceSeconds?: number;
  /** Called when a submitted task has to wait for a slot (queued-task pressure, for the autoscaler). */
  readonly onQueued?: () => void;
  /** How many times a task whose node is lost runs again, unless it says otherwise. Default 3. */
  readonly retryOnInterruption?: number;
  /**
   * Seconds a task pinned to a lost node waits for its replacement before failing (a function: read
   * when the wait is checked). Default 300.
   */
  readonly nodeWaitSeconds?: number | (() => number);
  /** Answers tasks' collection operations (subtasks of `COLLECTION_REF`) and hears when tasks end. */
  readonly collections?: CollectionStore;
  /** What task ids start with (`t1`, `t2`…); an attached pool's differ from those it was detached with. */
  readonly idPrefix?: string;
}

/** Dispatches tasks over the pool's node connections. */
export class TaskManager {
  readonly #nodes: NodeState[] = [];
  readonly #queue = new Fifo<TaskRecord>();
  /** Tasks whose node was lost, run again before the queue. */
  readonly #retryQueue = new Fifo<TaskRecord>();
  readonly #nestedQueue = new Fifo<TaskRecord>();
  readonly #hub: EventHub;
  readonly #poolId: string;
  readonly #grace: number;
  readonly #onQueued: (() => void) | undefined;
  readonly #collections: CollectionStore | undefined;
  readonly #idPrefix: string;
  readonly #schedule = new AdaptiveSchedule();
  readonly #retries: number;
  readonly #nodeWaitSeconds: () => number;
  readonly #capacityWaiters: (() => void)[] = [];
  #nextId = 0;
  #roundRobin = 0;
  #closed = false;
  #wake: ReturnType<typeof setTimeout> | undefined;
  readonly #sweeper: ReturnType<typeof setInterval>;
  /** Partial output lines, per node/worker/stream. */
  readonly #partialLines = new Map<string, string>();

  constructor(options: TaskManagerOptions) {
    this.#idPrefix = options.idPrefix ?? "t";
    this.#hub = options.hub;
    this.#poolId = options.poolId;
    this.#grace = options.timeoutGraceSeconds ?? 10;
    this.#onQueued = options.onQueued;
    this.#retries = options.retryOnInterruption ?? 3;
    const wait = options.nodeWaitSeconds ?? 300;
    this.#nodeWaitSeconds = typeof wait === "function" ? wait : () => wait;
    this.#collections = options.collections;
    this.#sweeper = setInterval(() => this.#sweep(), 1000);
    this.#sweeper.unref();
  }

  /** Nodes whose worker is connected. */
  get liveNodes(): number {
    let count = 0;
    for (const node of this.#nodes) if (node?.connection) count += 1;
    return count;
  }

  /** Total slots over the live nodes. */
  get capacity(): number {
    let total = 0;
    for (const node of this.#nodes) if (node?.connection) total += node.capacity;
    return total;
  }

  /** Connected nodes with nothing running or waiting on them, longest idle first: `[index, idleSince]`. */
  idleNodes(): [index: number, idleSince: number][] {
    const idle: [number, number][] = [];
    for (const node of this.#nodes) {
      if (node?.connection && node.running.size === 0 && node.pinned.length === 0)
        idle.push([node.index, node.idleSince]);
    }
    return idle.sort((a, b) => a[1] - b[1] || b[0] - a[0]);
  }

  /**
   * Node `index` is starting (it has no worker yet): tasks pinned to it (a broadcast's parts) are
   * accepted and wait for {@link attach}, or fail if it does not start ({@link startFailed}).
   */
  expect(index: number): void {
    if (this.#nodes[index]) return;
    this.#nodes[index] = {
      index,
      connection: undefined,
      capacity: 0,
      adaptive: false,
      idleSince: performance.now(),
      lastDone: 0,
      running: new Map(),
      pinned: [],
      nestedRunning: 0,
      nestedCapacity: 0,
      abandoned: false,
      draining: false,
      idleWaiters: [],
      bounded: false,
    };
  }

  /**
   * Takes idle node `index` out of dispatch for good (scale-down): true when it was idle and is now
   * removed, false when a task runs or waits on it (it stays). Its connection is the caller's to close.
   */
  remove(index: number): boolean {
    const node = this.#nodes[index];
    if (!node) return true;
    if (node.running.size > 0 || node.pinned.length > 0) return false;
    node.connection = undefined;
    delete this.#nodes[index];
    return true;
  }

  /**
   * Node `index` failed to start (it has no worker). With `again` (the pool starts another node under
   * this index) the tasks pinned to it wait for that one, at most `nodeWaitSeconds` from now; without,
   * they fail with a `NodeUnavailableError` and the node is forgotten.
   */
  startFailed(index: number, reason: string, again: boolean): void {
    if (again) this.expect(index);
    const node = this.#nodes[index];
    if (!node || node.connection) return;
    if (again) {
      const now = performance.now();
      for (const record of node.pinned) record.queuedAt = now;
      node.bounded = true;
      return;
    }
    for (const record of node.pinned.splice(0)) {
      if (record.done) continue;
      record.done = true;
      record.callbacks.error(
        new NodeUnavailableError({ node: index, message: `Node ${index} is gone: ${reason}` }),
      );
    }
    if (node.running.size === 0) delete this.#nodes[index];
  }

  /** Tasks waiting for a slot. */
  get queued(): number {
    return this.#queue.size + this.#retryQueue.size;
  }

  /** The tasks on workers now (sent, not finished): what a detached pool leaves running. */
  onWorkers(): { taskId: string; name: string; node: number }[] {
    const tasks: { taskId: string; name: string; node: number }[] = [];
    for (const node of this.#nodes) {
      if (!node) continue;
      for (const record of node.running.values()) {
        if (!record.done) tasks.push({ taskId: record.id, name: record.request.ref, node: node.index });
      }
    }
    return tasks;
  }

  /**
   * Adds (or brings back) node `index` with its worker connection, its slot count, and its nested
   * slot count (for subtasks; the worker runs those on a separate pool of its concurrency's size).
   * A slot count of `"auto"` adapts: the concurrency (`nestedCapacity`) plus a prefetch that follows
   * the task durations ({@link AdaptiveSchedule}). `onEvent` gets the worker's `event` messages, those
   * it sent before this call included.
   */
  attach(
    index: number,
    connection: WorkerConnection,
    capacity: number | "auto",
    nestedCapacity = 1,
    onEvent?: (event: WorkerEvent) => void,
  ): void {
    let node = this.#nodes[index];
    const adaptive = capacity === "auto";
    const fixed = adaptive ? nestedCapacity : capacity;
    if (!node) {
      node = {
        index,
        connection,
        capacity: fixed,
        adaptive,
        idleSince: performance.now(),
        lastDone: 0,
        running: new Map(),
        pinned: [],
        nestedRunning: 0,
        nestedCapacity,
        abandoned: false,
        draining: false,
        idleWaiters: [],
        bounded: true,
      };
      this.#nodes[index] = node;
    } else {
      node.bounded = true;
      node.connection = connection;
      node.capacity = fixed;
      node.adaptive = adaptive;
      node.idleSince = performance.now();
      node.nestedCapacity = nestedCapacity;
      node.nestedRunning = 0;
      node.abandoned = false;
      node.draining = false;
    }
    const attached = node;
    connection.onMessage((message) => {
      if (message.t === "out")
        this.#output(message.node, message.worker, message.stream, message.data, undefined);
      else if (message.t === "event") onEvent?.(message.event);
    });
    this.#pump();
    void attached;
  }

  /**
   * Node `index` is gone. Its running tasks run again elsewhere (those pinned to it: on its
   * replacement) while their retry policy allows, and fail with a `TaskInterruptedError` otherwise;
   * tasks pinned to it wait for it to come back.
   */
  detach(index: number, reason: string): void {
    const node = this.#nodes[index];
    if (!node?.connection) return;
    const connection = node.connection;
    node.connection = undefined;
    // Pinned tasks wait for the replacement, counted from now.
    const now = performance.now();
    for (const record of node.pinned) record.queuedAt = now;
    for (const record of [...node.running.values()]) {
      connection.offTask(record.wireId);
      const task = this.#interrupted(record);
      const decision = decideRetry(task);
      this.#taskFailed(record, index, "NodeLost", reason, decision.retry);
      if (!decision.retry) {
        this.#finish(record);
        record.callbacks.error(interruptedError(task, decision.reason, index, reason));
        continue;
      }
      record.interruptions += 1;
      this.#requeue(node, record);
    }
    for (const waiter of node.idleWaiters.splice(0)) waiter();
    this.#failIfNoNodeCanRun(reason);
  }

  /**
   * Node `index` is going away (an interruption notice): it takes no new tasks, and the tasks its
   * worker holds that have not started are withdrawn to run elsewhere (pinned ones: on its
   * replacement). Started tasks carry on; if the node goes before they finish, they are retried.
   */
  drain(index: number): void {
    const node = this.#nodes[index];
    if (!node?.connection || node.draining) return;
    node.draining = true;
    const ids = [...node.running.values()]
      .filter((record) => !record.request.nested)
      .map((record) => record.wireId);
    if (ids.length === 0) return;
    try {
      node.connection.send({ t: "withdraw", ids });
    } catch {
      // lost meanwhile: detach retries them
    }
  }

  /** Resolves once nothing runs on node `index` (at once if nothing does, or it is gone). */
  whenIdle(index: number): Promise<void> {
    const node = this.#nodes[index];
    if (!node?.connection || node.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => node.idleWaiters.push(resolve));
  }

  #interrupted(record: TaskRecord): InterruptedTask {
    const { request } = record;
    return {
      id: record.id,
      ref: request.ref,
      attempt: record.interruptions + 1,
      retries: request.retries ?? this.#retries,
      stream: request.stream,
      itemsDelivered: record.itemsDelivered,
      restartStream: request.restartStream === true,
      inputConsumed: record.pumps.size > 0,
    };
  }

  /** Takes a task off its lost node and queues it to run again: first in line, on the same node if pinned. */
  #requeue(node: NodeState, record: TaskRecord): void {
    if (node.running.delete(record.id) && record.request.nested) node.nestedRunning -= 1;
    if (record.children) {
      for (const child of record.children.values()) child.cancel("its parent task's node was lost");
      record.children = undefined;
    }
    // Locks the lost run held are released and its waits dropped: the next run starts afresh.
    this.#collections?.ownerEnded(record.id);
    record.node = undefined;
    record.attempt += 1;
    record.skipItems = record.itemsDelivered;
    record.streams = [];
    record.queuedAt = performance.now();
    if (record.request.node !== undefined) node.pinned.unshift(record);
    else if (record.request.nested) this.#nestedQueue.push(record);
    else this.#retryQueue.push(record);
  }

  /** Fails the queued tasks when every node is lost for good (none is being replaced). */
  #failIfNoNodeCanRun(reason: string): void {
    const nodes = this.#nodes.filter((node) => node !== undefined);
    if (nodes.length === 0 || nodes.some((node) => node.connection !== undefined || !node.abandoned)) return;
    for (const record of [
      ...this.#retryQueue.drain(),
      ...this.#queue.drain(),
      ...this.#nestedQueue.drain(),
    ]) {
      if (record.done) continue;
      record.done = true;
      record.callbacks.error(
        new ConnectionError({
          host: "pool",
          message: `No node is left to run task ${record.id}: ${reason}`,
        }),
      );
    }
  }

  /** Fails every pinned task of node `index` (it will not come back), and the queue if no node is left. */
  abandonNode(index: number, reason: string): void {
    const node = this.#nodes[index];
    if (!node) return;
    node.abandoned = true;
    for (const record of node.pinned.splice(0)) {
      if (record.done) continue;
      record.done = true;
      record.callbacks.error(
        new NodeUnavailableError({ node: index, message: `Node ${index} is gone: ${reason}` }),
      );
    }
    this.#failIfNoNodeCanRun(`node ${index} is gone: ${reason}`);
  }

  /** Queues a task; it starts as soon as a slot is free. */
  submit(request: TaskRequest, callbacks: TaskCallbacks): TaskTicket {
    if (this.#closed) throw new CancelledError({ message: "The pool is shut down" });
    this.#nextId += 1;
    const id = `${this.#idPrefix}${this.#nextId}`;
    const record: TaskRecord = {
      id,
      request,
      callbacks,
      node: undefined,
      startedAt: 0,
      begunAt: 0,
      done: false,
      streams: [],
      pumps: new Map(),
      children: undefined,
      attempt: 1,
      wireId: id,
      interruptions: 0,
      itemsDelivered: 0,
      skipItems: 0,
      queuedAt: performance.now(),
      cancel: (reason) => this.#cancel(record, reason),
    };
    if (this.#hub.listensTo("task.queued")) {
      this.#hub.emit({
        type: "task.queued",
        timestamp: Date.now(),
        poolId: this.#poolId,
        taskId: id,
        name: request.ref,
      });
    }
    if (request.node !== undefined) {
      const node = this.#nodes[request.node];
      if (!node)
        throw new ConnectionError({
          host: `node ${request.node}`,
          node: request.node,
          message: `There is no node ${request.node}`,
        });
      if (node.abandoned && !node.connection)
        throw new NodeUnavailableError({
          node: request.node,
          message: `Node ${request.node} is gone and was not replaced`,
        });
      node.pinned.push(record);
    } else if (request.nested) this.#nestedQueue.push(record);
    else this.#queue.push(record);
    this.#pump();
    if (this.#queue.size > 0) this.#onQueued?.();
    return record;
  }

  /** Resolves when a slot is free or the queue is short: for feeding large maps without queueing them all. */
  whenQueueBelow(limit: number): Promise<void> {
    if (this.queued < limit || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#capacityWaiters.push(resolve));
  }

  /**
   * Cancels everything and stops the timeout sweeper. Each task fails with a `CancelledError` giving
   * `reason`, or with the error `failWith` makes for it (a `BudgetExceededError`).
   */
  close(reason: string, failWith?: (taskId: string, ref: string) => Error): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#sweeper);
    clearTimeout(this.#wake);
    const pending: TaskRecord[] = [
      ...this.#retryQueue.drain(),
      ...this.#queue.drain(),
      ...this.#nestedQueue.drain(),
    ];
    for (const node of this.#nodes) {
      if (!node) continue;
      pending.push(...node.pinned.splice(0), ...node.running.values());
    }
    for (const record of pending) this.#cancel(record, reason, failWith);
    for (const waiter of this.#capacityWaiters.splice(0)) waiter();
  }

  #pump(): void {
    const nodes = this.#nodes;
    while (this.#nestedQueue.size > 0) {
      const node = this.#nextFreeNode(true);
      if (!node) break;
      const record = this.#nestedQueue.shift() as TaskRecord;
      if (!record.done) this.#start(node, record);
    }
    for (const node of nodes) {
      if (!node?.connection || node.draining) continue;
      while (
        node.pinned.length > 0 &&
        node.running.size - node.nestedRunning < this.#limit(node, (node.pinned[0] as TaskRecord).request.ref)
      ) {
        const record = node.pinned.shift() as TaskRecord;
        if (!record.done) this.#start(node, record);
      }
    }
    for (const queue of [this.#retryQueue, this.#queue]) {
      while (queue.size > 0) {
        const ref = (queue.peek() as TaskRecord).request.ref;
        const node = this.#nextFreeNode(false, ref);
        if (!node) {
          // Held back (long tasks): look again when a running task is due to end.
          if (this.#schedule.isLong(ref)) this.#armWake();
          break;
        }
        const record = queue.shift() as TaskRecord;
        if (!record.done) this.#start(node, record);
      }
    }
    if (this.#capacityWaiters.length > 0) for (const waiter of this.#capacityWaiters.splice(0)) waiter();
  }

  /** Tasks `node` may have in flight (nested ones apart) when the next to place is `ref`'s. */
  #limit(node: NodeState, ref: string): number {
    if (!node.adaptive) return node.capacity;
    const base = this.#schedule.limit(node.capacity, ref);
    return base > node.capacity ? base : node.capacity + this.#nearlyDone(node, performance.now());
  }

  /**
   * Long tasks are held back, but not for a round trip: a slot whose task is expected to end within
   * the prefetch budget takes its successor now (at most one per slot), so the worker never idles
   * between long tasks. The expectation is the function's learnt duration.
   */
  #nearlyDone(node: NodeState, now: number): number {
    let count = 0;
    for (const record of node.running.values()) {
      if (record.request.nested) continue;
      const estimate = this.#schedule.estimateMs(record.request.ref);
      if (estimate !== undefined && now >= record.begunAt + estimate - PREFETCH_BUDGET_MS) count += 1;
    }
    return Math.min(count, node.capacity);
  }

  /** With tasks held back, wakes the dispatcher when the next running task is due to end (see {@link #nearlyDone}). */
  #armWake(): void {
    if (this.#wake !== undefined || this.#closed) return;
    const now = performance.now();
    let earliest = Number.POSITIVE_INFINITY;
    for (const node of this.#nodes) {
      if (!node?.connection || !node.adaptive) continue;
      for (const record of node.running.values()) {
        if (record.request.nested) continue;
        const estimate = this.#schedule.estimateMs(record.request.ref);
        if (estimate === undefined) continue;
        // Moments already past were counted when they came; a result wakes the dispatcher after them.
        const due = record.begunAt + estimate - PREFETCH_BUDGET_MS;
        if (due > now) earliest = Math.min(earliest, due);
      }
    }
    if (earliest === Number.POSITIVE_INFINITY) return;
    const delay = Math.max(1, Math.ceil(earliest - now));
    this.#wake = setTimeout(() => {
      this.#wake = undefined;
      this.#pump();
    }, delay);
    this.#wake.unref();
  }

  #nextFreeNode(nested = false, ref = ""): NodeState | undefined {
    const nodes = this.#nodes;
    const count = nodes.length;
    for (let step = 0; step < count; step += 1) {
      const index = (this.#roundRobin + step) % count;
      const node = nodes[index];
      const free = nested
        ? node !== undefined && node.nestedRunning < node.nestedCapacity
        : node !== undefined && node.running.size - node.nestedRunning < this.#limit(node, ref);
      if (node?.connection && free && !node.draining) {
        this.#roundRobin = (index + 1) % count;
        return node;
      }
    }
    return undefined;
  }

  #start(node: NodeState, record: TaskRecord): void {
    const connection = node.connection as WorkerConnection;
    const { request } = record;
    let args: unknown[];
    let kwargs: Record<string, unknown>;
    try {
      const marked = markInputStreams(request.args, request.kwargs);
      args = marked.args;
      kwargs = marked.kwargs;
      record.streams = marked.streams;
    } catch (error) {
      record.done = true;
      record.callbacks.error(error as Error);
      return;
    }
    record.node = node;
    record.startedAt = performance.now();
    record.begunAt = record.startedAt;
    node.running.set(record.id, record);
    record.wireId = record.attempt === 1 ? record.id : `${record.id}.${record.attempt}`;
    if (request.nested) node.nestedRunning += 1;
    const attempt = record.attempt;
    connection.onTask(record.wireId, (message) => {
      // A late answer of an earlier run, on a node since lost, is dropped: each result is delivered once.
      if (record.attempt === attempt) this.#onMessage(record, message);
    });
    try {
      record.callbacks.sending?.(node.index);
      connection.send({
        t: "submit",
        id: record.wireId,
        fn: request.ref,
        args: args as WireValue[],
        kwargs: kwargs as Record<string, WireValue>,
        timeout: request.timeout,
        stream: request.stream,
        worker: request.worker ?? null,
        ...(request.nested ? { nested: true } : {}),
        ...(request.defaultTimeout ? { default_timeout: true } : {}),
        ...(request.keep ? { keep: true } : {}),
        ...(request.refs ? { refs: true } : {}),
      });
      record.callbacks.sent?.(node.index);
    } catch (error) {
      this.#finish(record);
      record.callbacks.error(
        SkywardError.isInstance(error) && !ConnectionError.isInstance(error)
          ? new SerializationError({
              taskId: record.id,
              side: "client",
              message: `Cannot send the arguments of ${request.ref}: ${(error as Error).message}`,
              cause: error,
            })
          : (error as Error),
      );
      return;
    }
    if (this.#hub.listensTo("task.started")) {
      this.#hub.emit({
        type: "task.started",
        timestamp: Date.now(),
        poolId: this.#poolId,
        taskId: record.id,
        name: request.ref,
        node: node.index,
        attempt: record.attempt,
      });
    }
  }

  #finish(record: TaskRecord): void {
    if (record.done) return;
    record.done = true;
    for (const pump of record.pumps.values()) pump.close();
    if (record.children) for (const child of record.children.values()) child.cancel("its parent task ended");
    this.#collections?.ownerEnded(record.id);
    const node = record.node;
    if (node) {
      if (node.running.delete(record.id) && record.request.nested) node.nestedRunning -= 1;
      if (node.running.size === 0) node.idleSince = performance.now();
      node.connection?.offTask(record.wireId);
      if (node.running.size === 0) for (const waiter of node.idleWaiters.splice(0)) waiter();
    }
    if (!this.#closed) this.#pump();
  }

  #onMessage(record: TaskRecord, message: TaskMessage): void {
    if (record.done) return;
    if (message.t === "result" || message.t === "end" || message.t === "error") {
      const node = record.node;
      if (node?.adaptive && !record.request.nested) {
        const now = performance.now();
        const inFlight = node.running.size - node.nestedRunning;
        this.#schedule.observe(
          record.request.ref,
          record.startedAt,
          now,
          inFlight,
          node.capacity,
          node.lastDone,
        );
        node.lastDone = now;
        // The worker runs its tasks in order: the one waiting longest behind this one starts now.
        if (inFlight > node.capacity) {
          let position = 0;
          for (const waiting of node.running.values()) {
            if (waiting === record || waiting.request.nested) continue;
            position += 1;
            if (position === node.capacity) {
              waiting.begunAt = Math.max(waiting.begunAt, now);
              break;
            }
          }
        }
      }
    }
    switch (message.t) {
      case "result": {
        this.#finish(record);
        this.#completed(record);
        record.callbacks.result?.(message.value);
        return;
      }
      case "item":
        if (record.skipItems > 0) {
          // A restarted stream yields again what an earlier run delivered.
          record.skipItems -= 1;
          return;
        }
        record.itemsDelivered += 1;
        record.callbacks.item?.(message.value);
        return;
      case "end":
        this.#finish(record);
        this.#completed(record);
        record.callbacks.end?.();
        return;
      case "error": {
        this.#finish(record);
        const error = this.#taskError(record, message);
        this.#taskFailed(record, message.node, message.type, message.message, false);
        record.callbacks.error(error);
        return;
      }
      case "out":
        this.#output(message.node, message.worker, message.stream, message.data, record.id);
        return;
      case "pull": {
        const stream = record.streams[message.stream];
        if (!stream?.source) return;
        let pump = record.pumps.get(message.stream);
        if (!pump) {
          const index = message.stream;
          const connection = record.node?.connection;
          pump = new InputPump(stream.source, (input) => {
            if (record.done || !connection?.isOpen) return;
            try {
              if (input.t === "in")
                connection.send({
                  t: "in",
                  id: record.wireId,
                  stream: index,
                  value: input.value as WireValue,
                });
              else if (input.t === "in_end")
                connection.send({ t: "in_end", id: record.wireId, stream: index });
              else
                connection.send({ t: "in_error", id: record.wireId, stream: index, message: input.message });
            } catch (error) {
              connection.send({
                t: "in_error",
                id: record.wireId,
                stream: index,
                message: `cannot send an item: ${(error as Error).message}`,
              });
            }
          });
          record.pumps.set(message.stream, pump);
        }
        pump.grant(message.n);
        return;
      }
      case "subtask":
        this.#subtask(record, message);
        return;
      case "withdrawn": {
        // Handed back unstarted by a node going away: it runs elsewhere, and never ran, so no retry is used.
        const node = record.node;
        if (!node) return;
        node.connection?.offTask(record.wireId);
        this.#requeue(node, record);
        if (node.running.size === 0) for (const waiter of node.idleWaiters.splice(0)) waiter();
        this.#pump();
        return;
      }
      default:
        return;
    }
  }

  /** Runs a subtask a running task asked for, and answers the parent's worker when it ends. */
  #subtask(parent: TaskRecord, message: Extract<TaskMessage, { t: "subtask" }>): void {
    const connection = parent.node?.connection;
    // Answers go to the run that asked, under its wire id (a retried run has another).
    const wireId = parent.wireId;
    const reply = (answer: SubtaskAnswer) => {
      parent.children?.delete(message.sub);
      if (parent.done || !connection?.isOpen) return;
      sendAnswer(connection, wireId, message.sub, answer);
    };
    if (message.fn === COLLECTION_REF && this.#collections) {
      // A collection operation: answered by the pool's authority, not run as a task.
      // The owner is the task (its locks outlive no run of it: #requeue and #finish release them).
      const pending = this.#collections.apply(parent.id, message.args);
      parent.children ??= new Map();
      parent.children.set(message.sub, {
        id: `${parent.id}/${message.sub}`,
        cancel: (reason) => pending.cancel(reason ?? "cancelled"),
      });
      pending.answer.then(
        (value) => reply({ t: "subresult", value }),
        (error: Error) => reply(collectionFailure(error)),
      );
      return;
    }
    const ticket = this.runSubtask(message, parent.request.timeout, reply);
    if (!ticket) return;
    parent.children ??= new Map();
    parent.children.set(message.sub, ticket);
  }

  /**
   * Runs nested task `message` (a `subtask` a running task asked for) on the pool's nested slots,
   * with `timeout` (its parent's), and calls `reply` once with its outcome. Also serves the tasks an
   * attached pool picked up, which have no record here. Returns its ticket (to cancel it when the
   * parent ends), or undefined when it failed at once (`reply` was called).
   */
  runSubtask(
    message: Extract<TaskMessage, { t: "subtask" }>,
    timeout: number | null,
    reply: (answer: SubtaskAnswer) => void,
  ): TaskTicket | undefined {
    const failure = (error: Error, node: number) => reply(subtaskFailure(error, node));
    try {
      return this.submit(
        {
          ref: message.fn,
          args: message.args,
          kwargs: message.kwargs,
          timeout,
          stream: false,
          nested: true,
          ...(message.node !== null ? { node: message.node } : {}),
        },
        {
          result: (value) => reply({ t: "subresult", value: value as WireValue }),
          error: (error) => failure(error, (error as { node?: number }).node ?? -1),
        },
      );
    } catch (error) {
      failure(error as Error, -1);
      return undefined;
    }
  }

  #taskFailed(record: TaskRecord, node: number, type: string, text: string, willRetry: boolean): void {
    if (!this.#hub.listensTo("task.failed")) return;
    this.#hub.emit({
      type: "task.failed",
      timestamp: Date.now(),
      poolId: this.#poolId,
      taskId: record.id,
      name: record.request.ref,
      node,
      durationMs: performance.now() - record.startedAt,
      error: { type, message: text },
      willRetry,
    });
  }

  #completed(record: TaskRecord): void {
    if (this.#hub.listensTo("task.completed")) {
      this.#hub.emit({
        type: "task.completed",
        timestamp: Date.now(),
        poolId: this.#poolId,
        taskId: record.id,
        name: record.request.ref,
        node: record.node?.index ?? -1,
        durationMs: performance.now() - record.startedAt,
      });
    }
  }

  #taskError(record: TaskRecord, message: Extract<TaskMessage, { t: "error" }>): Error {
    const { ref } = record.request;
    switch (message.kind) {
      case "not_found":
        return new FunctionNotFoundError({
          taskId: record.id,
          ref,
          node: message.node,
          message: `${ref} not found on node ${message.node}: ${message.message}`,
        });
      case "serialization":
        return new SerializationError({
          taskId: record.id,
          side: "worker",
          message: `${ref} on node ${message.node}: ${message.message}`,
        });
      case "timeout": {
        // The worker's own figure: a @sky.function(timeout=…) may have replaced the pool's default.
        const reported = /timeout of ([0-9.]+) s/.exec(message.message)?.[1];
        const seconds = reported !== undefined ? Number(reported) : (record.request.timeout ?? 0);
        return new TaskTimeoutError({
          taskId: record.id,
          timeoutSeconds: seconds,
          message: `${ref} (task ${record.id}) timed out after ${seconds} s on node ${message.node}`,
        });
      }
      case "cancelled":
        return new CancelledError({
          taskId: record.id,
          message: `${ref} (task ${record.id}) was cancelled on node ${message.node}`,
        });
      case "worker_died":
        return new WorkerDiedError({
          taskId: record.id,
          node: message.node,
          message: `The process running ${ref} (task ${record.id}) on node ${message.node} died: ${message.message}`,
        });
      default:
        return (
          commandFailedError({ taskId: record.id, ...message }) ??
          new RemoteTaskError({
            taskId: record.id,
            exceptionType: message.type,
            exceptionMessage: message.message,
            remoteTraceback: message.traceback,
            node: message.node,
          })
        );
    }
  }

  #cancel(record: TaskRecord, reason = "cancelled", failWith?: (taskId: string, ref: string) => Error): void {
    if (record.done) return;
    const node = record.node;
    const running = node?.running.has(record.id) === true;
    const connection = node?.connection;
    this.#finish(record);
    if (running && connection?.isOpen) {
      try {
        connection.send({ t: "cancel", id: record.wireId });
      } catch {
        // the connection went away; nothing to cancel any more
      }
    }
    if (this.#hub.listensTo("task.cancelled")) {
      this.#hub.emit({
        type: "task.cancelled",
        timestamp: Date.now(),
        poolId: this.#poolId,
        taskId: record.id,
        name: record.request.ref,
        node: node?.index ?? null,
      });
    }
    record.callbacks.error(
      failWith?.(record.id, record.request.ref) ??
        new CancelledError({
          taskId: record.id,
          message: `${record.request.ref} (task ${record.id}) was cancelled: ${reason}`,
        }),
    );
  }

  /** Fails tasks whose worker stays silent well past their timeout (the worker enforces timeouts itself). */
  #sweep(): void {
    const now = performance.now();
    for (const node of this.#nodes) {
      if (!node) continue;
      // A node starting for the first time has no such bound: if its start fails, its tasks fail with it.
      if (!node.connection && node.bounded && node.pinned.length > 0) this.#expirePinned(node, now);
      for (const record of node.running.values()) {
        const { timeout } = record.request;
        // A default timeout may be replaced on the worker by the function's declared one: the
        // worker reports it (a worker that stops answering is a lost connection).
        if (record.request.defaultTimeout) continue;
        if (timeout === null || now - record.startedAt < (timeout + this.#grace) * 1000) continue;
        const connection = node.connection;
        this.#finish(record);
        try {
          connection?.send({ t: "cancel", id: record.wireId });
        } catch {
          // lost meanwhile
        }
        record.callbacks.error(
          new TaskTimeoutError({
            taskId: record.id,
            timeoutSeconds: timeout,
            message: `${record.request.ref} (task ${record.id}) timed out after ${timeout} s on node ${node.index} (the worker did not report it)`,
          }),
        );
      }
    }
  }

  /** Fails the tasks pinned to a lost node that waited for its replacement longer than allowed. */
  #expirePinned(node: NodeState, now: number): void {
    const waitMs = this.#nodeWaitSeconds() * 1000;
    const expired = node.pinned.filter((record) => now - record.queuedAt >= waitMs);
    if (expired.length === 0) return;
    node.pinned.splice(0, node.pinned.length, ...node.pinned.filter((record) => !expired.includes(record)));
    for (const record of expired) {
      if (record.done) continue;
      record.done = true;
      record.callbacks.error(
        new NodeUnavailableError({
          node: node.index,
          message: `Task ${record.id} (${record.request.ref}) needs node ${node.index}, which was lost and did not come back within ${Math.round(waitMs / 1000)} s`,
        }),
      );
    }
  }

  #output(
    node: number,
    worker: number | null,
    stream: "stdout" | "stderr",
    data: string,
    taskId: string | undefined,
  ): void {
    if (!this.#hub.listensTo("log")) return;
    const key = `${node}/${worker}/${stream}`;
    const text = (this.#partialLines.get(key) ?? "") + data;
    const lines = text.split("\n");
    const rest = lines.pop() ?? "";
    if (rest) this.#partialLines.set(key, rest);
    else this.#partialLines.delete(key);
    const timestamp = Date.now();
    for (const line of lines) {
      this.#hub.emit({
        type: "log",
        timestamp,
        poolId: this.#poolId,
        node,
        worker: worker ?? 0,
        stream,
        line,
        ...(taskId ? { taskId } : {}),
      });
    }
  }
}

/**
 * Runs a nested task on a pool's task manager for a task it has no record of: those an attached
 * pool picked up (`attach`), whose subtasks reach the attaching client's own connections. Returns
 * its ticket, or undefined when it failed at once (`reply` was called).
 */
export type SubtaskRunner = (
  message: Extract<TaskMessage, { t: "subtask" }>,
  reply: (answer: SubtaskAnswer) => void,
) => TaskTicket | undefined;

/** A subtask's outcome, to be sent to its parent's worker under the parent's wire id ({@link sendAnswer}). */
export type SubtaskAnswer =
  | { readonly t: "subresult"; readonly value: WireValue }
  | {
      readonly t: "suberror";
      readonly kind: string;
      readonly type: string;
      readonly message: string;
      readonly traceback: string;
      readonly node: number;
    };

/**
 * Sends `answer` to the worker of the task with wire id `parentWireId`: a value that cannot be
 * encoded goes as a `SerializationError` instead, so the parent never waits forever.
 */
export function sendAnswer(
  connection: WorkerConnection,
  parentWireId: string,
  sub: number,
  answer: SubtaskAnswer,
): void {
  try {
    connection.send({ ...answer, id: parentWireId, sub } as Parameters<WorkerConnection["send"]>[0]);
  } catch (error) {
    connection.send({
      t: "suberror",
      id: parentWireId,
      sub,
      kind: "serialization",
      type: "SerializationError",
      message: (error as Error).message,
      traceback: "",
      node: -1,
    });
  }
}

/** A collection operation's error as its task sees it (the Python type it names, else the error's). */
export function collectionFailure(error: Error): SubtaskAnswer {
  return {
    t: "suberror",
    kind: "exception",
    type: (error as { pythonType?: string }).pythonType ?? error.name,
    message: error.message,
    traceback: "",
    node: -1,
  };
}

/** A nested task's failure as its parent sees it: the kind and type the worker raises again. */
function subtaskFailure(error: Error, node: number): SubtaskAnswer {
  const kind = RemoteTaskError.isInstance(error)
    ? "exception"
    : FunctionNotFoundError.isInstance(error)
      ? "not_found"
      : SerializationError.isInstance(error)
        ? "serialization"
        : TaskTimeoutError.isInstance(error)
          ? "timeout"
          : CancelledError.isInstance(error)
            ? "cancelled"
            : "worker_died";
  return {
    t: "suberror",
    kind,
    type: RemoteTaskError.isInstance(error) ? error.exceptionType : error.name,
    message: RemoteTaskError.isInstance(error) ? error.exceptionMessage : error.message,
    traceback: RemoteTaskError.isInstance(error) ? error.remoteTraceback : "",
    node,
  };
}
