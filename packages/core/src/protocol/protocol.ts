/**
 * The wire protocol's codec (docs/protocol.md): message types, value encoding and frames.
 *
 * A frame is `u32 header length | u32 body length | JSON header | binary body`. The header is an
 * array of messages, preceded by a segment table `{"seg": [len, …]}` when the frame carries binary
 * segments. Values are JSON plus tagged forms: `$b` (bytes), `$f` (non-finite float), `$i` (integer
 * outside ±(2^53 − 1)), `$d` (a dict with `$` keys, escaped) and `$s` (an input stream).
 *
 * This side's choices where JavaScript differs from JSON:
 * - `undefined` behaves as in `JSON.stringify`: an object property holding it is left out, an
 *   array element holding it is sent as `null`.
 * - A `Date` is sent as its ISO 8601 string (`toISOString()`); an invalid date cannot be sent.
 * - An `ArrayBuffer` is sent as bytes, like a `Uint8Array` (and a Node `Buffer`, which is one).
 * - A `bigint` within ±(2^53 − 1) is sent as a plain number, outside as `$i`; a received `$i` gives
 *   a `bigint` outside that range and a number within it.
 * - Functions, symbols, `Map`, `Set`, typed arrays other than `Uint8Array`, and instances of any
 *   class other than `Object`, `Array`, `Uint8Array`, `Date` and {@link InputStream} cannot be sent:
 *   encoding throws a `SerializationError` whose message starts with where the value was
 *   (`args[1].model: cannot send a value of type Model`).
 * - Object keys go out in JavaScript's own-property order, which is insertion order except that
 *   array-index keys (`"0"`, `"17"`) come first.
 *
 * Bytes are not copied on the way out: the frame references the caller's `Uint8Array`s, which must
 * not change until the frame has been written. Received bytes are views into the received data.
 */

import { Buffer, isUtf8 } from "node:buffer";
import { ProtocolError, SerializationError } from "../errors/errors.js";
import { formatPath } from "../errors/validation.js";
import {
  decodeArray,
  decodeObject,
  decodeRemoteRef,
  decodeTable,
  encodeArrowTable,
  encodeNDArray,
  encodePyObject,
  encodeRefArgument,
  isArrowTable,
  NDArray,
  PyObject,
  RefArgument,
  RemoteRef,
  type TypedArray,
} from "./values.js";

/** The protocol version this side speaks. */
export const PROTOCOL_VERSION = 1;

/** The largest header a frame may have, in bytes (64 MiB). */
export const MAX_HEADER_BYTES = 64 * 1024 * 1024;

/** The largest body a frame may have, in bytes (2 GiB). */
export const MAX_BODY_BYTES = 2 * 1024 * 1024 * 1024;

// ————————————————————————————————————————————————————————————————————————————————————— values

/**
 * An argument stream of a task, sent as `{"$s": index}`. The client marks each streamed argument
 * with one (see {@link markInputStreams}) and keeps its `source` to answer the worker's `pull`s with
 * `in` messages; a decoded `$s` gives an `InputStream` without a source.
 */
export class InputStream {
  /** The stream's number within its task (`k` in `{"$s": k}`). */
  readonly index: number;
  /** The items to send, on the side that owns the stream. */
  readonly source: AsyncIterable<unknown> | Iterable<unknown> | undefined;

  constructor(index: number, source?: AsyncIterable<unknown> | Iterable<unknown>) {
    if (!Number.isSafeInteger(index) || index < 0) {
      throw new RangeError(`an input stream index must be a non-negative integer, received ${index}`);
    }
    this.index = index;
    this.source = source;
  }
}

/**
 * A value as it travels: JSON, plus bytes, `bigint`s, non-finite numbers (as numbers) and input
 * streams. Objects may have keys starting with `$` (they are escaped on the wire).
 */
export type WireValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | InputStream
  | readonly WireValue[]
  | WireObject;

/** An object value: string keys to values. */
export interface WireObject {
  readonly [key: string]: WireValue;
}

// ——————————————————————————————————————————————————————————————————————————————————— messages

/** `hello` — the client's first message. */
export interface HelloMessage {
  readonly t: "hello";
  /** The protocol version the client speaks ({@link PROTOCOL_VERSION}). */
  readonly version: number;
  /** The pool's secret token. */
  readonly token: string;
  /** The client's name and version, e.g. `skyward-ts/0.1.0`. */
  readonly client: string;
}

/** The worker's executor kind. */
export type WorkerExecutor = "thread" | "process";

/** `welcome` — the worker accepted the `hello`. */
export interface WelcomeMessage {
  readonly t: "welcome";
  /** The protocol version the worker speaks. */
  readonly version: number;
  /** The worker's node index. */
  readonly node: number;
  /** The worker's process id. */
  readonly pid: number;
  /** The node's host name. */
  readonly hostname: string;
  /** The worker's Python version (`3.11.7`). */
  readonly python: string;
  /** The executor running tasks. */
  readonly executor: WorkerExecutor;
  /** Concurrent task slots. */
  readonly concurrency: number;
  /** Extra prefetched slots. */
  readonly buffer: number;
  /** Ids of finished tasks whose results the worker holds from an earlier connection. */
  readonly results: readonly string[];
  /**
   * The `cluster` message the worker runs with, less its `env`; null before it has one (the Python
   * worker sends it; a pool attaching to a detached pool's workers sends it back to them).
   */
  readonly cluster?: Omit<ClusterMessage, "env"> | null;
}

/** `reject` — the worker refused the `hello` and closes the connection. */
export interface RejectMessage {
  readonly t: "reject";
  /** Why (`bad token`, `unsupported version 2`). */
  readonly reason: string;
}

/** One node of the cluster, as `cluster.peers` lists it. */
export interface ClusterPeer {
  /** The node index. */
  readonly node: number;
  /** The node's private address. */
  readonly private_ip: string;
  /** The node's public address, when it has one. */
  readonly public_ip: string | null;
}

