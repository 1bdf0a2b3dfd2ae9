/**
 * Output line assembly: a worker's `out` messages carry chunks of stdout and stderr; whole lines
 * become `log` events, and a partial line waits for the rest of it, per node, worker and stream.
 */

import type { EventHub } from "../observe/events.js";

/** Assembles workers' output into `log` events of whole lines. */
export class OutputLines {
  readonly #hub: EventHub;
  readonly #poolId: string;
  /** Partial output lines, per node/worker/stream. */
  readonly #partialLines = new Map<string, string>();
  /** Masks the pool's secrets in a whole line, before any listener (console, log file) sees it. */
  readonly #redact: (line: string) => string;

  constructor(hub: EventHub, poolId: string, redact: (line: string) => string = (line) => line) {
    this.#hub = hub;
    this.#poolId = poolId;
    this.#redact = redact;
  }

  /** Takes a chunk of `stream` from `worker` of `node`, printed by task `taskId` if known. */
  write(
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
        line: this.#redact(line),
        ...(taskId ? { taskId } : {}),
      });
    }
  }
}
