/**
 * Retrying tasks whose node was lost: whether a task may run again, and the typed error of one that
 * may not. A task runs again elsewhere (a pinned one: on its node's replacement) up to its retry
 * count, unless running it twice could be wrong: it opted out, it is a stream that already yielded
 * (and did not opt in to a restart), or it read from an input stream that cannot be read again.
 */
import { TaskInterruptedError, type TaskInterruptionReason } from "../errors/errors.js";

/** What the retry decision needs to know about a task whose node was lost. */
export interface InterruptedTask {
  readonly id: string;
  readonly ref: string;
  /** Attempts so far, the interrupted one included (the first run is attempt 1). */
  readonly attempt: number;
  /** How many times it may run again. */
  readonly retries: number;
  readonly stream: boolean;
  /** Stream items delivered to the caller so far. */
  readonly itemsDelivered: number;
  /** Whether a stream may start over after delivering items (they are then skipped). */
  readonly restartStream: boolean;
  /** Whether it pulled items from an input stream (those cannot be pulled again). */
  readonly inputConsumed: boolean;
}

/** Whether an interrupted task runs again, and if not, why. */
export type RetryDecision =
  | { readonly retry: true }
  | { readonly retry: false; readonly reason: TaskInterruptionReason };

/** Decides whether a task whose node was lost runs again. */
export function decideRetry(task: InterruptedTask): RetryDecision {
  if (task.retries === 0) return { retry: false, reason: "retry-disabled" };
  if (task.attempt > task.retries) return { retry: false, reason: "retries-exhausted" };
  if (task.inputConsumed) return { retry: false, reason: "input-consumed" };
  if (task.stream && task.itemsDelivered > 0 && !task.restartStream)
    return { retry: false, reason: "stream-started" };
  return { retry: true };
}

const explanations: Record<TaskInterruptionReason, (task: InterruptedTask) => string> = {
  "retry-disabled": () => "it does not run twice (its retry policy is false or { retries: 0 })",
  "retries-exhausted": (task) => `it ran ${task.attempt} times, its retries (${task.retries}) are used up`,
  "stream-started": (task) =>
    `it had yielded ${task.itemsDelivered} items; pass withRetry({ restartStream: true }) to start it over`,
  "input-consumed": () => "it had read from an input stream, which cannot be read again",
};

/** The error of an interrupted task that does not run again. */
export function interruptedError(
  task: InterruptedTask,
  reason: TaskInterruptionReason,
  node: number,
  lost: string,
): TaskInterruptedError {
  return new TaskInterruptedError({
    taskId: task.id,
    node,
    reason,
    attempts: task.attempt,
    message: `Task ${task.id} (${task.ref}) was interrupted: node ${node} was lost (${lost}), and it was not run again: ${explanations[reason](task)}`,
  });
}
