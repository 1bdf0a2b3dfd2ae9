/**
 * Dispatch: which node runs each task. Every node has `concurrency + buffer` slots; tasks wait in a
 * queue until a slot is free and go round-robin across nodes (or to the node they are pinned to).
 * Results, stream items, input-stream pulls, output and errors come back per task id.
 *
 * The scheduler is here; its parts are beside it: the task and node records (`task-record.ts`),
 * placement (`placement.ts`), the queue (`fifo.ts`), input streams (`input-pump.ts`), subtask
 * routing (`subtasks.ts`), output lines (`output-lines.ts`), task events (`task-events.ts`) and the
 * errors a worker reports (`task-errors.ts`).
 */

import { COLLECTION_REF, type CollectionStore } from "../collections/store.js";
import {
  CancelledError,
  ConnectionError,
  NodeUnavailableError,
  SerializationError,
  SkywardError,
  TaskTimeoutError,
} from "../errors/errors.js";
import type { EventHub } from "../observe/events.js";
import {
  markInputStreams,
  type TaskMessage,
  type WireValue,
  type WorkerEvent,
} from "../protocol/protocol.js";
import { Fifo } from "./fifo.js";
import { inputPumpToWorker } from "./input-pump.js";
import { OutputLines } from "./output-lines.js";
import { nextDueDelay, nextFreeNode, slotLimit } from "./placement.js";
import { AdaptiveSchedule } from "./schedule.js";
import { applyCollectionOperation, type SubtaskAnswer, sendAnswer, subtaskFailure } from "./subtasks.js";
import { taskErrorOf } from "./task-errors.js";
import { TaskEvents } from "./task-events.js";
import {
  interruptedTask,
  type NodeState,
  newNodeState,
  type TaskCallbacks,
  type TaskRecord,
  type TaskRequest,
  type TaskTicket,
} from "./task-record.js";
import { decideRetry, interruptedError } from "./task-retry.js";
import type { WorkerConnection } from "./worker-connection.js";

export { collectionFailure, type SubtaskAnswer, type SubtaskRunner, sendAnswer } from "./subtasks.js";
export type { TaskCallbacks, TaskRequest, TaskTicket } from "./task-record.js";

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
  readonly #events: TaskEvents;
  readonly #output: OutputLines;
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

  constructor(options: TaskManagerOptions) {
    this.#idPrefix = options.idPrefix ?? "t";
    this.#events = new TaskEvents(options.hub, options.poolId);
    this.#output = new OutputLines(options.hub, options.poolId);
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
    this.#nodes[index] = newNodeState(index, undefined, {
      capacity: 0,
      adaptive: false,
      nestedCapacity: 0,
      bounded: false,
    });
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
      node = newNodeState(index, connection, { capacity: fixed, adaptive, nestedCapacity, bounded: true });
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
        this.#output.write(message.node, message.worker, message.stream, message.data, undefined);
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
      const task = interruptedTask(record, this.#retries);
      const decision = decideRetry(task);
      this.#events.failed(record, index, "NodeLost", reason, decision.retry);
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
    this.#events.queued(id, request.ref);
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
        node.running.size - node.nestedRunning <
          slotLimit(this.#schedule, node, (node.pinned[0] as TaskRecord).request.ref)
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

  /** With tasks held back, wakes the dispatcher when the next running task is due to end. */
  #armWake(): void {
    if (this.#wake !== undefined || this.#closed) return;
    const delay = nextDueDelay(this.#schedule, this.#nodes, performance.now());
    if (delay === undefined) return;
    this.#wake = setTimeout(() => {
      this.#wake = undefined;
      this.#pump();
    }, delay);
    this.#wake.unref();
  }

  #nextFreeNode(nested = false, ref = ""): NodeState | undefined {
    const node = nextFreeNode(this.#schedule, this.#nodes, this.#roundRobin, nested, ref);
    if (node) this.#roundRobin = (node.index + 1) % this.#nodes.length;
    return node;
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
    this.#events.started(record, node.index);
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
        this.#events.completed(record);
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
        this.#events.completed(record);
        record.callbacks.end?.();
        return;
      case "error": {
        this.#finish(record);
        const error = taskErrorOf(record, message);
        this.#events.failed(record, message.node, message.type, message.message, false);
        record.callbacks.error(error);
        return;
      }
      case "out":
        this.#output.write(message.node, message.worker, message.stream, message.data, record.id);
        return;
      case "pull": {
        const stream = record.streams[message.stream];
        if (!stream?.source) return;
        let pump = record.pumps.get(message.stream);
        if (!pump) {
          pump = inputPumpToWorker(stream.source, record.node?.connection, record, message.stream);
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
      const operation = applyCollectionOperation(this.#collections, parent.id, message, reply);
      parent.children ??= new Map();
      parent.children.set(message.sub, operation);
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
    this.#events.cancelled(record, node?.index ?? null);
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
}
