/**
 * The client's own deadlines, checked by the task manager's sweeper: a task whose worker stays
 * silent well past its timeout (the worker enforces timeouts itself and normally reports them), and
 * a task pinned to a lost node that waited too long for its replacement.
 */

import { NodeUnavailableError, TaskTimeoutError } from "../errors/errors.js";
import type { NodeState, TaskRecord } from "./task-record.js";

/**
 * The tasks running on `node` that are `graceSeconds` past their timeout without a word from the
 * worker. A timeout counts from when the task got a worker slot: tasks sent beyond the worker's
 * slots (its buffer) wait there in order, their clocks not started, and each begins as one ahead
 * of it ends (`begunAt`).
 */
export function overdueTasks(node: NodeState, now: number, graceSeconds: number): TaskRecord[] {
  const overdue: TaskRecord[] = [];
  let position = 0;
  for (const record of node.running.values()) {
    // Nested tasks run on the worker's nested pool, not in the line of its slots.
    if (!record.request.nested && ++position > node.workerSlots) continue;
    const { timeout } = record.request;
    // A default timeout may be replaced on the worker by the function's declared one: the
    // worker reports it (a worker that stops answering is a lost connection).
    if (record.request.defaultTimeout) continue;
    if (timeout === null || now - record.begunAt < (timeout + graceSeconds) * 1000) continue;
    overdue.push(record);
  }
  return overdue;
}

/** The error of an overdue task (see {@link overdueTasks}). */
export function silentTimeoutError(record: TaskRecord, node: number): TaskTimeoutError {
  const timeout = record.request.timeout ?? 0;
  return new TaskTimeoutError({
    taskId: record.id,
    timeoutSeconds: timeout,
    message: `${record.request.ref} (task ${record.id}) timed out after ${timeout} s on node ${node} (the worker did not report it)`,
  });
}

/** Takes off `node` (lost) the tasks pinned to it that have waited `waitMs` or more for its replacement. */
export function takeExpiredPinned(node: NodeState, now: number, waitMs: number): TaskRecord[] {
  const expired = node.pinned.filter((record) => now - record.queuedAt >= waitMs);
  if (expired.length === 0) return expired;
  node.pinned.splice(0, node.pinned.length, ...node.pinned.filter((record) => !expired.includes(record)));
  return expired;
}

/** The error of a pinned task whose node did not come back within `waitMs`. */
export function pinnedExpiredError(record: TaskRecord, node: number, waitMs: number): NodeUnavailableError {
  return new NodeUnavailableError({
    node,
    message: `Task ${record.id} (${record.request.ref}) needs node ${node}, which was lost and did not come back within ${Math.round(waitMs / 1000)} s`,
  });
}

/** A task the sweeper fails: `running` ones are on a worker (cancel them there), others waited on a lost node. */
export interface SweptTask {
  readonly record: TaskRecord;
  readonly error: Error;
  readonly running: boolean;
}

/**
 * The tasks past a client deadline on `nodes`: pinned tasks of a lost node that waited `nodeWaitMs`
 * (taken off the node), and running tasks `graceSeconds` past their timeout.
 */
export function sweepDeadlines(
  nodes: Iterable<NodeState | undefined>,
  now: number,
  graceSeconds: number,
  nodeWaitMs: () => number,
): SweptTask[] {
  const swept: SweptTask[] = [];
  for (const node of nodes) {
    if (!node) continue;
    // A node starting for the first time has no such bound: if its start fails, its tasks fail with it.
    if (!node.connection && node.bounded && node.pinned.length > 0) {
      const waitMs = nodeWaitMs();
      for (const record of takeExpiredPinned(node, now, waitMs)) {
        swept.push({ record, error: pinnedExpiredError(record, node.index, waitMs), running: false });
      }
    }
    for (const record of overdueTasks(node, now, graceSeconds)) {
      swept.push({ record, error: silentTimeoutError(record, node.index), running: true });
    }
  }
  return swept;
}
