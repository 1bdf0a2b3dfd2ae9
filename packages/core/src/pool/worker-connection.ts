/**
 * A client connection to one worker (docs/protocol.md): the handshake (`worker-handshake.ts`),
 * batching of outgoing messages into frames and backpressure (`frame-writer.ts`), dispatch of
 * incoming messages, and heartbeats. It is a transport only — task ids, results and timeouts are
 * the task manager's business.
 *
 * ```ts
 * import { WorkerConnection } from "@skyward/core/protocol";
 *
 * declare const port: number, token: string, signal: AbortSignal;
 * const connection = await WorkerConnection.connect({ host: "127.0.0.1", port }, { token, signal });
 * connection.onTask("t-1", (message) => {
 *   // a result, an error or a stream item of task t-1: message.t
 * });
 * connection.send({ t: "submit", id: "t-1", fn: "tasks:add", args: [2, 3], kwargs: {}, timeout: null, stream: false, worker: null });
 * ```
 */

import type { Duplex } from "node:stream";
import { CancelledError, ConnectionError, ProtocolError } from "../errors/errors.js";
import {
  type ClientMessage,
  type FrameDecoder,
  isKnownMessage,
  type ReceivedMessage,
  type TaskMessage,
  type WelcomeMessage,
  type WorkerMessage,
} from "../protocol/protocol.js";
import { FrameWriter } from "./frame-writer.js";
import { shakeHands, type WorkerConnectionOptions, type WorkerEndpoint } from "./worker-handshake.js";

export type { WorkerConnectionOptions, WorkerEndpoint } from "./worker-handshake.js";

/** Why a connection was lost. */
export type ConnectionLossReason = "socket-error" | "eof" | "protocol-error" | "heartbeat-timeout";

/** A connection lost without `close()`: why, and the error saying so. */
export interface ConnectionLoss {
  /** What happened. */
  readonly reason: ConnectionLossReason;
  /** A `ProtocolError` for `protocol-error`, a `ConnectionError` otherwise. */
  readonly error: ConnectionError | ProtocolError;
}

/** Options of operations on an open connection that wait. */
export interface ConnectionWaitOptions {
  /** Stops waiting. */
  readonly signal?: AbortSignal;
  /** Deadline in milliseconds. */
  readonly timeoutMs?: number;
}

/** Receives the messages of one task. */
export type TaskMessageHandler = (message: TaskMessage) => void;

/** Receives messages that belong to no registered task: `ready`, `pong`, `metric`, `event`, `out` outside a task… */
export type WorkerMessageListener = (message: WorkerMessage) => void;

const defaultCloseTimeoutMs = 5_000;
/** Messages kept for the first general listener; older ones are dropped beyond this. */
const backlogLimit = 1_000;
/** Weight of the newest ping in the smoothed round trip: a few pings follow a changed link, one slow answer does not swing it. */
const ROUND_TRIP_SMOOTHING = 0.25;

type State = "open" | "closing" | "closed";

/** Rethrows a listener's error outside the connection's own code, so it is reported, not swallowed. */
function reportListenerError(error: unknown): void {
  queueMicrotask(() => {
    throw error;
  });
}

/** Waits for `promise` under a signal and a deadline. */
function waitFor<T>(
  promise: Promise<T>,
  options: ConnectionWaitOptions,
  describe: { what: string; host: string; node: number | undefined },
): Promise<T> {
  const { signal, timeoutMs } = options;
  if (signal === undefined && timeoutMs === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      cleanup();
      reject(new CancelledError({ message: `${describe.what} was aborted`, cause: signal?.reason }));
    };
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            cleanup();
            reject(
              new ConnectionError({
                host: describe.host,
                node: describe.node,
                message: `${describe.what} did not finish within ${timeoutMs} ms`,
              }),
            );
          }, timeoutMs);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        cleanup();
        reject(error);
      },
    );
  });
}

/** Calls a listener; what it throws is reported, not passed on (the connection goes on). */
function callListener<Value>(listener: (value: Value) => void, value: Value): void {
  try {
    listener(value);
  } catch (error) {
    reportListenerError(error);
  }
}

