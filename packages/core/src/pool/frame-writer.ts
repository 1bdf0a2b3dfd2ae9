/**
 * The outgoing half of a worker connection: messages sent in one turn of the event loop go out as
 * one frame, and while the stream asks to wait for `drain` they gather into the next frames.
 */

import type { Duplex } from "node:stream";
import { type ClientMessage, FrameBuilder } from "../protocol/protocol.js";

/** Batches messages into frames and writes them to `stream`, honouring its backpressure. */
export class FrameWriter {
  readonly #stream: Duplex;
  /** Whether writing is still allowed (the connection is open); checked when a flush runs. */
  readonly #isOpen: () => boolean;
  /** Messages sent since the last flush; one frame. */
  #pending: FrameBuilder | undefined;
  /** Finished frames not yet handed to the stream (while it asks us to wait for `drain`). */
  readonly #frames: Uint8Array[][] = [];
  #flushScheduled = false;
  #waitingForDrain = false;
  #drainWaiters: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  #lastSent = performance.now();
  #bytesSent = 0;

  constructor(stream: Duplex, isOpen: () => boolean) {
    this.#stream = stream;
    this.#isOpen = isOpen;
    stream.on("drain", () => this.#onDrain());
  }

  /** Bytes written (frames: prefixes, headers and bodies). */
  get bytesSent(): number {
    return this.#bytesSent;
  }

  /** When the last frame was written (`performance.now()`). */
  get lastSent(): number {
    return this.#lastSent;
  }

  /** Whether outgoing frames are waiting for the stream to drain. */
  get needsDrain(): boolean {
    return this.#waitingForDrain;
  }

  /** Whether something is about to be written (a flush is due, or frames wait for `drain`). */
  get busy(): boolean {
    return this.#waitingForDrain || this.#flushScheduled;
  }

  /**
   * Adds a message to the current frame, flushed at the end of this turn of the event loop.
   *
   * @throws {SerializationError} when a value cannot be sent (nothing is queued).
   */
  add(message: ClientMessage): void {
    this.#pending ??= new FrameBuilder();
    if (!this.#pending.add(message)) {
      this.#frames.push(this.#pending.finish());
      this.#pending = new FrameBuilder();
      this.#pending.add(message);
    }
    if (!this.#flushScheduled && !this.#waitingForDrain) {
      this.#flushScheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  /** Resolves once every message added so far is handed to the stream and it does not ask to wait. */
  drained(): Promise<void> {
    if (this.#pending !== undefined && !this.#waitingForDrain) this.#flush();
    if (this.#isDrained()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.#drainWaiters.push({ resolve, reject }));
  }

  /** Writes everything queued now, whatever the stream's backpressure (the connection is closing). */
  writeAll(): void {
    this.#sealPending();
    for (const frame of this.#frames.splice(0)) this.#writeFrame(frame);
  }

  /** Drops what is queued and rejects whoever waits for `drain` with `error` (the connection is over). */
  fail(error: Error): void {
    this.#pending = undefined;
    this.#frames.length = 0;
    this.#waitingForDrain = false;
    for (const waiter of this.#drainWaiters.splice(0)) waiter.reject(error);
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (!this.#isOpen()) return;
    this.#sealPending();
    while (!this.#waitingForDrain && this.#frames.length > 0) {
      if (!this.#writeFrame(this.#frames.shift() as Uint8Array[])) this.#waitingForDrain = true;
    }
    if (this.#isDrained()) for (const waiter of this.#drainWaiters.splice(0)) waiter.resolve();
  }

  /** Moves the messages gathered so far into the queue of frames to write. */
  #sealPending(): void {
    if (this.#pending !== undefined && this.#pending.messageCount > 0)
      this.#frames.push(this.#pending.finish());
    this.#pending = undefined;
  }

  /** Writes one frame's buffers; returns what the stream's last `write` said. */
  #writeFrame(buffers: readonly Uint8Array[]): boolean {
    this.#lastSent = performance.now();
    for (const buffer of buffers) this.#bytesSent += buffer.byteLength;
    if (buffers.length === 1) return this.#stream.write(buffers[0]);
    this.#stream.cork();
    let ok = true;
    for (const buffer of buffers) ok = this.#stream.write(buffer);
    this.#stream.uncork();
    return ok;
  }

  #onDrain(): void {
    if (!this.#waitingForDrain) return;
    this.#waitingForDrain = false;
    this.#flush();
  }

  #isDrained(): boolean {
    return this.#pending === undefined && this.#frames.length === 0 && !this.#waitingForDrain;
  }
}
