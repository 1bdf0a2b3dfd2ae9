/**
 * What the dispatcher holds: a task as its submitter gives it (`TaskRequest`, `TaskCallbacks`) and
 * holds it (`TaskTicket`), the record of it while it waits and runs, and the state of each node.
 */

import type { InputStream, SubmitMessage, WireValue } from "../protocol/protocol.js";
import { type InputPump, inputPumpToWorker } from "./input-pump.js";
import type { InterruptedTask } from "./task-retry.js";
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
  /**
   * It got a slot on this node (once per run): what must happen there before its `submit` is written
   * (its remote references moved there), or undefined when nothing must. The `submit` waits for it,
   * keeping the slot; when it fails, so does the task.
   */
  readonly readying?: (node: number) => Promise<void> | undefined;
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
  /**
   * A nested task's parent's node: it goes to another node with a nested slot free first, since the
   * parent's worker fills its own nested slots itself without asking the client.
   */
  readonly parentNode?: number;
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

export interface TaskRecord extends TaskTicket {
  readonly request: TaskRequest;
  readonly callbacks: TaskCallbacks;
  node: NodeState | undefined;
  startedAt: number;
  /**
   * When it got a worker slot, as far as the client can tell (later than `startedAt` if it waited
   * behind the worker's other tasks): its timeout counts from then, on the worker as here.
   */
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
  /** Whether this run's `submit` was written to its node (before that, the worker has none of it). */
  submitted: boolean;
  /** Runs cut short by the loss of their node (those withdrawn before they started do not count). */
  interruptions: number;
  /** Stream items delivered to the submitter. */
  itemsDelivered: number;
  /** Items of a restarted stream still to skip (delivered by an earlier run). */
  skipItems: number;
  /** When it started waiting for a slot (performance.now()). */
  queuedAt: number;
}

