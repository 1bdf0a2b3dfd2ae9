/**
 * Output line assembly: a worker's `out` messages carry chunks of stdout and stderr; whole lines
 * become `log` events, and a partial line waits for the rest of it, per node, worker, stream and
 * task. A task's partial line ends with the task ({@link OutputLines.end}).
 */

import type { EventHub } from "../observe/events.js";

/**
 * What a terminal shows of a line that carriage returns redraw (a progress bar: tqdm writes
 * `\r 10%|█` then `\r 20%|██` …): its last drawing; a line's own `\r` before its `\n` (Windows line
 * ends) is no redraw.
 */
function lastDrawing(line: string): string {
  const body = line.endsWith("\r") ? line.slice(0, -1) : line;
  return body.slice(body.lastIndexOf("\r") + 1);
}

/**
 * A partial line with the drawings a later `\r` has replaced left out (a bar redrawn for hours would
 * otherwise grow without bound, and be scanned again at each chunk). A final `\r` is kept: it may be
 * the first half of a `\r\n`.
 */
function withoutReplacedDrawings(partial: string): string {
  return partial.slice(partial.lastIndexOf("\r", partial.length - 2) + 1);
}

/** A line waiting for its end. */
interface PartialLine {
  readonly node: number;
  readonly worker: number | null;
  readonly stream: "stdout" | "stderr";
  readonly taskId: string | undefined;
  text: string;
}

/** Assembles workers' output into `log` events of whole lines. */
export class OutputLines {
  readonly #hub: EventHub;
  readonly #poolId: string;
  /** Partial output lines, per node/worker/stream/task. */
  readonly #partialLines = new Map<string, PartialLine>();
  /** Lines are emitted whole, so that the hub's mask (the pool's secrets) sees a secret split across chunks whole. */
  constructor(hub: EventHub, poolId: string) {
    this.#hub = hub;
    this.#poolId = poolId;
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
    // The task is part of the key: one task's unfinished line is never the start of the next one's.
    const key = `${node}/${worker}/${stream}/${taskId ?? ""}`;
    const partial = this.#partialLines.get(key);
    const lines = `${partial?.text ?? ""}${data}`.split("\n");
    const rest = withoutReplacedDrawings(lines.pop() ?? "");
    if (rest === "") this.#partialLines.delete(key);
    else if (partial) partial.text = rest;
    else this.#partialLines.set(key, { node, worker, stream, taskId, text: rest });
    for (const line of lines) this.#emit(node, worker, stream, lastDrawing(line), taskId);
  }

  /**
   * Task `taskId` ended: what it printed last without a line break is a line of its own now (a
   * terminal shows it too), rather than waiting for a newline that will not come.
   */
  end(taskId: string): void {
    for (const [key, partial] of this.#partialLines) {
      if (partial.taskId !== taskId) continue;
      this.#partialLines.delete(key);
      this.#emit(partial.node, partial.worker, partial.stream, lastDrawing(partial.text), taskId);
    }
  }

  #emit(
    node: number,
    worker: number | null,
    stream: "stdout" | "stderr",
    line: string,
    taskId: string | undefined,
  ): void {
    this.#hub.emit({
      type: "log",
      timestamp: Date.now(),
      poolId: this.#poolId,
      node,
      worker: worker ?? 0,
      stream,
      line,
      ...(taskId ? { taskId } : {}),
    });
  }
}