/** `cluster` — the client tells a node its place in the cluster. */
export interface ClusterMessage {
  readonly t: "cluster";
  /** This node's index. */
  readonly node: number;
  /** How many nodes the pool has. */
  readonly total_nodes: number;
  /** Worker slots per node. */
  readonly workers_per_node: number;
  /**
   * Whether the node runs one worker per accelerator and checks it has that many GPUs before it is
   * ready (else it answers `reject`). Absent: false.
   */
  readonly check_accelerators?: boolean;
  /**
   * Whether each worker is pinned to the accelerator of its index (one worker per accelerator):
   * worker `i` of a node sees only device `i` (`CUDA_VISIBLE_DEVICES`). Absent: false.
   */
  readonly pin_accelerators?: boolean;
  /** The head node's private address. */
  readonly head_addr: string;
  /** The port reserved on the head for distributed rendezvous. */
  readonly head_port: number;
  /** The pool's job id. */
  readonly job_id: string;
  /** Every node. */
  readonly peers: readonly ClusterPeer[];
  /** Accelerators per node. */
  readonly accelerators: number;
  /** The accelerator description, or `null` for none. */
  readonly accelerator: WireValue;
  /** Network details, or `null`. */
  readonly network: WireValue;
  /** Environment variables for tasks. */
  readonly env: Readonly<Record<string, string>>;
  /** The plugins' worker modules, in plugin order (absent: none). */
  readonly plugins?: readonly ClusterPlugin[];
  /** The metrics collectors the worker samples (absent, `null` or `[]`: none). */
  readonly metrics?: readonly ClusterMetric[] | null;
}

/** A metrics collector, as the `cluster` message names it (the fields of a `sky.metrics` descriptor). */
export interface ClusterMetric {
  /** Which collector: `cpu`, `memory`, `gpu`, `disk`, `custom`, … */
  readonly collector: string;
  /** The metric's name in `metric` messages. */
  readonly name: string;
  /** Seconds between two samples. */
  readonly interval: number;
  /** The path whose filesystem `disk` measures. */
  readonly path?: string;
  /** The shell command a `custom` collector runs. */
  readonly command?: string;
}

/** A plugin's worker module, as the `cluster` message names it. */
export interface ClusterPlugin {
  /** The plugin's name, for errors. */
  readonly name: string;
  /** The Python module the worker imports (its hooks: `around_app`, `around_process`, `decorate`). */
  readonly module: string;
  /** The configuration handed to its hooks. */
  readonly config: WireValue;
}

/** `ready` — the worker applied `cluster` and runs tasks. */
export interface ReadyMessage {
  readonly t: "ready";
}

/** `submit` — run a function. */
export interface SubmitMessage {
  readonly t: "submit";
  /** The task id, unique per connection. */
  readonly id: string;
  /** The callable, `module:qualname`. */
  readonly fn: string;
  /** Positional arguments. */
  readonly args: readonly WireValue[];
  /** Keyword arguments. */
  readonly kwargs: WireObject;
  /** Seconds, or `null` for none. */
  readonly timeout: number | null;
  /** Whether the function is a generator whose items come back as `item` messages. */
  readonly stream: boolean;
  /** The worker slot to pin the task to, or `null` for any. */
  readonly worker: number | null;
  /** A task run for another task (nested dispatch): it runs on the worker's separate nested pool. */
  readonly nested?: boolean;
  /**
   * `timeout` is the pool's default, not one the call set: a function declared with
   * `@sky.function(timeout=…)` runs under its own timeout instead.
   */
  readonly default_timeout?: boolean;
  /** Keep the result on the node and answer with a remote reference `{"$r": {id, node, type, size}}`. */
  readonly keep?: boolean;
  /** The arguments hold remote references (`$r`): the worker puts the objects it keeps in their place. */
  readonly refs?: boolean;
}

/** `subtask` — a running task asks the client to run another function across the pool (nested dispatch). */
export interface SubtaskMessage {
  readonly t: "subtask";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number, unique within its parent. */
  readonly sub: number;
  /** The callable, `module:qualname`. */
  readonly fn: string;
  /** Positional arguments. */
  readonly args: readonly WireValue[];
  /** Keyword arguments. */
  readonly kwargs: WireObject;
  /** The node to run it on, or `null` for any. */
  readonly node: number | null;
}

/** `subresult` — a subtask returned. */
export interface SubresultMessage {
  readonly t: "subresult";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number. */
  readonly sub: number;
  /** The returned value. */
  readonly value: WireValue;
}

/** `suberror` — a subtask failed. */
export interface SuberrorMessage {
  readonly t: "suberror";
  /** The parent task's id. */
  readonly id: string;
  /** The subtask's number. */
  readonly sub: number;
  /** What went wrong, as in `error`. */
  readonly kind: TaskErrorKind;
  /** The exception's qualified type name. */
  readonly type: string;
  /** The exception's message. */
  readonly message: string;
  /** The remote traceback. */
  readonly traceback: string;
  /** The node it ran on, or -1 when it never ran. */
  readonly node: number;
}

/** `cancel` — cancel a task. */
export interface CancelMessage {
  readonly t: "cancel";
  /** The task id. */
  readonly id: string;
}

/**
 * `withdraw` — the node is going away (an interruption notice): hand back the listed tasks that
 * have not started, so they run elsewhere. Each one handed back is answered with `withdrawn`.
 */
export interface WithdrawMessage {
  readonly t: "withdraw";
  /** The task ids. */
  readonly ids: readonly string[];
}

/** `withdrawn` — the worker dropped a task that had not started, as `withdraw` asked; it never ran. */
export interface WithdrawnMessage {
  readonly t: "withdrawn";
  /** The task id. */
  readonly id: string;
}

/** `result` — a task returned. */
export interface ResultMessage {
  readonly t: "result";
  /** The task id. */
  readonly id: string;
  /** The returned value. */
  readonly value: WireValue;
}

/** `item` — a streaming task yielded. */
export interface ItemMessage {
  readonly t: "item";
  /** The task id. */
  readonly id: string;
  /** The item's position in the stream, from 0. */
  readonly seq: number;
  /** The yielded value. */
  readonly value: WireValue;
}

/** `end` — a streaming task finished. */
export interface EndMessage {
  readonly t: "end";
  /** The task id. */
  readonly id: string;
  /** Items a detached worker could not keep for the client (over its byte cap); absent when none. */
  readonly dropped?: number;
}

/** Why a task failed, as `error.kind` says. */
export type TaskErrorKind =
  | "exception"
  | "not_found"
  | "serialization"
  | "timeout"
  | "cancelled"
  | "worker_died";

/** `error` — a task failed. */
export interface TaskErrorMessage {
  readonly t: "error";
  /** The task id. */
  readonly id: string;
  /** What went wrong. */
  readonly kind: TaskErrorKind;
  /** The exception's qualified type name. */
  readonly type: string;
  /** The exception's message. */
  readonly message: string;
  /** The remote traceback, as Python formatted it. */
  readonly traceback: string;
  /** The node the task ran on. */
  readonly node: number;
  /** Stream items a detached worker could not keep for the client (over its byte cap); absent when none. */
  readonly dropped?: number;
}

/** `out` — captured stdout or stderr. */
export interface OutputMessage {
  readonly t: "out";
  /** The task that wrote it, or `null` for output written outside a task. */
  readonly id: string | null;
  /** Which stream. */
  readonly stream: "stdout" | "stderr";
  /** The node. */
  readonly node: number;
  /** The worker slot, or `null` outside a task. */
  readonly worker: number | null;
  /** The text written. */
  readonly data: string;
}