/** An open connection to one worker. Create it with {@link WorkerConnection.connect}. */
export class WorkerConnection {
  /** What the worker said in `welcome`. */
  readonly welcome: WelcomeMessage;
  /** The peer's name in errors (`host:port`). */
  readonly host: string;
  /** The node index given to `connect`, if any. */
  readonly node: number | undefined;
  /** Settles when the connection is over: with the loss, or `undefined` after `close()`. Never rejects. */
  readonly closed: Promise<ConnectionLoss | undefined>;

  readonly #stream: Duplex;
  readonly #decoder: FrameDecoder;
  readonly #pingIntervalMs: number;
  readonly #silenceTimeoutMs: number;
  readonly #heartbeat: ReturnType<typeof setInterval>;
  #state: State = "open";
  #loss: ConnectionLoss | undefined;
  #settleClosed!: (loss: ConnectionLoss | undefined) => void;

  readonly #writer: FrameWriter;
  #lastReceived = performance.now();
  #bytesReceived = 0;
  #roundTripMs: number;

  readonly #taskHandlers = new Map<string, TaskMessageHandler>();
  readonly #listeners = new Set<WorkerMessageListener>();
  readonly #lostListeners = new Set<(loss: ConnectionLoss) => void>();
  #backlog: WorkerMessage[] = [];

