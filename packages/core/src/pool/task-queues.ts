/**
 * The tasks waiting for a slot, and the order they get one in: nested subtasks first (their parents
 * hold slots while they wait), then each node's pinned tasks, then tasks whose node was lost, then
 * the queue. The task manager owns the records; this holds where each one waits.
 */

import type { DispatchNodes } from "./dispatch-nodes.js";
import { Fifo } from "./fifo.js";
import type { AdaptiveSchedule } from "./schedule.js";
import { type NodeState, runsOnce, type TaskRecord } from "./task-record.js";

/**
 * The built-in tasks that move remote references to a task's node while that task holds a slot there
 * waiting for them (`TaskCallbacks.readying`): they take no slot and start first, or such waits could
 * hold every slot the moves need. The worker answers serve and pull on its event loop.
 */
const WITHOUT_SLOT: ReadonlySet<string> = new Set([
  "skyward.refs:serve",
  "skyward.refs:pull",
  "skyward.refs:pickled",
]);

/** Where unstarted tasks wait, by kind. */
export class TaskQueues {
  readonly #nodes: DispatchNodes;
  readonly #schedule: AdaptiveSchedule;
  readonly #queue = new Fifo<TaskRecord>();
  /** Tasks whose node was lost, run again before the queue. */
  readonly #retryQueue = new Fifo<TaskRecord>();
  readonly #nestedQueue = new Fifo<TaskRecord>();
  /** Whether a task may not run again if its node is lost: it waits here for a worker slot, never on a node. */
  readonly #once: (record: TaskRecord) => boolean;

  /** `defaultRetries`: the retries of a task that does not say (read when a task is placed). */
  constructor(nodes: DispatchNodes, schedule: AdaptiveSchedule, defaultRetries: () => number) {
    this.#nodes = nodes;
    this.#schedule = schedule;
    this.#once = (record) => runsOnce(record, defaultRetries());
  }

  /** Top-level tasks waiting for a slot (new and retried; nested and pinned ones not counted). */
  get waiting(): number {
    return this.#queue.size + this.#retryQueue.size;
  }

  /** New tasks waiting for a slot: queued-task pressure, for the autoscaler. */
  get fresh(): number {
    return this.#queue.size;
  }

  /** Queues a new task: on its node if pinned, with the subtasks if nested, else at the queue's end. */
  add(record: TaskRecord): void {
    if (record.request.node !== undefined) {
      const node = this.#nodes.pinnable(record.request.node);
      if (record.request.nested) node.pinnedNested += 1;
      if (WITHOUT_SLOT.has(record.request.ref)) node.pinned.unshift(record);
      else node.pinned.push(record);
    } else if (record.request.nested) this.#nestedQueue.push(record);
    else this.#queue.push(record);
  }

  /** Queues a task taken off a lost (or draining) node: first in line, on the same node if pinned. */
  requeue(node: NodeState, record: TaskRecord): void {
    if (record.request.node !== undefined) {
      if (record.request.nested) node.pinnedNested += 1;
      node.pinned.unshift(record);
    } else if (record.request.nested) this.#nestedQueue.push(record);
    else this.#retryQueue.push(record);
  }

  /** Empties every queue (not the nodes' pinned tasks), returning what waited. */
  drain(): TaskRecord[] {
    return [...this.#retryQueue.drain(), ...this.#queue.drain(), ...this.#nestedQueue.drain()];
  }

  /**
   * Starts waiting tasks while slots are free (`start` sends one to its node). Returns true when a
   * long task was held back for want of a slot: the caller looks again when a running one is due to end.
   */
  dispatch(start: (node: NodeState, record: TaskRecord) => void): boolean {
    const nodes = this.#nodes;
    while (this.#nestedQueue.size > 0) {
      const node = nodes.nextFree(true, "", (this.#nestedQueue.peek() as TaskRecord).request.parentNode);
      if (!node) break;
      const record = this.#nestedQueue.shift() as TaskRecord;
      if (!record.done) start(node, record);
    }
    for (const node of nodes.all) {
      if (!node?.connection || node.draining) continue;
      // Pinned tasks in order; a nested one (a part of a nested broadcast) takes a nested slot, as
      // nested tasks do: a slot here may be held by its parent, or by a peer's part waiting for it.
      while (node.pinned.length > 0 && this.#pinnedFits(node, node.pinned[0] as TaskRecord)) {
        const record = node.pinned.shift() as TaskRecord;
        if (record.request.nested) node.pinnedNested -= 1;
        if (!record.done) start(node, record);
      }
      if (node.pinnedNested > 0 && node.pinned.length > 0 && node.nestedRunning < node.nestedCapacity)
        startNestedBehind(node, start);
    }
    let heldBack = false;
    for (const queue of [this.#retryQueue, this.#queue]) {
      while (queue.size > 0) {
        const next = queue.peek() as TaskRecord;
        const ref = next.request.ref;
        const node = nodes.nextFree(false, ref, undefined, this.#once(next));
        if (!node) {
          heldBack ||= this.#schedule.isLong(ref);
          break;
        }
        const record = queue.shift() as TaskRecord;
        if (!record.done) start(node, record);
      }
    }
    return heldBack;
  }

  /** Whether pinned `record` may start on `node` now (a slot or, nested, a nested slot free). */
  #pinnedFits(node: NodeState, record: TaskRecord): boolean {
    const { nested, ref } = record.request;
    if (nested) return node.nestedRunning < node.nestedCapacity;
    if (WITHOUT_SLOT.has(ref)) return true;
    return node.running.size - node.nestedRunning < this.#nodes.limit(node, ref, this.#once(record));
  }
}

/** Starts the nested tasks pinned to `node` behind a task waiting for a slot, while nested slots are free. */
function startNestedBehind(node: NodeState, start: (node: NodeState, record: TaskRecord) => void): void {
  const waiting: TaskRecord[] = [];
  let nested = 0;
  for (const record of node.pinned.splice(0)) {
    if (record.done) continue;
    if (record.request.nested && node.nestedRunning < node.nestedCapacity) start(node, record);
    else {
      waiting.push(record);
      if (record.request.nested) nested += 1;
    }
  }
  node.pinned.unshift(...waiting);
  node.pinnedNested = nested;
}