/** `pull` — the worker grants credit for up to `n` more items of an input stream. */
export interface PullMessage {
  readonly t: "pull";
  /** The task id. */
  readonly id: string;
  /** The stream's index (`k` of `{"$s": k}`). */
  readonly stream: number;
  /** How many more items may be sent. */
  readonly n: number;
}

/** `in` — one item of an input stream. */
export interface InputItemMessage {
  readonly t: "in";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
  /** The item. */
  readonly value: WireValue;
}

/** `in_end` — an input stream is exhausted. */
export interface InputEndMessage {
  readonly t: "in_end";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
}

/** `in_error` — an input stream threw. */
export interface InputErrorMessage {
  readonly t: "in_error";
  /** The task id. */
  readonly id: string;
  /** The stream's index. */
  readonly stream: number;
  /** What it threw. */
  readonly message: string;
}

/** `ping` — a heartbeat; answered with `pong` carrying the same `ts`. */
export interface PingMessage {
  readonly t: "ping";
  /** The sender's timestamp, echoed back. */
  readonly ts: number;
}

/** `pong` — the answer to `ping`. */
export interface PongMessage {
  readonly t: "pong";
  /** The `ts` of the ping answered. */
  readonly ts: number;
}

/** `release` — the client lets go; the worker waits `ttl` seconds for a reconnect, then stops. */
export interface ReleaseMessage {
  readonly t: "release";
  /** Seconds to wait for a reconnect. */
  readonly ttl: number;
  /**
   * The client detaches and will come back: results are kept until collected (once), and a worker
   * started with `--exit-on-stdin-eof` no longer stops when its stdin closes. Optional.
   */
  readonly keep?: boolean;
  /**
   * With `keep`: seconds until the pool's budget runs out at its hourly rate. The worker stops then
   * (running the self-destruct, as at the end of the TTL) unless a pool attached (its `cluster`
   * message cancels it). Optional.
   */
  readonly deadline?: number;
  /**
   * With `keep`: how many bytes of stream items (encoded) the worker keeps for tasks that stream
   * while no client is attached; items past it are dropped and counted (`dropped` on the task's
   * terminal message). Default 64 MiB.
   */
  readonly keep_items_bytes?: number;
}

/** `collect` — resend the terminal messages of finished tasks. */
export interface CollectMessage {
  readonly t: "collect";
  /** Task ids, from `welcome.results`. */
  readonly ids: readonly string[];
}

/** `unref` — forget the objects kept for these remote references. */
export interface UnrefMessage {
  readonly t: "unref";
  /** Remote reference ids. */
  readonly ids: readonly string[];
}

/** `shutdown` — cancel everything and exit. */
export interface ShutdownMessage {
  readonly t: "shutdown";
}

/** `metric` — one sample of a metric. */
export interface MetricMessage {
  readonly t: "metric";
  /** The node. */
  readonly node: number;
  /** The metric's name (`cpu`, `gpu_memory`). */
  readonly name: string;
  /** The sample. */
  readonly value: number;
  /** The unit (`%`, `MB`), or `null`. */
  readonly unit: string | null;
  /** When it was taken, in seconds since the epoch. */
  readonly ts: number;
  /** The GPU's index, for a per-GPU metric (`gpu`, `gpu_memory`, …); absent otherwise. */
  readonly gpu?: number;
}

/** An event a worker reports; `type` says which. */
export interface WorkerEvent {
  /** Which event (`log`, …); the other fields depend on it. */
  readonly type: string;
  readonly [field: string]: WireValue;
}

/** `event` — something happened on a node. */
export interface EventMessage {
  readonly t: "event";
  /** The node. */
  readonly node: number;
  /** The event. */
  readonly event: WorkerEvent;
}

/** Every message the client sends. */
export type ClientMessage =
  | HelloMessage
  | ClusterMessage
  | SubmitMessage
  | CancelMessage
  | WithdrawMessage
  | InputItemMessage
  | InputEndMessage
  | InputErrorMessage
  | PingMessage
  | PongMessage
  | ReleaseMessage
  | CollectMessage
  | UnrefMessage
  | ShutdownMessage
  | SubresultMessage
  | SuberrorMessage;

/** Every message a worker sends. */
export type WorkerMessage =
  | WelcomeMessage
  | RejectMessage
  | ReadyMessage
  | ResultMessage
  | ItemMessage
  | EndMessage
  | TaskErrorMessage
  | OutputMessage
  | PullMessage
  | MetricMessage
  | EventMessage
  | PingMessage
  | PongMessage
  | SubtaskMessage
  | WithdrawnMessage;

/** The messages a worker sends about one task (`out` only when its `id` is not `null`). */
export type TaskMessage =
  | ResultMessage
  | ItemMessage
  | EndMessage
  | TaskErrorMessage
  | OutputMessage
  | PullMessage
  | SubtaskMessage
  | WithdrawnMessage;

/** Every message of protocol version 1, discriminated on `t`. */
export type WireMessage = ClientMessage | WorkerMessage;

/** The `t` of every message of protocol version 1. */
export type WireMessageType = WireMessage["t"];

/**
 * A decoded message of a type this version does not know. Peers ignore these, so that newer
 * optional messages do not break older peers.
 */
export interface UnknownWireMessage {
  readonly t: string;
  readonly [field: string]: WireValue | undefined;
}

/** A decoded message: a known one (validated) or one of a type this version does not know. */
export type ReceivedMessage = WireMessage | UnknownWireMessage;

// ——————————————————————————————————————————————————————————————————————————————————————— errors

/** Thrown inside the encoder; collects the path while the recursion unwinds. */
class Unsendable {
  readonly reason: string;
  readonly path: PropertyKey[] = [];

  constructor(reason: string) {
    this.reason = reason;
  }
}

function withPathSegment(error: unknown, segment: PropertyKey): unknown {
  if (error instanceof Unsendable) error.path.unshift(segment);
  return error;
}

function protocolError(message: string): ProtocolError {
  return new ProtocolError({ message });
}

// ————————————————————————————————————————————————————————————————————————————————————— encoding

const DOLLAR = 36; // "$"
const MAX_SAFE_BIGINT = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE_BIGINT = -MAX_SAFE_BIGINT;
/** Deeper than this is refused when encoding: it is almost always a cycle. */
const MAX_DEPTH = 1000;

interface SegmentSink {
  segments: Uint8Array[];
}