  private constructor(
    stream: Duplex,
    decoder: FrameDecoder,
    welcome: WelcomeMessage,
    host: string,
    options: WorkerConnectionOptions,
    handshakeMs: number,
  ) {
    this.#stream = stream;
    this.#roundTripMs = handshakeMs;
    this.#decoder = decoder;
    this.welcome = welcome;
    this.host = host;
    this.node = options.node;
    this.#pingIntervalMs = options.pingIntervalMs ?? 5_000;
    this.#silenceTimeoutMs = options.silenceTimeoutMs ?? 30_000;
    this.closed = new Promise((resolve) => {
      this.#settleClosed = resolve;
    });
    this.#writer = new FrameWriter(stream, () => this.#state === "open");
    const tick = Math.max(5, Math.min(this.#pingIntervalMs, this.#silenceTimeoutMs) / 4);
    this.#heartbeat = setInterval(() => this.#checkHeartbeat(), tick);
    this.#heartbeat.unref();
    stream.on("data", (chunk: Uint8Array) => this.#receive(chunk));
    stream.on("end", () => this.#onEnd());
    stream.on("error", (error: Error) => this.#onError(error));
    stream.on("close", () => this.#onClose());
  }

  /**
   * Connects to a worker and performs the handshake: `hello` out, `welcome` (or `reject`) back.
   *
   * @throws {ProtocolError} when the worker rejects the token or speaks another protocol version,
   *   or answers with something other than `welcome`/`reject`.
   * @throws {ConnectionError} when the worker cannot be reached, closes the connection, or does
   *   not answer within `timeoutMs`.
   * @throws {CancelledError} when `signal` aborts.
   */
  static connect(endpoint: WorkerEndpoint, options: WorkerConnectionOptions): Promise<WorkerConnection> {
    return shakeHands(endpoint, options, ({ stream, decoder, welcome, host, after, handshakeMs }) => {
      const connection = new WorkerConnection(stream, decoder, welcome, host, options, handshakeMs);
      for (const message of after) connection.#dispatch(message);
      return connection;
    });
  }

  /** Whether messages can be sent (neither closed, closing nor lost). */
  get isOpen(): boolean {
    return this.#state === "open";
  }

  /** Bytes written to the worker since the handshake (frames: prefixes, headers and bodies). */
  get bytesSent(): number {
    return this.#writer.bytesSent;
  }

  /** Bytes received from the worker since the handshake. */
  get bytesReceived(): number {
    return this.#bytesReceived;
  }

  /** Whether outgoing frames are waiting for the stream to drain. */
  get needsDrain(): boolean {
    return this.#writer.needsDrain;
  }

  /** Why the connection was lost, once it was. */
  get loss(): ConnectionLoss | undefined {
    return this.#loss;
  }

  /**
   * Queues a message. Every message sent in the same turn of the event loop goes out in one frame;
   * while the stream asks to wait for `drain`, messages gather into the next frame.
   *
   * @throws {SerializationError} when a value cannot be sent (nothing is queued).
   * @throws {ConnectionError} when the connection is closed or lost.
   */
  send(message: ClientMessage): void {
    if (this.#state !== "open") {
      throw new ConnectionError({
        host: this.host,
        node: this.node,
        message: `cannot send "${message.t}": the connection to the worker at ${this.host} is ${this.#loss ? "lost" : "closed"}`,
        cause: this.#loss?.error,
      });
    }
    this.#writer.add(message);
  }

  /**
   * Sends a control message (`cancel`, `shutdown`, `release`…) unless the connection is closed or
   * lost, when there is no one left for it to reach. Returns whether it was sent.
   */
  sendIfOpen(message: ClientMessage): boolean {
    if (this.#state !== "open") return false;
    this.send(message);
    return true;
  }

  /** Routes the messages of task `id` to `handler` (replacing an earlier handler for it). */
  onTask(id: string, handler: TaskMessageHandler): void {
    this.#taskHandlers.set(id, handler);
  }

  /** Stops routing the messages of task `id`; later ones go to the general listeners. */
  offTask(id: string): void {
    this.#taskHandlers.delete(id);
  }

  /**
   * Listens to messages that belong to no registered task. Messages that arrived before the first
   * listener are delivered to it (the latest 1 000). Returns a function that stops listening.
   */
  onMessage(listener: WorkerMessageListener): () => void {
    this.#listeners.add(listener);
    if (this.#backlog.length > 0) {
      const backlog = this.#backlog;
      this.#backlog = [];
      queueMicrotask(() => {
        for (const message of backlog) this.#deliver(message);
      });
    }
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Listens for the connection being lost (socket error, end of stream, protocol error, silence);
   * not called after `close()`. Called at once when the connection is already lost. Returns a
   * function that stops listening.
   */
  onLost(listener: (loss: ConnectionLoss) => void): () => void {
    if (this.#loss !== undefined) {
      const loss = this.#loss;
      queueMicrotask(() => listener(loss));
      return () => {};
    }
    this.#lostListeners.add(listener);
    return () => {
      this.#lostListeners.delete(listener);
    };
  }

  /**
   * Resolves once every message sent so far has been handed to the stream and it does not ask to
   * wait for `drain`.
   *
   * @throws {ConnectionError} when the connection is lost first, or the deadline passes.
   * @throws {CancelledError} when `signal` aborts.
   */
  drain(options: ConnectionWaitOptions = {}): Promise<void> {
    if (this.#loss !== undefined) return Promise.reject(this.#loss.error);
    return waitFor(this.#writer.drained(), options, {
      what: "waiting for the connection to drain",
      host: this.host,
      node: this.node,
    });
  }

  /**
   * Closes the connection: writes what is queued, ends the stream and waits for it to close
   * (destroying it at the deadline, default 5 s, or when `signal` aborts). Never rejects.
   */
  async close(options: ConnectionWaitOptions = {}): Promise<void> {
    if (this.#state === "open") {
      this.#state = "closing";
      clearInterval(this.#heartbeat);
      this.#writer.writeAll();
      this.#stream.end();
    }
    try {
      await waitFor(
        this.closed,
        { timeoutMs: options.timeoutMs ?? defaultCloseTimeoutMs, signal: options.signal },
        { what: "closing the connection", host: this.host, node: this.node },
      );
    } catch {
      this.#stream.destroy();
      this.#finish(undefined);
    }
  }

  // ——————————————————————————————————————————————————————————————————————————————— incoming

  #receive(chunk: Uint8Array): void {
    this.#lastReceived = performance.now();
    this.#bytesReceived += chunk.byteLength;
    if (this.#state === "closed") return;
    let frames: ReceivedMessage[][];
    try {
      frames = this.#decoder.push(chunk);
    } catch (error) {
      this.#lose("protocol-error", error as ProtocolError);
      return;
    }
    for (const frame of frames) {
      for (const message of frame) {
        // A handler may have closed the connection, or the dispatch may have lost it.
        if ((this.#state as State) === "closed") return;
        this.#dispatch(message);
      }
    }
  }

  #dispatch(message: ReceivedMessage): void {
    if (!isKnownMessage(message)) return; // newer optional messages: ignored
    switch (message.t) {
      case "ping":
        if (this.#state === "open") this.send({ t: "pong", ts: message.ts });
        return;
      case "result":
      case "item":
      case "end":
      case "error":
      case "pull":
      case "subtask":
      case "subcancel":
      case "withdrawn":
      case "out": {
        const handler = message.id === null ? undefined : this.#taskHandlers.get(message.id);
        if (handler === undefined) this.#deliver(message);
        else callListener(handler, message);
        return;
      }
      case "pong":
        this.#measureRoundTrip(message.ts);
        this.#deliver(message);
        return;
      case "ready":
      case "coll_answer":
      case "reject": // after the handshake: the worker refused `cluster` settings, and closes
      case "metric":
      case "event":
        this.#deliver(message);
        return;
      default:
        this.#lose(
          "protocol-error",
          new ProtocolError({
            message: `the worker at ${this.host} sent an unexpected "${message.t}" message`,
          }),
        );
    }
  }

  #deliver(message: WorkerMessage): void {
    if (this.#listeners.size === 0) {
      this.#backlog.push(message);
      if (this.#backlog.length > backlogLimit) this.#backlog.shift();
      return;
    }
    for (const listener of this.#listeners) callListener(listener, message);
  }

  // —————————————————————————————————————————————————————————————————————————————— liveness

  /**
   * The round trip to the worker, in milliseconds: first the handshake's (`hello` to `welcome`),
   * then smoothed over the answers to this side's pings. The schedule sizes the node's in-flight
   * window by it (a far worker needs more tasks on the way to stay busy).
   */
  get roundTripMs(): number {
    return this.#roundTripMs;
  }

  #measureRoundTrip(sentAt: number): void {
    const sample = Date.now() - sentAt;
    // A pong to the other side's ping, or a clock step, gives nothing to learn from.
    if (!Number.isFinite(sample) || sample < 0 || sample > this.#silenceTimeoutMs) return;
    this.#roundTripMs += ROUND_TRIP_SMOOTHING * (sample - this.#roundTripMs);
  }

  #checkHeartbeat(): void {
    if (this.#state !== "open") return;
    const now = performance.now();
    const silence = now - this.#lastReceived;
    if (silence >= this.#silenceTimeoutMs) {
      this.#lose(
        "heartbeat-timeout",
        new ConnectionError({
          host: this.host,
          node: this.node,
          message: `the worker at ${this.host} sent nothing for ${Math.round(silence)} ms (limit ${this.#silenceTimeoutMs} ms)`,
        }),
      );
      return;
    }
    if (now - this.#writer.lastSent >= this.#pingIntervalMs && !this.#writer.busy) {
      this.send({ t: "ping", ts: Date.now() });
    }
  }

  #onEnd(): void {
    if (this.#state !== "open") return;
    const pending = this.#decoder.pendingBytes;
    this.#lose(
      "eof",
      new ConnectionError({
        host: this.host,
        node: this.node,
        message:
          pending > 0
            ? `the worker at ${this.host} closed the connection in the middle of a frame (${pending} bytes of a truncated frame)`
            : `the worker at ${this.host} closed the connection`,
      }),
    );
  }

  #onError(error: Error): void {
    if (this.#state === "open") {
      this.#lose(
        "socket-error",
        new ConnectionError({
          host: this.host,
          node: this.node,
          message: `the connection to the worker at ${this.host} failed: ${error.message}`,
          cause: error,
        }),
      );
    } else this.#finish(undefined);
  }

  #onClose(): void {
    if (this.#state === "open") this.#onEnd();
    else this.#finish(undefined);
  }

  #lose(reason: ConnectionLossReason, error: ConnectionError | ProtocolError): void {
    if (this.#state === "closed") return;
    const loss: ConnectionLoss = { reason, error };
    this.#loss = loss;
    this.#stream.destroy();
    this.#finish(loss);
    for (const listener of this.#lostListeners) callListener(listener, loss);
    this.#lostListeners.clear();
  }

  #finish(loss: ConnectionLoss | undefined): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    clearInterval(this.#heartbeat);
    const error =
      loss?.error ??
      new ConnectionError({
        host: this.host,
        node: this.node,
        message: `the connection to ${this.host} was closed`,
      });
    this.#writer.fail(error);
    this.#settleClosed(loss);
  }
}
