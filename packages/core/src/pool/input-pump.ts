/**
 * Input streams: a task's streamed argument is read only as the worker grants credit (`pull`), and
 * each item goes back as `in`, the end as `in_end`, a failure as `in_error`.
 */

import type { WireValue } from "../protocol/protocol.js";
import type { WorkerConnection } from "./worker-connection.js";

type PumpMessage = { t: "in"; value: unknown } | { t: "in_end" } | { t: "in_error"; message: string };

/** Reads an input stream's source as the worker grants credit. */
export class InputPump {
  readonly #iterator: AsyncIterator<unknown> | Iterator<unknown>;
  readonly #send: (message: PumpMessage) => void;
  #credit = 0;
  #running = false;
  #finished = false;

  constructor(source: AsyncIterable<unknown> | Iterable<unknown>, send: (message: PumpMessage) => void) {
    this.#send = send;
    this.#iterator =
      Symbol.asyncIterator in source
        ? (source as AsyncIterable<unknown>)[Symbol.asyncIterator]()
        : (source as Iterable<unknown>)[Symbol.iterator]();
  }

  grant(n: number): void {
    this.#credit += n;
    if (!this.#running) void this.#run();
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (this.#credit > 0 && !this.#finished) {
        let next: IteratorResult<unknown>;
        try {
          next = await this.#iterator.next();
        } catch (error) {
          this.#finished = true;
          this.#send({ t: "in_error", message: error instanceof Error ? error.message : String(error) });
          return;
        }
        if (next.done) {
          this.#finished = true;
          this.#send({ t: "in_end" });
          return;
        }
        this.#credit -= 1;
        this.#send({ t: "in", value: next.value });
      }
    } finally {
      this.#running = false;
    }
  }

  /**
   * The task ended before the source did: the source is told (`return()`), as a `for…of` left early
   * tells it. Its own cleanup failing is no failure of the task, which is over: unobserved, it
   * would be an unhandled rejection, which ends the Node process and every pool in it.
   */
  close(): void {
    if (this.#finished) return;
    this.#finished = true;
    try {
      Promise.resolve(this.#iterator.return?.()).catch(() => undefined);
    } catch {
      // a synchronous iterator's return() threw: the same
    }
  }
}

/**
 * A pump sending input stream `index` of `task` to its worker over `connection`: read when sending,
 * `task.wireId` names the current run, and nothing is sent once `task.done` or the connection closed.
 * An item that cannot be encoded ends the stream with `in_error`.
 */
export function inputPumpToWorker(
  source: AsyncIterable<unknown> | Iterable<unknown>,
  connection: WorkerConnection | undefined,
  task: { readonly done: boolean; readonly wireId: string },
  index: number,
): InputPump {
  return new InputPump(source, (input) => {
    if (task.done || !connection?.isOpen) return;
    try {
      if (input.t === "in")
        connection.send({ t: "in", id: task.wireId, stream: index, value: input.value as WireValue });
      else if (input.t === "in_end") connection.send({ t: "in_end", id: task.wireId, stream: index });
      else connection.send({ t: "in_error", id: task.wireId, stream: index, message: input.message });
    } catch (error) {
      connection.send({
        t: "in_error",
        id: task.wireId,
        stream: index,
        message: `cannot send an item: ${(error as Error).message}`,
      });
    }
  });
}