/** Sets an own property, also when the key is `__proto__`. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else target[key] = value;
}

function describeType(value: object): string {
  const prototype: unknown = Object.getPrototypeOf(value);
  const maker =
    typeof prototype === "object" && prototype !== null
      ? (prototype as { constructor?: unknown }).constructor
      : undefined;
  return typeof maker === "function" && maker.name ? maker.name : "object";
}

function unsendableObject(value: object): Unsendable {
  const type = describeType(value);
  if (ArrayBuffer.isView(value)) {
    return new Unsendable(`cannot send a value of type ${type}; send its bytes as a Uint8Array`);
  }
  if (Symbol.asyncIterator in value || (Symbol.iterator in value && "next" in value)) {
    return new Unsendable(
      `cannot send a value of type ${type}; an iterable can only be sent as a top-level argument marked as an input stream`,
    );
  }
  return new Unsendable(`cannot send a value of type ${type}`);
}

/**
 * Encodes one value for the wire, returning it unchanged when nothing in it needs a tag, and a
 * copy of only the parts that change otherwise. Bytes are appended to `sink.segments`.
 */
function encodeValue(value: unknown, sink: SegmentSink, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
    case "undefined":
      return value;
    case "number":
      if (Number.isFinite(value)) return value;
      return { $f: Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf" };
    case "bigint":
      return value >= MIN_SAFE_BIGINT && value <= MAX_SAFE_BIGINT ? Number(value) : { $i: value.toString() };
    case "object": {
      if (value === null) return null;
      if (depth >= MAX_DEPTH) {
        throw new Unsendable(`cannot send a value nested deeper than ${MAX_DEPTH} levels (is it circular?)`);
      }
      if (Array.isArray(value)) return encodeArray(value, sink, depth + 1);
      const prototype: unknown = Object.getPrototypeOf(value);
      if (prototype === Object.prototype || prototype === null) {
        return encodeObject(value as Record<string, unknown>, sink, depth + 1);
      }
      if (value instanceof Uint8Array) {
        sink.segments.push(value);
        return { $b: sink.segments.length - 1 };
      }
      if (value instanceof InputStream) return { $s: value.index };
      if (value instanceof NDArray || (ArrayBuffer.isView(value) && !(value instanceof DataView))) {
        return encodeNDArray(value as NDArray | TypedArray, (bytes) => sink.segments.push(bytes) - 1);
      }
      if (value instanceof PyObject) return encodePyObject(value, (bytes) => sink.segments.push(bytes) - 1);
      if (value instanceof RemoteRef || value instanceof RefArgument)
        return encodeRefArgument(value, (bytes) => sink.segments.push(bytes) - 1);
      if (isArrowTable(value)) return encodeArrowTable(value, (bytes) => sink.segments.push(bytes) - 1);
      if (value instanceof Date) {
        if (Number.isNaN(value.getTime())) throw new Unsendable("cannot send an invalid Date");
        return value.toISOString();
      }
      if (value instanceof ArrayBuffer) {
        sink.segments.push(new Uint8Array(value));
        return { $b: sink.segments.length - 1 };
      }
      throw unsendableObject(value);
    }
    default:
      throw new Unsendable(`cannot send a value of type ${typeof value}`);
  }
}

function encodeArray(array: readonly unknown[], sink: SegmentSink, depth: number): readonly unknown[] {
  let copy: unknown[] | undefined;
  let index = 0;
  try {
    for (; index < array.length; index++) {
      const item = array[index];
      // Strings and finite numbers are most of most arrays: skip the call for them.
      const encoded =
        typeof item === "string" || (typeof item === "number" && Number.isFinite(item))
          ? item
          : encodeValue(item, sink, depth);
      if (copy !== undefined) copy[index] = encoded;
      else if (encoded !== item) {
        copy = array.slice(0, index);
        copy[index] = encoded;
      }
    }
  } catch (error) {
    throw withPathSegment(error, index);
  }
  return copy ?? array;
}

function encodeObject(object: Record<string, unknown>, sink: SegmentSink, depth: number): unknown {
  const keys = Object.keys(object);
  let copy: Record<string, unknown> | undefined;
  let escaped = false;
  let index = 0;
  try {
    for (; index < keys.length; index++) {
      const key = keys[index]!;
      if (key.charCodeAt(0) === DOLLAR) escaped = true;
      const item = object[key];
      const encoded =
        typeof item === "string" || (typeof item === "number" && Number.isFinite(item))
          ? item
          : encodeValue(item, sink, depth);
      if (copy !== undefined) setOwn(copy, key, encoded);
      else if (encoded !== item) {
        copy = {};
        for (let earlier = 0; earlier < index; earlier++) {
          const earlierKey = keys[earlier]!;
          setOwn(copy, earlierKey, object[earlierKey]);
        }
        setOwn(copy, key, encoded);
      }
    }
  } catch (error) {
    throw withPathSegment(error, keys[index]!);
  }
  const result = copy ?? object;
  return escaped ? { $d: result } : result;
}

/**
 * Collects messages into one frame. `add` encodes a message at once (so an unsendable value is
 * reported to the caller that sent it), `finish` renders the frame.
 *
 * ```ts
 * import type { Socket } from "node:net";
 * import { FrameBuilder } from "@skyward/core/protocol";
 *
 * declare const socket: Socket;
 * const frame = new FrameBuilder();
 * frame.add({ t: "cancel", id: "t-1" });
 * socket.write(Buffer.concat(frame.finish()));
 * ```
 */
export class FrameBuilder {
  readonly #texts: string[] = [];
  readonly #sink: SegmentSink = { segments: [] };
  /** UTF-8 bytes of the message texts and the commas between them. */
  #textBytes = 0;
  #bodyLength = 0;

  /** How many messages the frame holds. */
  get messageCount(): number {
    return this.#texts.length;
  }

  /** The frame's body length so far, in bytes. */
  get bodyLength(): number {
    return this.#bodyLength;
  }

