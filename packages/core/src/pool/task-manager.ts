/**
 * Dispatch: which node runs each task. Every node has `concurrency + buffer` slots; tasks wait in a
 * queue until a slot is free and go round-robin across nodes (or to the node they are pinned to).
 * Results, stream items, input-stream pulls, output and errors come back per task id.
 *
 * The scheduler is here; its parts are beside it: the task and node records (`task-record.ts`), the
 * node set (`dispatch-nodes.ts`) and placement (`placement.ts`), the queues (`task-queues.ts`, `fifo.ts`), input streams
 * (`input-pump.ts`), subtask routing (`subtasks.ts`), output lines (`output-lines.ts`), task events
 * (`task-events.ts`), the errors tasks fail with (`task-errors.ts`) and the client's own deadlines
 * (`task-deadlines.ts`).
 */

import { CancelledError } from "../errors/errors.js";
import type { EventHub } from "../observe/events.js";
import { markInputStreams, type TaskMessage, type WorkerEvent } from "../protocol/protocol.js";
import { DispatchNodes } from "./dispatch-nodes.js";
import { OutputLines } from "./output-lines.js";
import { beginNextWaiting, observeTaskEnd } from "./placement.js";
import { AdaptiveSchedule } from "./schedule.js";
import { routeSubtask, type SubtaskAnswer, submitNestedTask } from "./subtasks.js";
import { sweepDeadlines } from "./task-deadlines.js";
import { sendError, taskErrorOf } from "./task-errors.js";
import { TaskEvents } from "./task-events.js";
import { TaskQueues } from "./task-queues.js";
import {
  beginRun,
  endRun,
  failWaiting,
  grantInput,
  interruptedTask,
  type NodeState,
  newTaskRecord,
  prepareNextRun,
  submitMessage,
  type TaskCallbacks,
  type TaskRecord,
  type TaskRequest,
  type TaskTicket,
  wakeIfIdle,
  whenReady,
} from "./task-record.js";
import { decideRetry, interruptedError } from "./task-retry.js";
import type { WorkerConnection } from "./worker-connection.js";

export { type SubtaskAnswer, type SubtaskRunner, sendAnswer } from "./subtasks.js";
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
  /** What task ids start with (`t1`, `t2`…); an attached pool's differ from those it was detached with. */
  readonly idPrefix?: string;
}

/** The options the manager reads after start, defaults applied. */
interface TaskSettings {
  readonly grace: number;
  readonly onQueued: (() => void) | undefined;
  readonly idPrefix: string;
  readonly retries: number;
  readonly nodeWaitSeconds: () => number;
}

function taskSettings(options: TaskManagerOptions): TaskSettings {
  const wait = options.nodeWaitSeconds ?? 300;
  return {
    grace: options.timeoutGraceSeconds ?? 10,
    onQueued: options.onQueued,
    idPrefix: options.idPrefix ?? "t",
    retries: options.retryOnInterruption ?? 3,
    nodeWaitSeconds: typeof wait === "function" ? wait : () => wait,
  };
}

/** Dispatches tasks over the pool's node connections. */
export class TaskManager {
  readonly #schedule = new AdaptiveSchedule();
  readonly #nodes = new DispatchNodes(this.#schedule);
  readonly #queues = new TaskQueues(this.#nodes, this.#schedule, () => this.#settings.retries);
  readonly #events: TaskEvents;
  readonly #output: OutputLines;
  readonly #settings: TaskSettings;
  readonly #capacityWaiters: (() => void)[] = [];
  /** The tasks not done yet, by id: for cancelling one by its id (`pool.cancel`). */
  readonly #unfinished = new Map<string, TaskRecord>();
  #nextId = 0;
  #closed = false;
  #wake: ReturnType<typeof setTimeout> | undefined;
  readonly #sweeper: ReturnType<typeof setInterval>;

  constructor(options: TaskManagerOptions) {
    this.#settings = taskSettings(options);
    this.#events = new TaskEvents(options.hub, options.poolId);
    this.#output = new OutputLines(options.hub, options.poolId);
    this.#sweeper = setInterval(() => this.#sweep(), 1000);
    this.#sweeper.unref();
  }

  /** Nodes whose worker is connected. */
  get liveNodes(): number {
    return this.#nodes.liveNodes;
  }

  /** Total slots over the live nodes. */
  get capacity(): number {
    return this.#nodes.capacity;
  }

  /** Connected nodes with nothing running or waiting on them, longest idle first: `[index, idleSince]`. */
  idleNodes(): [index: number, idleSince: number][] {
    return this.#nodes.idleNodes();
  }

  /**
   * Node `index` is starting (it has no worker yet): tasks pinned to it (a broadcast's parts) are
   * accepted and wait for {@link attach}, or fail if it does not start ({@link startFailed}).
   */
  expect(index: number): void {
    this.#nodes.expect(index);
  }