export interface NodeState {
  readonly index: number;
  connection: WorkerConnection | undefined;
  capacity: number;
  /** Tasks its worker runs at once (its concurrency); those sent beyond wait on the worker. */
  workerSlots: number;
  /** With an adaptive buffer (`"auto"`), its slot count follows the tasks' durations; `capacity` otherwise. */
  adaptive: boolean;
  /** When its last task ended (or it joined), and when its last result came: `performance.now()`. */
  idleSince: number;
  lastDone: number;
  readonly running: Map<string, TaskRecord>;
  readonly pinned: TaskRecord[];
  /** Nested tasks among `pinned` (parts of nested broadcasts), at least: a count above it only costs a look. */
  pinnedNested: number;
  /** Nested tasks running on it, and how many it may run (its concurrency). */
  nestedRunning: number;
  nestedCapacity: number;
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

/** A node's state before any task: `connection` undefined while it starts, its slots as given. */
export function newNodeState(
  index: number,
  connection: WorkerConnection | undefined,
  slots: {
    capacity: number;
    workerSlots: number;
    adaptive: boolean;
    nestedCapacity: number;
    bounded: boolean;
  },
): NodeState {
  return {
    index,
    connection,
    ...slots,
    idleSince: performance.now(),
    lastDone: 0,
    running: new Map(),
    pinned: [],
    pinnedNested: 0,
    nestedRunning: 0,
    draining: false,
    idleWaiters: [],
  };
}

/** A run of `record` cut short by the loss of its node, as the retry policy sees it. */
export function interruptedTask(record: TaskRecord, defaultRetries: number): InterruptedTask {
  const { request } = record;
  return {
    id: record.id,
    ref: request.ref,
    attempt: record.interruptions + 1,
    retries: request.retries ?? defaultRetries,
    stream: request.stream,
    itemsDelivered: record.itemsDelivered,
    restartStream: request.restartStream === true,
    inputConsumed: record.pumps.size > 0,
  };
}

/**
 * Whether `record` may not run again if its node is lost (its retries are off or used up): such a
 * task is not prefetched onto a node, since a node lost with it waiting there could not run it again.
 */
export function runsOnce(record: TaskRecord, defaultRetries: number): boolean {
  return record.interruptions >= (record.request.retries ?? defaultRetries);
}

/** Fails the tasks among `records` not done yet with the error `error` makes for each. */
export function failWaiting(records: Iterable<TaskRecord>, error: (record: TaskRecord) => Error): void {
  for (const record of records) {
    if (record.done) continue;
    record.done = true;
    record.callbacks.error(error(record));
  }
}

/** Wakes whoever waits for `node` to be idle, when nothing runs on it. */
export function wakeIfIdle(node: NodeState): void {
  if (node.running.size === 0) for (const waiter of node.idleWaiters.splice(0)) waiter();
}

/** A task's record as it is queued; `cancel` is its ticket's. */
export function newTaskRecord(
  id: string,
  request: TaskRequest,
  callbacks: TaskCallbacks,
  cancel: (reason?: string) => void,
): TaskRecord {
  return {
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
    submitted: false,
    interruptions: 0,
    itemsDelivered: 0,
    skipItems: 0,
    queuedAt: performance.now(),
    cancel,
  };
}

/** The `submit` of `record`'s current run, with its arguments as marked for input streams. */
export function submitMessage(
  record: TaskRecord,
  args: readonly unknown[],
  kwargs: Readonly<Record<string, unknown>>,
): SubmitMessage {
  const { request } = record;
  return {
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
  };
}

/** `record`'s next run starts on `node`: it runs there under a wire id of its own. */
export function beginRun(record: TaskRecord, node: NodeState): void {
  record.node = node;
  record.submitted = false;
  record.startedAt = performance.now();
  record.begunAt = record.startedAt;
  node.running.set(record.id, record);
  record.wireId = record.attempt === 1 ? record.id : `${record.id}.${record.attempt}`;
  if (record.request.nested) node.nestedRunning += 1;
}

/**
 * Calls `send` once `record`'s node is ready for its `submit` (its `readying` callback; at once when
 * there is nothing to wait for), or `fail` when getting it ready failed. Neither is called when this
 * run is over by then (cancelled, its node lost).
 */
export function whenReady(
  record: TaskRecord,
  node: NodeState,
  fail: (error: Error) => void,
  send: () => void,
): void {
  let readying: Promise<void> | undefined;
  try {
    readying = record.callbacks.readying?.(node.index);
  } catch (error) {
    fail(error as Error);
    return;
  }
  if (readying === undefined) {
    send();
    return;
  }
  const attempt = record.attempt;
  const current = () => !record.done && record.attempt === attempt && record.node === node;
  readying.then(
    () => {
      if (current()) send();
    },
    (error: Error) => {
      if (current()) fail(error);
    },
  );
}

/** `record`'s run on `node` is over: its slot is free, its messages no longer heard. */
export function endRun(record: TaskRecord, node: NodeState): void {
  if (node.running.delete(record.id) && record.request.nested) node.nestedRunning -= 1;
  if (node.running.size === 0) node.idleSince = performance.now();
  node.connection?.offTask(record.wireId);
  wakeIfIdle(node);
}

/** `record` waits for another run: from its next attempt, skipping the stream items already delivered. */
export function prepareNextRun(record: TaskRecord): void {
  record.node = undefined;
  record.attempt += 1;
  record.skipItems = record.itemsDelivered;
  record.streams = [];
  record.queuedAt = performance.now();
}

/** The worker grants `n` more items of input stream `stream` of `record`: its pump reads them. */
export function grantInput(record: TaskRecord, stream: number, n: number): void {
  const source = record.streams[stream]?.source;
  if (!source) return;
  let pump = record.pumps.get(stream);
  if (!pump) {
    pump = inputPumpToWorker(source, record.node?.connection, record, stream);
    record.pumps.set(stream, pump);
  }
  pump.grant(n);
}