  /**
   * Adds a message. Returns `false`, adding nothing, when the frame already holds messages and this
   * one would take it past a frame limit: finish this frame and add the message to a new one.
   *
   * @throws {SerializationError} when a value cannot be sent; the frame is unchanged.
   * @throws {ProtocolError} when the message alone is too large for any frame.
   */
  add(message: WireMessage): boolean {
    const segments = this.#sink.segments;
    const segmentCount = segments.length;
    let text: string;
    try {
      text = JSON.stringify(encodeValue(message, this.#sink, 0));
    } catch (error) {
      segments.length = segmentCount;
      if (error instanceof Unsendable) {
        const id = "id" in message && typeof message.id === "string" ? message.id : undefined;
        throw new SerializationError({
          taskId: id,
          side: "client",
          message: `${formatPath(error.path) || "(message)"}: ${error.reason}`,
        });
      }
      throw error;
    }
    let addedBody = 0;
    for (let index = segmentCount; index < segments.length; index++) addedBody += segments[index]!.byteLength;
    const textBytes = Buffer.byteLength(text, "utf8") + (this.#texts.length > 0 ? 1 : 0);
    // The segment table costs at most 11 bytes per segment plus 11 for `{"seg":[]},`.
    const headerBound = 2 + this.#textBytes + textBytes + 11 * segments.length + 11;
    if (headerBound > MAX_HEADER_BYTES || this.#bodyLength + addedBody > MAX_BODY_BYTES) {
      segments.length = segmentCount;
      if (this.#texts.length > 0) return false;
      throw protocolError(
        addedBody > MAX_BODY_BYTES
          ? `a "${message.t}" message carries ${addedBody} bytes of binary data, more than a frame body may hold (2 GiB)`
          : `a "${message.t}" message encodes to a header of about ${headerBound} bytes, more than a frame header may hold (64 MiB)`,
      );
    }
    this.#texts.push(text);
    this.#textBytes += textBytes;
    this.#bodyLength += addedBody;
    return true;
  }

  /**
   * Renders the frame as buffers to write in order: the length prefix and header first, then the
   * body. Large segments are passed through as they are (no copy); small ones are coalesced.
   */
  finish(): Uint8Array[] {
    const segments = this.#sink.segments;
    let table = "";
    if (segments.length > 0) {
      table = `{"seg":[${segments.map((segment) => segment.byteLength).join(",")}]}`;
      if (this.#texts.length > 0) table += ",";
    }
    const header = `[${table}${this.#texts.join(",")}]`;
    const headerBytes = 2 + table.length + this.#textBytes;
    // Small segments travel inside the first buffer (or a later coalesced one), large ones as they are.
    const inlineLimit = 64 * 1024;
    let leading = 0;
    let leadingCount = 0;
    while (leadingCount < segments.length && segments[leadingCount]!.byteLength < inlineLimit) {
      leading += segments[leadingCount]!.byteLength;
      leadingCount++;
    }
    if (leading > inlineLimit) {
      leading = 0;
      leadingCount = 0;
    }
    const first = Buffer.allocUnsafe(8 + headerBytes + leading);
    first.writeUInt32BE(headerBytes, 0);
    first.writeUInt32BE(this.#bodyLength, 4);
    const written = first.write(header, 8, "utf8");
    if (written !== headerBytes) throw new Error(`frame header size mismatch: ${written} != ${headerBytes}`);
    let offset = 8 + headerBytes;
    for (let index = 0; index < leadingCount; index++) {
      first.set(segments[index]!, offset);
      offset += segments[index]!.byteLength;
    }
    const out: Uint8Array[] = [first];
    let run: Uint8Array[] = [];
    let runBytes = 0;
    const flushRun = () => {
      if (run.length === 1) out.push(run[0]!);
      else if (run.length > 1) out.push(Buffer.concat(run, runBytes));
      run = [];
      runBytes = 0;
    };
    for (let index = leadingCount; index < segments.length; index++) {
      const segment = segments[index]!;
      if (segment.byteLength === 0) continue;
      if (segment.byteLength >= inlineLimit) {
        flushRun();
        out.push(segment);
      } else {
        run.push(segment);
        runBytes += segment.byteLength;
        if (runBytes >= inlineLimit) flushRun();
      }
    }
    flushRun();
    return out;
  }
}

/**
 * Encodes messages as one frame, returned as buffers to write in order (see
 * {@link FrameBuilder.finish}); `Buffer.concat` them for a single buffer.
 *
 * @throws {SerializationError} when a value cannot be sent.
 * @throws {ProtocolError} when the messages do not fit in one frame.
 */
export function encodeFrame(messages: readonly WireMessage[]): Uint8Array[] {
  const builder = new FrameBuilder();
  for (const message of messages) {
    if (!builder.add(message)) {
      throw protocolError(`${messages.length} messages do not fit in one frame (64 MiB header, 2 GiB body)`);
    }
  }
  return builder.finish();
}

/**
 * Marks the streamed arguments of a call: every top-level argument that is an async iterable or
 * an iterator (a generator, `array.values()`, a Node stream…) is replaced by an
 * {@link InputStream} numbered in order (positional first, then keyword arguments). Arrays, `Set`s
 * and other iterables that are not iterators are values, not streams.
 */
export function markInputStreams(
  args: readonly unknown[],
  kwargs: Readonly<Record<string, unknown>>,
): { args: unknown[]; kwargs: Record<string, unknown>; streams: InputStream[] } {
  const streams: InputStream[] = [];
  const mark = (value: unknown): unknown => {
    if (!isStreamSource(value)) return value;
    const stream = new InputStream(streams.length, value);
    streams.push(stream);
    return stream;
  };
  const markedArgs = args.map(mark);
  const markedKwargs: Record<string, unknown> = {};
  for (const key of Object.keys(kwargs)) setOwn(markedKwargs, key, mark(kwargs[key]));
  return { args: markedArgs, kwargs: markedKwargs, streams };
}

function isStreamSource(value: unknown): value is AsyncIterable<unknown> | Iterable<unknown> {
  if (typeof value !== "object" || value === null || value instanceof InputStream) return false;
  if (Symbol.asyncIterator in value) return true;
  return Symbol.iterator in value && typeof (value as { next?: unknown }).next === "function";
}

// ————————————————————————————————————————————————————————————————————————————————————— decoding

type FieldCheck = { readonly expected: string; readonly test: (value: unknown) => boolean };

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" &&
  value !== null &&
  !Array.isArray(value) &&
  !(value instanceof Uint8Array) &&
  !(value instanceof InputStream);

const string: FieldCheck = { expected: "a string", test: (value) => typeof value === "string" };
const integer: FieldCheck = { expected: "an integer", test: (value) => Number.isInteger(value) };
const number: FieldCheck = { expected: "a number", test: (value) => typeof value === "number" };
const boolean: FieldCheck = { expected: "a boolean", test: (value) => typeof value === "boolean" };
const present: FieldCheck = { expected: "a value", test: (value) => value !== undefined };
const object: FieldCheck = { expected: "an object", test: isPlainObject };
const array: FieldCheck = { expected: "an array", test: Array.isArray };
const strings: FieldCheck = {
  expected: "an array of strings",
  test: (value) => Array.isArray(value) && value.every((item) => typeof item === "string"),
};
const nullable = (check: FieldCheck): FieldCheck => ({
  expected: `${check.expected} or null`,
  test: (value) => value === null || check.test(value),
});
const oneOf = (...choices: readonly string[]): FieldCheck => ({
  expected: `one of ${choices.map((choice) => JSON.stringify(choice)).join(", ")}`,
  test: (value) => typeof value === "string" && choices.includes(value),
});
const peers: FieldCheck = {
  expected: "an array of {node, private_ip, public_ip}",
  test: (value) =>
    Array.isArray(value) &&
    value.every(
      (peer) =>
        isPlainObject(peer) &&
        Number.isInteger(peer.node) &&
        typeof peer.private_ip === "string" &&
        (peer.public_ip === null || typeof peer.public_ip === "string"),
    ),
};
const stringRecord: FieldCheck = {
  expected: "an object of strings",
  test: (value) => isPlainObject(value) && Object.values(value).every((item) => typeof item === "string"),
};
const workerEvent: FieldCheck = {
  expected: "an object with a string type",
  test: (value) => isPlainObject(value) && typeof value.type === "string",
};

/** The fields of every known message and what each must be. */
const messageFields: { readonly [T in WireMessageType]: Readonly<Record<string, FieldCheck>> } = {
  hello: { version: integer, token: string, client: string },
  welcome: {
    version: integer,
    node: integer,
    pid: integer,
    hostname: string,
    python: string,
    executor: oneOf("thread", "process"),
    concurrency: integer,
    buffer: integer,
    results: strings,
  },
  reject: { reason: string },
  cluster: {
    node: integer,
    total_nodes: integer,
    workers_per_node: integer,
    head_addr: string,
    head_port: integer,
    job_id: string,
    peers,
    accelerators: number,
    accelerator: present,
    network: present,
    env: stringRecord,
  },
  subtask: { id: string, sub: integer, fn: string, args: array, kwargs: object, node: nullable(integer) },
  subresult: { id: string, sub: integer, value: present },
  suberror: {
    id: string,
    sub: integer,
    kind: oneOf("exception", "not_found", "serialization", "timeout", "cancelled", "worker_died"),
    type: string,
    message: string,
    traceback: string,
    node: integer,
  },
  ready: {},
  submit: {
    id: string,
    fn: string,
    args: array,
    kwargs: object,
    timeout: nullable(number),
    stream: boolean,
    worker: nullable(integer),
  },
  cancel: { id: string },
  withdraw: { ids: strings },
  withdrawn: { id: string },
  result: { id: string, value: present },
  item: { id: string, seq: integer, value: present },
  end: { id: string },
  error: {
    id: string,
    kind: oneOf("exception", "not_found", "serialization", "timeout", "cancelled", "worker_died"),
    type: string,
    message: string,
    traceback: string,
    node: integer,
  },
  out: {
    id: nullable(string),
    stream: oneOf("stdout", "stderr"),
    node: integer,
    worker: nullable(integer),
    data: string,
  },
  pull: { id: string, stream: integer, n: integer },
  in: { id: string, stream: integer, value: present },
  in_end: { id: string, stream: integer },
  in_error: { id: string, stream: integer, message: string },
  ping: { ts: number },
  pong: { ts: number },
  release: { ttl: number },
  collect: { ids: strings },
  unref: { ids: strings },
  shutdown: {},
  metric: { node: integer, name: string, value: number, unit: nullable(string), ts: number },
  event: { node: integer, event: workerEvent },
};

const knownTypes: ReadonlySet<string> = new Set(Object.keys(messageFields));

/** Whether a received message is one of protocol version 1 (and so was validated field by field). */
export function isKnownMessage(message: ReceivedMessage): message is WireMessage {
  return knownTypes.has(message.t);
}

function describeReceived(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Uint8Array) return "bytes";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

function validateMessage(message: unknown, position: number): ReceivedMessage {
  if (!isPlainObject(message)) {
    throw protocolError(`frame message ${position} is not a JSON object: ${describeReceived(message)}`);
  }
  if (typeof message.t !== "string") {
    throw protocolError(`frame message ${position} has no string type field "t"`);
  }
  const fields = (messageFields as Readonly<Record<string, Readonly<Record<string, FieldCheck>>>>)[message.t];
  if (fields !== undefined && Object.hasOwn(messageFields, message.t)) {
    for (const name in fields) {
      const check = fields[name]!;
      const value = message[name];
      if (!check.test(value)) {
        throw protocolError(
          `"${message.t}" message field "${name}": expected ${check.expected}, received ${describeReceived(value)}`,
        );
      }
    }
  }
  return message as ReceivedMessage;
}

const integerText = /^-?(?:0|[1-9][0-9]*)$/;

function decodeTag(key: string, content: unknown, segments: readonly Uint8Array[]): unknown {
  switch (key) {
    case "$b":
      if (!Number.isInteger(content) || (content as number) < 0 || (content as number) >= segments.length) {
        throw protocolError(
          `$b index ${JSON.stringify(content)} is out of range: the frame has ${segments.length} segment(s)`,
        );
      }
      return segments[content as number];
    case "$f":
      if (content === "nan") return Number.NaN;
      if (content === "inf") return Number.POSITIVE_INFINITY;
      if (content === "-inf") return Number.NEGATIVE_INFINITY;
      throw protocolError(
        `$f value ${JSON.stringify(content)} is not a non-finite float: expected "nan", "inf" or "-inf"`,
      );
    case "$i": {
      if (typeof content !== "string" || !integerText.test(content)) {
        throw protocolError(`$i value ${JSON.stringify(content)} is not an integer in decimal text`);
      }
      const value = BigInt(content);
      return value >= MIN_SAFE_BIGINT && value <= MAX_SAFE_BIGINT ? Number(value) : value;
    }
    case "$d":
      if (!isPlainObject(content)) {
        throw protocolError(
          `$d must hold an escaped dict (an object), received ${describeReceived(content)}`,
        );
      }
      for (const name in content) content[name] = decodeValue(content[name], segments);
      return content;
    case "$a":
    case "$t":
    case "$o": {
      const segment = (ref: unknown): Uint8Array => {
        if (!isPlainObject(ref) || Object.keys(ref).length !== 1 || !("$b" in ref)) {
          throw new Error(`the data of ${key} must be a segment {"$b": i}`);
        }
        return decodeTag("$b", ref.$b, segments) as Uint8Array;
      };
      try {
        if (key === "$a") return decodeArray(content, segment);
        if (key === "$o") return decodeObject(content, segment);
        return decodeTable(content, segment);
      } catch (error) {
        if (error instanceof ProtocolError) throw error;
        throw protocolError((error as Error).message);
      }
    }
    case "$s":
      if (!Number.isSafeInteger(content) || (content as number) < 0) {
        throw protocolError(
          `$s value ${JSON.stringify(content)} is not a stream index (a non-negative integer)`,
        );
      }
      return new InputStream(content as number);
    case "$r":
      try {
        return decodeRemoteRef(content, (value) => decodeValue(value, segments));
      } catch (error) {
        if (error instanceof ProtocolError) throw error;
        throw protocolError((error as Error).message);
      }
    default:
      throw protocolError(`unknown tag ${JSON.stringify(key)}`);
  }
}

/** Replaces tagged forms, in place, in a value fresh from `JSON.parse`. */
function decodeValue(value: unknown, segments: readonly Uint8Array[]): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      if (typeof item === "object" && item !== null) value[index] = decodeValue(item, segments);
    }
    return value;
  }
  const record = value as Record<string, unknown>;
  let tag: string | undefined;
  let keyCount = 0;
  for (const key in record) {
    keyCount++;
    if (key.charCodeAt(0) === DOLLAR) tag = key;
  }
  if (tag !== undefined) {
    if (keyCount !== 1) {
      throw protocolError(
        `object key ${JSON.stringify(tag)} starts with "$" but the object is not a tag (a tag has exactly one key); escape such dicts with "$d"`,
      );
    }
    return decodeTag(tag, record[tag], segments);
  }
  for (const key in record) {
    const item = record[key];
    if (typeof item === "object" && item !== null) record[key] = decodeValue(item, segments);
  }
  return record;
}

/** A header parsed and checked against the frame's body length, awaiting its body. */
interface ParsedHeader {
  readonly items: unknown[];
  /** Index of the first message (1 after a segment table). */
  readonly first: number;
  /** Segment lengths, when there is a segment table. */
  readonly lengths: readonly number[] | undefined;
  /** Whether the header text may hold a tagged form (a key starting with `$`). */
  readonly mayHaveTags: boolean;
}

function parseHeader(bytes: Uint8Array, bodyLength: number): ParsedHeader {
  if (!isUtf8(bytes)) throw protocolError("frame header is not valid JSON: it is not valid UTF-8");
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  let items: unknown;
  try {
    items = JSON.parse(text);
  } catch (error) {
    throw new ProtocolError({
      message: `frame header is not valid JSON: ${(error as Error).message}`,
      cause: error,
    });
  }
  if (!Array.isArray(items))
    throw protocolError(`frame header is not a JSON array: ${describeReceived(items)}`);
  const head: unknown = items[0];
  let lengths: number[] | undefined;
  if (isPlainObject(head) && Object.hasOwn(head, "seg") && !Object.hasOwn(head, "t")) {
    const table = head.seg;
    if (
      Object.keys(head).length !== 1 ||
      !Array.isArray(table) ||
      !table.every((length) => Number.isSafeInteger(length) && length >= 0)
    ) {
      throw protocolError(`malformed segment table ${JSON.stringify(head)}: expected {"seg": [lengths]}`);
    }
    lengths = table as number[];
    let total = 0;
    for (const length of lengths) total += length;
    if (total !== bodyLength) {
      throw protocolError(`segment table adds up to ${total} bytes but the frame body has ${bodyLength}`);
    }
  } else if (bodyLength > 0) {
    throw protocolError(`frame has a body of ${bodyLength} bytes but no segment table`);
  }
  return {
    items,
    first: lengths === undefined ? 0 : 1,
    lengths,
    mayHaveTags: text.includes('"$') || text.includes("\\u0024"),
  };
}

function decodeMessages(header: ParsedHeader, body: Uint8Array): ReceivedMessage[] {
  const segments: Uint8Array[] = [];
  if (header.lengths !== undefined) {
    let offset = 0;
    for (const length of header.lengths) {
      segments.push(new Uint8Array(body.buffer, body.byteOffset + offset, length));
      offset += length;
    }
  }
  const messages: ReceivedMessage[] = [];
  for (let index = header.first; index < header.items.length; index++) {
    let message = header.items[index];
    if (header.mayHaveTags) {
      try {
        message = decodeValue(message, segments);
      } catch (error) {
        if (error instanceof RangeError) throw protocolError("frame header is nested too deeply");
        throw error;
      }
    }
    messages.push(validateMessage(message, index - header.first));
  }
  return messages;
}

const EMPTY = new Uint8Array(0);

/**
 * Reassembles frames from a byte stream. Push chunks in as they arrive; each call returns the
 * frames completed so far, each as its array of messages (tags decoded, known messages validated).
 * A body spread over several chunks is copied once, into a buffer of its own; a body within one
 * chunk is not copied at all. After a protocol error the decoder stays failed.
 *
 * ```ts
 * import type { Socket } from "node:net";
 * import { FrameDecoder, type ReceivedMessage } from "@skyward/core/protocol";
 *
 * declare const socket: Socket;
 * declare function handle(messages: ReceivedMessage[]): void;
 * const decoder = new FrameDecoder();
 * socket.on("data", (chunk) => { for (const messages of decoder.push(chunk)) handle(messages); });
 * ```
 */
export class FrameDecoder {
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #headerLength = -1;
  #bodyLength = -1;
  #header: ParsedHeader | undefined;
  /** The body being filled chunk by chunk, when it did not arrive at once. */
  #body: Uint8Array | undefined;
  #bodyFilled = 0;
  #failure: ProtocolError | undefined;

  /** Bytes received that are not yet part of a complete frame. */
  get pendingBytes(): number {
    const prefix = this.#headerLength >= 0 ? 8 : 0;
    const header = this.#header !== undefined ? this.#headerLength : 0;
    return prefix + header + this.#bodyFilled + this.#buffered;
  }

  /**
   * Feeds received bytes; returns the frames they complete.
   *
   * @throws {ProtocolError} when the stream breaks the protocol (then and on every later call).
   */
  push(chunk: Uint8Array): ReceivedMessage[][] {
    if (this.#failure !== undefined) throw this.#failure;
    try {
      return this.#push(chunk);
    } catch (error) {
      this.#failure = ProtocolError.isInstance(error)
        ? error
        : new ProtocolError({ message: `could not decode a frame: ${String(error)}`, cause: error });
      this.#chunks = [];
      this.#buffered = 0;
      this.#body = undefined;
      throw this.#failure;
    }
  }

  /**
   * Declares the stream finished.
   *
   * @throws {ProtocolError} when it ended inside a frame (a truncated frame), or the decoder failed.
   */
  end(): void {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.pendingBytes > 0) {
      this.#failure = protocolError(
        `the stream ended inside a frame: ${this.pendingBytes} bytes of a truncated frame were left over`,
      );
      throw this.#failure;
    }
  }

  #push(input: Uint8Array): ReceivedMessage[][] {
    const frames: ReceivedMessage[][] = [];
    let chunk = input;
    if (this.#body !== undefined) {
      const count = Math.min(chunk.byteLength, this.#bodyLength - this.#bodyFilled);
      this.#body.set(count === chunk.byteLength ? chunk : chunk.subarray(0, count), this.#bodyFilled);
      this.#bodyFilled += count;
      if (this.#bodyFilled < this.#bodyLength) return frames;
      const body = this.#body;
      this.#body = undefined;
      this.#bodyFilled = 0;
      frames.push(this.#completeFrame(body));
      chunk = chunk.subarray(count);
    }
    if (chunk.byteLength > 0) {
      this.#chunks.push(chunk);
      this.#buffered += chunk.byteLength;
    }
    for (;;) {
      if (this.#headerLength < 0) {
        if (this.#buffered < 8) break;
        const prefix = this.#take(8);
        const view = new DataView(prefix.buffer, prefix.byteOffset, 8);
        const headerLength = view.getUint32(0);
        const bodyLength = view.getUint32(4);
        if (headerLength > MAX_HEADER_BYTES) {
          throw protocolError(
            `frame header of ${headerLength} bytes exceeds the limit of ${MAX_HEADER_BYTES} (64 MiB)`,
          );
        }
        if (bodyLength > MAX_BODY_BYTES) {
          throw protocolError(
            `frame body of ${bodyLength} bytes exceeds the limit of ${MAX_BODY_BYTES} (2 GiB)`,
          );
        }
        this.#headerLength = headerLength;
        this.#bodyLength = bodyLength;
      }
      if (this.#header === undefined) {
        if (this.#buffered < this.#headerLength) break;
        this.#header = parseHeader(this.#take(this.#headerLength), this.#bodyLength);
      }
      if (this.#buffered >= this.#bodyLength) {
        frames.push(this.#completeFrame(this.#bodyLength === 0 ? EMPTY : this.#take(this.#bodyLength)));
        continue;
      }
      // The body is still arriving: give it a buffer of its own and move what came so far into it.
      const body = Buffer.allocUnsafeSlow(this.#bodyLength);
      let offset = 0;
      for (const piece of this.#chunks) {
        body.set(piece, offset);
        offset += piece.byteLength;
      }
      this.#body = body;
      this.#bodyFilled = offset;
      this.#chunks = [];
      this.#buffered = 0;
      break;
    }
    return frames;
  }

  #completeFrame(body: Uint8Array): ReceivedMessage[] {
    const header = this.#header!;
    this.#header = undefined;
    this.#headerLength = -1;
    this.#bodyLength = -1;
    return decodeMessages(header, body);
  }

  /** Removes `count` buffered bytes: a view when they sit in one chunk, one copy otherwise. */
  #take(count: number): Uint8Array {
    const first = this.#chunks[0]!;
    this.#buffered -= count;
    if (first.byteLength >= count) {
      if (first.byteLength === count) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(count);
      return first.subarray(0, count);
    }
    const out = Buffer.allocUnsafe(count);
    let offset = 0;
    while (offset < count) {
      const piece = this.#chunks[0]!;
      const wanted = count - offset;
      if (piece.byteLength <= wanted) {
        out.set(piece, offset);
        offset += piece.byteLength;
        this.#chunks.shift();
      } else {
        out.set(piece.subarray(0, wanted), offset);
        this.#chunks[0] = piece.subarray(wanted);
        offset += wanted;
      }
    }
    return out;
  }
}

/**
 * Decodes exactly one complete frame.
 *
 * @throws {ProtocolError} when `frame` is not exactly one valid frame.
 */
export function decodeFrame(frame: Uint8Array): ReceivedMessage[] {
  const decoder = new FrameDecoder();
  const frames = decoder.push(frame);
  decoder.end();
  if (frames.length !== 1) throw protocolError(`expected exactly one frame, found ${frames.length}`);
  return frames[0]!;
}

// ————————————————————————————————————————————————————————————————— test vectors' expected form

/**
 * Writes a native value in the test vectors' *expected form* (docs/protocol.md, "Test vectors"):
 * as on the wire, except that bytes are `{"$hex": "…"}`.
 */
export function toExpectedForm(value: unknown): unknown {
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    return { $f: Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf" };
  }
  if (typeof value === "bigint") {
    return value >= MIN_SAFE_BIGINT && value <= MAX_SAFE_BIGINT ? Number(value) : { $i: value.toString() };
  }
  if (typeof value !== "object" || value === null) return value;
  if (value instanceof Uint8Array)
    return { $hex: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex") };
  if (value instanceof InputStream) return { $s: value.index };
  if (value instanceof RemoteRef || value instanceof RefArgument) {
    const wire = encodeRefArgument(value, () => 0) as { $r: Record<string, unknown> };
    return value instanceof RefArgument && value.carries
      ? { $r: { ...wire.$r, value: toExpectedForm(value.payload) } }
      : wire;
  }
  if (
    value instanceof NDArray ||
    value instanceof PyObject ||
    (ArrayBuffer.isView(value) && !(value instanceof DataView))
  ) {
    const segments: Uint8Array[] = [];
    const wire = (
      !(value instanceof PyObject)
        ? encodeNDArray(value as NDArray | TypedArray, (bytes) => segments.push(bytes) - 1)
        : encodePyObject(value, (bytes) => segments.push(bytes) - 1)
    ) as Record<string, { data: unknown }>;
    const [tag, content] = Object.entries(wire)[0]!;
    return { [tag]: { ...content, data: toExpectedForm(segments[0]) } };
  }
  if (Array.isArray(value)) return value.map(toExpectedForm);
  const out: Record<string, unknown> = {};
  let escaped = false;
  for (const key of Object.keys(value)) {
    if (key.charCodeAt(0) === DOLLAR) escaped = true;
    setOwn(out, key, toExpectedForm((value as Record<string, unknown>)[key]));
  }
  return escaped ? { $d: out } : out;
}

/** Reads a value written in the test vectors' expected form back into a native value. */
export function fromExpectedForm(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(fromExpectedForm);
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0]!.charCodeAt(0) === DOLLAR) {
    const key = keys[0]!;
    const content = record[key];
    if (key === "$hex") return new Uint8Array(Buffer.from(String(content), "hex"));
    if (key === "$d") {
      const out: Record<string, unknown> = {};
      for (const name of Object.keys(content as Record<string, unknown>)) {
        setOwn(out, name, fromExpectedForm((content as Record<string, unknown>)[name]));
      }
      return out;
    }
    if (key === "$r") {
      const inner = content as Record<string, unknown>;
      return decodeRemoteRef(inner, fromExpectedForm);
    }
    if (key === "$a" || key === "$o" || key === "$t") {
      const inner = content as Record<string, unknown>;
      const bytes = fromExpectedForm(inner.data) as Uint8Array;
      return decodeTag(key, { ...inner, data: { $b: 0 } }, [bytes]);
    }
    return decodeTag(key, content, []);
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) setOwn(out, key, fromExpectedForm(record[key]));
  return out;
}
