/**
 * The encoder (docs/protocol.md): values to their wire form, messages to frames.
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
 * - A typed array other than `Uint8Array` is sent as a 1-D array (`$a`), a `DataView` not at all.
 * - Functions, symbols, `Map`, `Set`, and instances of any class other than `Object`, `Array`,
 *   `Uint8Array`, `Date`, the value classes and {@link InputStream} cannot be sent:
 *   encoding throws a `SerializationError` whose message starts with where the value was
 *   (`args[1].model: cannot send a value of type Model`).
 * - Object keys go out in JavaScript's own-property order, which is insertion order except that
 *   array-index keys (`"0"`, `"17"`) come first.
 *
 * Bytes are not copied on the way out: the frame references the caller's `Uint8Array`s, which must
 * not change until the frame has been written.
 */

import { Buffer } from "node:buffer";
import { SerializationError } from "../errors/errors.js";
import { formatPath } from "../errors/validation.js";
import { InputStream, MAX_BODY_BYTES, MAX_HEADER_BYTES, type WireMessage } from "./messages.js";
import {
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
import { DOLLAR, MAX_SAFE_BIGINT, MIN_SAFE_BIGINT, protocolError, setOwn } from "./wire-primitives.js";

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

/** Deeper than this is refused when encoding: it is almost always a cycle. */
const MAX_DEPTH = 1000;

interface SegmentSink {
  segments: Uint8Array[];
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
