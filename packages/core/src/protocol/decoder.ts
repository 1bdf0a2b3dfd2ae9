/**
 * The decoder (docs/protocol.md): frames reassembled from a byte stream, their headers parsed
 * against the body, tagged forms decoded in place and known messages validated. Received bytes are
 * views into the received data.
 */

import { Buffer, isUtf8 } from "node:buffer";
import { ProtocolError } from "../errors/errors.js";
import { InputStream, MAX_BODY_BYTES, MAX_HEADER_BYTES, type ReceivedMessage } from "./messages.js";
import { describeReceived, validateMessage } from "./validation.js";
import { decodeArray, decodeObject, decodeRemoteRef, decodeTable } from "./values.js";
import { DOLLAR, isPlainObject, MAX_SAFE_BIGINT, MIN_SAFE_BIGINT, protocolError } from "./wire-primitives.js";

const integerText = /^-?(?:0|[1-9][0-9]*)$/;

/** Decodes one tagged form (`$b`, `$f`, `$i`, `$d`, `$s`, `$a`, `$o`, `$t`, `$r`). */
export function decodeTag(key: string, content: unknown, segments: readonly Uint8Array[]): unknown {
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
