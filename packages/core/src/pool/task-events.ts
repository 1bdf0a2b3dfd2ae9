/**
 * The task events a pool emits (`task.queued`, `task.started`, `task.completed`, `task.failed`,
 * `task.cancelled`), each built only when someone listens to it.
 */

import type { EventHub } from "../observe/events.js";
import type { TaskRecord } from "./task-record.js";

/** Emits one pool's task events. */
export class TaskEvents {
  readonly #hub: EventHub;
  readonly #poolId: string;
  /** A failure's message is masked by the hub (the pool's secrets), before any listener sees it. */
  constructor(hub: EventHub, poolId: string) {
    this.#hub = hub;
    this.#poolId = poolId;
  }

  queued(taskId: string, name: string): void {
    if (!this.#hub.listensTo("task.queued")) return;
    this.#hub.emit({ type: "task.queued", timestamp: Date.now(), poolId: this.#poolId, taskId, name });
  }

  started(record: TaskRecord, node: number): void {
    if (!this.#hub.listensTo("task.started")) return;
    this.#hub.emit({
      type: "task.started",
      timestamp: Date.now(),
      poolId: this.#poolId,
      taskId: record.id,
      name: record.request.ref,
      node,
      attempt: record.attempt,
    });
  }

  completed(record: TaskRecord): void {
    if (!this.#hub.listensTo("task.completed")) return;
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

  failed(record: TaskRecord, node: number, type: string, text: string, willRetry: boolean): void {
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

  cancelled(record: TaskRecord, node: number | null): void {
    if (!this.#hub.listensTo("task.cancelled")) return;
    this.#hub.emit({
      type: "task.cancelled",
      timestamp: Date.now(),
      poolId: this.#poolId,
      taskId: record.id,
      name: record.request.ref,
      node,
    });
  }
}