  /**
   * Takes idle node `index` out of dispatch for good (scale-down): true when it was idle and is now
   * removed, false when a task runs or waits on it (it stays). Its connection is the caller's to close.
   */
  remove(index: number): boolean {
    return this.#nodes.remove(index);
  }

  /**
   * Node `index` failed to start (it has no worker). With `again` (the pool starts another node under
   * this index) the tasks pinned to it wait for that one, at most `nodeWaitSeconds` from now; without,
   * they fail with a `NodeUnavailableError` and the node is forgotten.
   */
  startFailed(index: number, reason: string, again: boolean): void {
    this.#nodes.startFailed(index, reason, again);
  }

  /** Tasks waiting for a slot. */
  get queued(): number {
    return this.#queues.waiting;
  }

  /** The tasks on workers now (sent, not finished): what a detached pool leaves running. */
  onWorkers(): { taskId: string; name: string; node: number }[] {
    return this.#nodes.onWorkers();
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
    this.#nodes.connect(index, connection, capacity, nestedCapacity);
    connection.onMessage((message) => {
      if (message.t === "out")
        this.#output.write(message.node, message.worker, message.stream, message.data, undefined);
      else if (message.t === "event") onEvent?.(message.event);
    });
    this.#pump();
  }

  /**
   * Node `index` is gone. Its running tasks run again elsewhere (those pinned to it: on its
   * replacement) while their retry policy allows, and fail with a `TaskInterruptedError` otherwise;
   * a task whose `submit` was not written yet never reached the worker, and runs elsewhere as one
   * withdrawn. Tasks pinned to it wait for it to come back.
   */
  detach(index: number, reason: string): void {
    const node = this.#nodes.get(index);
    if (!node?.connection) return;
    const connection = node.connection;
    node.connection = undefined;
    // Pinned tasks wait for the replacement, counted from now.
    const now = performance.now();
    for (const record of node.pinned) record.queuedAt = now;
    for (const record of [...node.running.values()]) {
      connection.offTask(record.wireId);
      if (!record.submitted) {
        this.#requeue(node, record);
        continue;
      }
      const task = interruptedTask(record, this.#settings.retries);
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
  }

  /**
   * Node `index` is going away (an interruption notice): it takes no new tasks, and the tasks its
   * worker holds that have not started are withdrawn to run elsewhere (pinned ones: on its
   * replacement). Started tasks carry on; if the node goes before they finish, they are retried.
   */
  drain(index: number): void {
    this.#nodes.drain(index);
  }

  /** Resolves once nothing runs on node `index` (at once if nothing does, or it is gone). */
  whenIdle(index: number): Promise<void> {
    return this.#nodes.whenIdle(index);
  }

  /** Takes a task off its lost node and queues it to run again: first in line, on the same node if pinned. */
  #requeue(node: NodeState, record: TaskRecord): void {
    if (node.running.delete(record.id) && record.request.nested) node.nestedRunning -= 1;
    if (record.children) {
      for (const child of record.children.values()) child.cancel("its parent task's node was lost");
      record.children = undefined;
    }
    prepareNextRun(record);
    this.#queues.requeue(node, record);
  }

  /** Queues a task; it starts as soon as a slot is free. */
  submit(request: TaskRequest, callbacks: TaskCallbacks): TaskTicket {
    if (this.#closed) throw new CancelledError({ message: "The pool is shut down" });
    this.#nextId += 1;
    const id = `${this.#settings.idPrefix}${this.#nextId}`;
    const record = newTaskRecord(id, request, callbacks, (reason) => this.#cancel(record, reason));
    this.#unfinished.set(id, record);
    this.#events.queued(id, request.ref);
    this.#queues.add(record);
    this.#pump();
    if (this.#queues.fresh > 0) this.#settings.onQueued?.();
    return record;
  }

  /** Cancels the task `id` if it has not ended (as its handle's `cancel()`); false when it has, or is unknown. */
  cancel(id: string, reason: string): boolean {
    const record = this.#unfinished.get(id);
    if (record === undefined) return false;
    this.#cancel(record, reason);
    return true;
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
  close(
    reason: string,
    failWith?: (taskId: string, ref: string, running: boolean) => Error | undefined,
  ): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#sweeper);
    clearTimeout(this.#wake);
    const pending = this.#queues.drain();
    for (const node of this.#nodes.all) {
      if (!node) continue;
      pending.push(...node.pinned.splice(0), ...node.running.values());
    }
    for (const record of pending) this.#cancel(record, reason, failWith);
    for (const waiter of this.#capacityWaiters.splice(0)) waiter();
  }

  #pump(): void {
    // Held back (long tasks): look again when a running task is due to end.
    if (this.#queues.dispatch((node, record) => this.#start(node, record))) this.#armWake();
    if (this.#capacityWaiters.length > 0) for (const waiter of this.#capacityWaiters.splice(0)) waiter();
  }

  /** With tasks held back, wakes the dispatcher when the next running task is due to end. */
  #armWake(): void {
    if (this.#wake !== undefined || this.#closed) return;
    const delay = this.#nodes.nextDueDelay();
    if (delay === undefined) return;
    this.#wake = setTimeout(() => {
      this.#wake = undefined;
      this.#pump();
    }, delay);
    this.#wake.unref();
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
      this.#unfinished.delete(record.id);
      record.callbacks.error(error as Error);
      return;
    }
    beginRun(record, node);
    const attempt = record.attempt;
    connection.onTask(record.wireId, (message) => {
      // A late answer of an earlier run, on a node since lost, is dropped: each result is delivered once.
      if (record.attempt === attempt) this.#onMessage(record, message);
    });
    const fail = (error: Error) => {
      this.#finish(record);
      record.callbacks.error(error);
    };
    whenReady(record, node, fail, () => {
      try {
        record.callbacks.sending?.(node.index);
        connection.send(submitMessage(record, args, kwargs));
        record.submitted = true;
        record.callbacks.sent?.(node.index);
      } catch (error) {
        fail(sendError(record, error));
        return;
      }
      this.#events.started(record, node.index);
    });
  }

  #finish(record: TaskRecord): void {
    if (record.done) return;
    record.done = true;
    this.#unfinished.delete(record.id);
    this.#output.end(record.id);
    for (const pump of record.pumps.values()) pump.close();
    if (record.children) for (const child of record.children.values()) child.cancel("its parent task ended");
    if (record.node) {
      beginNextWaiting(record.node, record);
      endRun(record, record.node);
    }
    if (!this.#closed) this.#pump();
  }

  #onMessage(record: TaskRecord, message: TaskMessage): void {
    if (record.done) return;
    if (message.t === "result" || message.t === "end" || message.t === "error") {
      const node = record.node;
      if (node?.adaptive && !record.request.nested) observeTaskEnd(this.#schedule, node, record);
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
      case "pull":
        grantInput(record, message.stream, message.n);
        return;
      case "subtask":
        routeSubtask(record, message, (...nested) => this.runSubtask(...nested));
        return;
      case "subcancel": {
        // The task gave up on it (joblib, after a failed batch): it stops holding a slot of the pool.
        const child = record.children?.get(message.sub);
        record.children?.delete(message.sub);
        child?.cancel("its parent task cancelled it");
        return;
      }
      case "withdrawn": {
        // Handed back unstarted by a node going away: it runs elsewhere, and never ran, so no retry is used.
        const node = record.node;
        if (!node) return;
        node.connection?.offTask(record.wireId);
        this.#requeue(node, record);
        wakeIfIdle(node);
        this.#pump();
        return;
      }
      default:
        return;
    }
  }

  /**
   * Runs nested task `message` (a `subtask` a running task asked for) on the pool's nested slots (on
   * `parentNode` last), with `timeout` (its parent's), and calls `reply` once with its outcome. Also
   * serves the tasks an attached pool picked up, which have no record here. Returns its ticket (to
   * cancel it when the parent ends), or undefined when it failed at once (`reply` was called).
   */
  runSubtask(
    message: Extract<TaskMessage, { t: "subtask" }>,
    timeout: number | null,
    reply: (answer: SubtaskAnswer) => void,
    parentNode?: number,
  ): TaskTicket | undefined {
    const submit = (request: TaskRequest, callbacks: TaskCallbacks) => this.submit(request, callbacks);
    return submitNestedTask(submit, message, timeout, reply, parentNode);
  }

  #cancel(
    record: TaskRecord,
    reason = "cancelled",
    failWith?: (taskId: string, ref: string, running: boolean) => Error | undefined,
  ): void {
    if (record.done) return;
    const node = record.node;
    const running = node?.running.has(record.id) === true;
    const connection = node?.connection;
    this.#finish(record);
    if (running) connection?.sendIfOpen({ t: "cancel", id: record.wireId });
    this.#events.cancelled(record, node?.index ?? null);
    record.callbacks.error(
      failWith?.(record.id, record.request.ref, running) ??
        new CancelledError({
          taskId: record.id,
          message: `${record.request.ref} (task ${record.id}) was cancelled: ${reason}`,
        }),
    );
  }

  /** Fails tasks whose worker stays silent well past their timeout (the worker enforces timeouts itself). */
  #sweep(): void {
    const nodeWaitMs = () => this.#settings.nodeWaitSeconds() * 1000;
    for (const { record, error, running } of sweepDeadlines(
      this.#nodes.all,
      performance.now(),
      this.#settings.grace,
      nodeWaitMs,
    )) {
      if (!running) {
        failWaiting([record], () => error);
        continue;
      }
      const connection = record.node?.connection;
      this.#finish(record);
      connection?.sendIfOpen({ t: "cancel", id: record.wireId });
      record.callbacks.error(error);
    }
  }
}
