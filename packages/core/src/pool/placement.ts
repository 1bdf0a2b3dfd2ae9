/**
 * Placement: how many tasks a node may hold when the next to place is a given function's, and which
 * node takes it. A node with an adaptive buffer holds long tasks back, but lets a slot whose task is
 * nearly done take its successor, so the worker never idles between them ({@link AdaptiveSchedule}).
 */

import { type AdaptiveSchedule, PREFETCH_BUDGET_MS } from "./schedule.js";
import type { NodeState, TaskRecord } from "./task-record.js";

/** The measured round trip to `node`'s worker in milliseconds (0 before it is connected). */
export function roundTripOf(node: NodeState): number {
  return node.connection?.roundTripMs ?? 0;
}

/**
 * Tasks `node` may have in flight (nested ones apart) when the next to place is `ref`'s. A task that
 * runs `once` (it may not run again if its node is lost) is never prefetched: it goes only to a free
 * worker slot, where it starts at once, so a node lost while it waits cannot take it down unstarted.
 */
export function slotLimit(schedule: AdaptiveSchedule, node: NodeState, ref: string, once = false): number {
  if (once) return node.workerSlots;
  if (!node.adaptive) return node.capacity;
  const base = schedule.limit(node.capacity, ref, roundTripOf(node));
  return base > node.capacity ? base : node.capacity + nearlyDone(schedule, node, performance.now());
}

/**
 * Long tasks are held back, but not for a round trip: a slot whose task is expected to end within
 * the prefetch budget (plus the round trip to a far node) takes its successor now (at most one per
 * slot), so the worker never idles between long tasks. The expectation is the function's learnt
 * duration.
 */
function nearlyDone(schedule: AdaptiveSchedule, node: NodeState, now: number): number {
  const lead = PREFETCH_BUDGET_MS + roundTripOf(node);
  let count = 0;
  for (const record of node.running.values()) {
    if (record.request.nested) continue;
    const estimate = schedule.estimateMs(record.request.ref);
    if (estimate !== undefined && now >= record.begunAt + estimate - lead) count += 1;
  }
  return Math.min(count, node.capacity);
}

/**
 * With tasks held back: milliseconds until the next running task is due to end (when a slot frees
 * up, see {@link slotLimit}), or undefined when no running task has an expected end still to come.
 */
export function nextDueDelay(
  schedule: AdaptiveSchedule,
  nodes: readonly (NodeState | undefined)[],
  now: number,
): number | undefined {
  let earliest = Number.POSITIVE_INFINITY;
  for (const node of nodes) {
    if (!node?.connection || !node.adaptive) continue;
    const lead = PREFETCH_BUDGET_MS + roundTripOf(node);
    for (const record of node.running.values()) {
      if (record.request.nested) continue;
      const estimate = schedule.estimateMs(record.request.ref);
      if (estimate === undefined) continue;
      // Moments already past were counted when they came; a result wakes the dispatcher after them.
      const due = record.begunAt + estimate - lead;
      if (due > now) earliest = Math.min(earliest, due);
    }
  }
  return earliest === Number.POSITIVE_INFINITY ? undefined : Math.max(1, Math.ceil(earliest - now));
}

/**
 * The next connected node, round robin from index `start`, with a free slot: a nested one, or one
 * of its regular slots for a task of `ref` (one of its worker slots for a task that runs `once`); node
 * `last` only when no other has one. Nodes that are draining take nothing.
 */
export function nextFreeNode(
  schedule: AdaptiveSchedule,
  nodes: readonly (NodeState | undefined)[],
  start: number,
  nested: boolean,
  ref: string,
  last?: number,
  once = false,
): NodeState | undefined {
  const count = nodes.length;
  let lastResort: NodeState | undefined;
  for (let step = 0; step < count; step += 1) {
    const node = nodes[(start + step) % count];
    const free = nested
      ? node !== undefined && node.nestedRunning < node.nestedCapacity
      : node !== undefined && node.running.size - node.nestedRunning < slotLimit(schedule, node, ref, once);
    if (!node?.connection || !free || node.draining) continue;
    if (node.index !== last) return node;
    lastResort = node;
  }
  return lastResort;
}

/** Learns from task `record` ending on adaptive `node` now: its duration for the schedule. */
export function observeTaskEnd(schedule: AdaptiveSchedule, node: NodeState, record: TaskRecord): void {
  const now = performance.now();
  const inFlight = node.running.size - node.nestedRunning;
  schedule.observe(
    record.request.ref,
    record.startedAt,
    now,
    inFlight,
    node.capacity,
    node.lastDone,
    roundTripOf(node),
    record.begunAt,
  );
  node.lastDone = now;
}

/**
 * Task `record`'s run on `node` ends now: when it held one of the worker's slots, the task waiting
 * longest behind it begins now (the worker runs its tasks in order), and its `begunAt` says so.
 */
export function beginNextWaiting(node: NodeState, record: TaskRecord): void {
  if (record.request.nested) return; // nested tasks run on the worker's nested pool
  if (node.running.size - node.nestedRunning <= node.workerSlots) return; // none waits behind it
  let position = 0;
  let held = false;
  for (const task of node.running.values()) {
    if (task.request.nested) continue;
    position += 1;
    if (task === record) {
      if (position > node.workerSlots) return; // it was waiting itself: no slot comes free
      held = true;
    } else if (held && position === node.workerSlots + 1) {
      task.begunAt = Math.max(task.begunAt, performance.now());
      return;
    }
  }
}
