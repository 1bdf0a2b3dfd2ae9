/**
 * The handshake that opens a worker connection (docs/protocol.md): `hello` out with the pool's
 * token, `welcome` (or `reject`) back, under a deadline and a signal. Messages that came in the same
 * chunk after `welcome` are handed on with it.
 */

import { connect as connectSocket } from "node:net";
import type { Duplex } from "node:stream";
import { CancelledError, ConnectionError, ProtocolError } from "../errors/errors.js";
import {
  type ClientMessage,
  encodeFrame,
  FrameDecoder,
  isKnownMessage,
  PROTOCOL_VERSION,
  type ReceivedMessage,
  type WelcomeMessage,
} from "../protocol/protocol.js";
import { version } from "../version.js";

const defaultTimeoutMs = 30_000;

/** Where the worker is: a TCP address, or an already open stream (an SSH tunnel's channel). */
export type WorkerEndpoint =
  | { readonly host: string; readonly port: number }
  | {
      readonly stream: Duplex;
      /** How to name the peer in errors (`node-1 via ssh`); `stream` when omitted. */
      readonly host?: string;
    };

/** Options of {@link WorkerConnection.connect}. */
export interface WorkerConnectionOptions {
  /** The pool's secret token, sent in `hello`. */
  readonly token: string;
  /** Aborts connecting (not the connection once made: use `close()` for that). */
  readonly signal?: AbortSignal;
  /** Deadline for connecting and the handshake, in milliseconds. Default 30 000. */
  readonly timeoutMs?: number;
  /** Send a `ping` after this long without sending anything, in milliseconds. Default 5 000. */
  readonly pingIntervalMs?: number;
  /** Consider the connection lost after this long without receiving anything, in milliseconds. Default 30 000. */
  readonly silenceTimeoutMs?: number;
  /** The node index, for errors. */
  readonly node?: number;
  /** The client name sent in `hello`. Default `skyward-ts/<version>`. */
  readonly client?: string;
}

/** What a completed handshake hands the connection. */
export interface Handshake {
  readonly stream: Duplex;
  /** The decoder that read `welcome`: it holds any partial frame that followed. */
  readonly decoder: FrameDecoder;
  readonly welcome: WelcomeMessage;
  /** The peer's name in errors. */
  readonly host: string;
  /** Messages that arrived after `welcome` in the same chunk. */
  readonly after: readonly ReceivedMessage[];
  /** Milliseconds from `hello` leaving (once the socket is connected) to `welcome` read: the first round trip. */
  readonly handshakeMs: number;
}

/**
 * Connects to `endpoint` and performs the handshake, then calls `open` at once (synchronously,
 * before the stream's next chunk) and resolves with what it returns. Errors: see
 * `WorkerConnection.connect`.
 */
export function shakeHands<T>(
  endpoint: WorkerEndpoint,
  options: WorkerConnectionOptions,
  open: (handshake: Handshake) => T,
): Promise<T> {
  const host = "stream" in endpoint ? (endpoint.host ?? "stream") : `${endpoint.host}:${endpoint.port}`;
  const node = options.node;
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  const { signal } = options;
  if (signal?.aborted) {
    return Promise.reject(
      new CancelledError({
        message: `connecting to the worker at ${host} was aborted`,
        cause: signal.reason,
      }),
    );
  }
  const stream: Duplex =
    "stream" in endpoint
      ? endpoint.stream
      : connectSocket({ host: endpoint.host, port: endpoint.port, noDelay: true });
  const withNoDelay = stream as Duplex & { setNoDelay?: (noDelay: boolean) => unknown };
  if (typeof withNoDelay.setNoDelay === "function") withNoDelay.setNoDelay(true);

  return new Promise<T>((resolve, reject) => {
    const decoder = new FrameDecoder();
    let settled = false;
    const cleanup = () => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      stream.off("data", onData);
      stream.off("error", onError);
      stream.off("end", onEnd);
      stream.off("close", onEnd);
    };
    const fail = (error: Error) => {
      if (settled) return;
      cleanup();
      stream.destroy();
      reject(error);
    };
    const connectionError = (message: string, cause?: unknown) =>
      new ConnectionError({ host, node, message, cause });
    const onAbort = () =>
      fail(
        new CancelledError({
          message: `connecting to the worker at ${host} was aborted`,
          cause: signal?.reason,
        }),
      );
    const onError = (error: Error) =>
      fail(connectionError(`could not connect to the worker at ${host}: ${error.message}`, error));
    const onEnd = () =>
      fail(connectionError(`the worker at ${host} closed the connection before answering "hello"`));
    const timer = setTimeout(
      () =>
        fail(connectionError(`the worker at ${host} did not complete the handshake within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onData = (chunk: Uint8Array) => {
      let frames: ReceivedMessage[][];
      try {
        frames = decoder.push(chunk);
      } catch (error) {
        fail(error as ProtocolError);
        return;
      }
      let welcome: WelcomeMessage | undefined;
      const after: ReceivedMessage[] = [];
      for (const message of frames.flat()) {
        if (welcome !== undefined) {
          after.push(message);
          continue;
        }
        if (!isKnownMessage(message)) continue;
        if (message.t === "reject") {
          fail(
            new ProtocolError({
              message: `the worker at ${host} rejected the connection: ${message.reason}`,
            }),
          );
          return;
        }
        if (message.t !== "welcome") {
          fail(
            new ProtocolError({
              message: `the worker at ${host} answered "hello" with "${message.t}" instead of "welcome"`,
            }),
          );
          return;
        }
        if (message.version !== PROTOCOL_VERSION) {
          fail(
            new ProtocolError({
              message: `the worker at ${host} speaks protocol version ${message.version}; this client speaks ${PROTOCOL_VERSION}`,
            }),
          );
          return;
        }
        welcome = message;
      }
      if (welcome === undefined) return;
      cleanup();
      // Opened here, in the same turn: a chunk that arrives next finds the connection's own listener.
      resolve(open({ stream, decoder, welcome, host, after, handshakeMs: performance.now() - helloSentAt }));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("data", onData);
    stream.on("error", onError);
    stream.on("end", onEnd);
    stream.on("close", onEnd);
    const hello: ClientMessage = {
      t: "hello",
      version: PROTOCOL_VERSION,
      token: options.token,
      client: options.client ?? `skyward-ts/${version}`,
    };
    // A socket still connecting holds `hello` until it is connected: the round trip starts then.
    let helloSentAt = performance.now();
    if ((stream as Duplex & { connecting?: boolean }).connecting === true) {
      stream.once("connect", () => {
        helloSentAt = performance.now();
      });
    }
    for (const buffer of encodeFrame([hello])) stream.write(buffer);
  });
}
