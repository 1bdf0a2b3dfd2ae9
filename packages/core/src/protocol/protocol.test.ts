import { Buffer } from "node:buffer";
import { randomFillSync } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ProtocolError, SerializationError } from "../errors/errors.js";
import {
  decodeFrame,
  encodeFrame,
  FrameBuilder,
  FrameDecoder,
  fromExpectedForm,
  InputStream,
  isKnownMessage,
  MAX_HEADER_BYTES,
  markInputStreams,
  type ReceivedMessage,
  toExpectedForm,
  type UnknownWireMessage,
  type WireMessage,
  type WireValue,
} from "./protocol.js";
import type { NDArray } from "./values.js";

const vectorDirectory = join(import.meta.dirname, "..", "..", "protocol-vectors");

interface Vector {
  name: string;
  frame: string;
  canonical?: boolean;
  messages?: unknown[];
  error?: string;
}

function loadVectors(): { file: string; vector: Vector }[] {
  const out: { file: string; vector: Vector }[] = [];
  for (const file of readdirSync(vectorDirectory)
    .filter((name) => name.endsWith(".json"))
    .sort()) {
    const vectors = JSON.parse(readFileSync(join(vectorDirectory, file), "utf8")) as Vector[];
    for (const vector of vectors) out.push({ file, vector });
  }
  return out;
}

const concat = (buffers: readonly Uint8Array[]) => Buffer.concat(buffers);
const frameOf = (messages: readonly WireMessage[]) => concat(encodeFrame(messages));
const roundTrip = (messages: readonly WireMessage[]) => decodeFrame(frameOf(messages));
const result = (value: unknown): WireMessage => ({ t: "result", id: "t-1", value: value as WireValue });
const resultValue = (message: ReceivedMessage | undefined) => (message as { value: unknown }).value;

function refusal(frame: Uint8Array): ProtocolError {
  try {
    decodeFrame(frame);
  } catch (error) {
    expect(ProtocolError.isInstance(error)).toBe(true);
    return error as ProtocolError;
  }
  throw new Error("the frame was not refused");
}

function serializationFailure(run: () => unknown): SerializationError {
  try {
    run();
  } catch (error) {
    expect(SerializationError.isInstance(error)).toBe(true);
    return error as SerializationError;
  }
  throw new Error("no SerializationError was thrown");
}

/** A frame written by hand. */
function rawFrame(header: string, body: Uint8Array = new Uint8Array(0)): Buffer {
  const headerBytes = Buffer.from(header, "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(headerBytes.byteLength, 0);
  prefix.writeUInt32BE(body.byteLength, 4);
  return Buffer.concat([prefix, headerBytes, body]);
}

describe("shared test vectors", () => {
  const vectors = loadVectors();

  it("finds vector files, including this side's own", () => {
    const files = new Set(vectors.map(({ file }) => file));
    expect(files.has("ts-vectors.json")).toBe(true);
    expect(vectors.filter(({ vector }) => vector.error !== undefined).length).toBeGreaterThanOrEqual(6);
  });

  it.each(vectors.map(({ file, vector }) => [`${file}: ${vector.name}`, vector] as const))(
    "%s",
    (_, vector) => {
      const frame = Buffer.from(vector.frame, "hex");
      if (vector.error !== undefined) {
        const error = refusal(frame);
        expect(error.message.toLowerCase()).toContain(vector.error.toLowerCase());
        return;
      }
      const expected = (vector.messages ?? []).map(fromExpectedForm);
      const decoded = decodeFrame(frame);
      expect(decoded).toEqual(expected);

      // Byte by byte gives the same.
      const decoder = new FrameDecoder();
      const frames: ReceivedMessage[][] = [];
      for (let index = 0; index < frame.byteLength; index++)
        frames.push(...decoder.push(frame.subarray(index, index + 1)));
      decoder.end();
      expect(frames).toEqual([expected]);

      // Encoding the native messages and decoding them again gives the same.
      const reencoded = frameOf(expected as WireMessage[]);
      expect(decodeFrame(reencoded)).toEqual(expected);
      if (vector.canonical === true) expect(reencoded.toString("hex")).toBe(vector.frame);
    },
  );
});

describe("encoding values", () => {
  it("sends plain JSON as one JSON text, keys in insertion order", () => {
    const frame = frameOf([{ t: "cancel", id: "t-1" }, result({ b: 1, a: [true, null, "é"] })]);
    const header = frame.subarray(8, 8 + frame.readUInt32BE(0)).toString("utf8");
    expect(header).toBe(
      '[{"t":"cancel","id":"t-1"},{"t":"result","id":"t-1","value":{"b":1,"a":[true,null,"é"]}}]',
    );
    expect(frame.readUInt32BE(4)).toBe(0);
  });

  it("writes the segment table first and tags bytes in order of first appearance", () => {
    const frame = frameOf([
      result({ x: new Uint8Array([1, 2, 3]), y: [Buffer.from("hi")] }),
      { t: "in", id: "t-2", stream: 0, value: new Uint8Array([9]) },
    ]);
    const headerLength = frame.readUInt32BE(0);
    const header = frame.subarray(8, 8 + headerLength).toString("utf8");
    expect(header).toBe(
      '[{"seg":[3,2,1]},{"t":"result","id":"t-1","value":{"x":{"$b":0},"y":[{"$b":1}]}},{"t":"in","id":"t-2","stream":0,"value":{"$b":2}}]',
    );
    expect([...frame.subarray(8 + headerLength)]).toEqual([1, 2, 3, 104, 105, 9]);
  });

  it("round-trips every tagged form", () => {
    const value = {
      bytes: new Uint8Array([0, 255]),
      nan: Number.NaN,
      inf: Number.POSITIVE_INFINITY,
      negativeInf: Number.NEGATIVE_INFINITY,
      big: 2n ** 64n,
      negativeBig: -(2n ** 70n) - 1n,
      smallBigint: 42n,
      escaped: { $b: 0, $f: "x", plain: [new Uint8Array([7])] },
      stream: new InputStream(3),
    };
    const decoded = resultValue(roundTrip([result(value)])[0]) as Record<string, unknown>;
    expect(decoded.bytes).toEqual(new Uint8Array([0, 255]));
    expect(decoded.nan).toBeNaN();
    expect(decoded.inf).toBe(Number.POSITIVE_INFINITY);
    expect(decoded.negativeInf).toBe(Number.NEGATIVE_INFINITY);
    expect(decoded.big).toBe(2n ** 64n);
    expect(decoded.negativeBig).toBe(-(2n ** 70n) - 1n);
    expect(decoded.smallBigint).toBe(42);
    expect(decoded.escaped).toEqual({ $b: 0, $f: "x", plain: [new Uint8Array([7])] });
    expect(decoded.stream).toBeInstanceOf(InputStream);
    expect((decoded.stream as InputStream).index).toBe(3);
  });

  it("sends a Float16Array as a float16 array and a Uint8ClampedArray as a uint8 one", () => {
    // Both are typed arrays other than Uint8Array, which docs/protocol.md promises go as 1-D arrays;
    // they were refused with a TypeError naming the wrong dtype ("uint8" needs a Uint8Array).
    const halves = new Float16Array([1.5, -2, 65504]);
    const pixels = new Uint8ClampedArray([0, 128, 255]);
    const decoded = resultValue(roundTrip([result({ halves, pixels })])[0]) as Record<string, NDArray>;
    expect(decoded.halves!.dtype).toBe("float16");
    expect(decoded.halves!.shape).toEqual([3]);
    expect(
      Array.from(new Float16Array(decoded.halves!.data.buffer, decoded.halves!.data.byteOffset, 3)),
    ).toEqual([1.5, -2, 65504]);
    expect(decoded.pixels!.dtype).toBe("uint8");
    expect(Array.from(decoded.pixels!.data as Uint8Array)).toEqual([0, 128, 255]);
  });

  it("sends a bigint within the safe range as a plain number and $i only beyond it", () => {
    const header = (value: bigint) => {
      const frame = frameOf([result(value)]);
      return frame.subarray(8, 8 + frame.readUInt32BE(0)).toString("utf8");
    };
    expect(header(9007199254740991n)).toContain('"value":9007199254740991}');
    expect(header(-9007199254740991n)).toContain('"value":-9007199254740991}');
    expect(header(9007199254740992n)).toContain('"value":{"$i":"9007199254740992"}');
    expect(header(-9007199254740992n)).toContain('"value":{"$i":"-9007199254740992"}');
  });

  it("decodes $i within the safe range as a number and beyond it as a bigint", () => {
    const decoded = decodeFrame(
      rawFrame('[{"t":"result","id":"a","value":[{"$i":"5"},{"$i":"-9007199254740993"}]}]'),
    );
    expect(resultValue(decoded[0])).toEqual([5, -9007199254740993n]);
  });

  it("treats undefined like JSON does, sends Dates as ISO strings and ArrayBuffers as bytes", () => {
    const date = new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 6));
    const buffer = new Uint8Array([5, 6]).buffer;
    const decoded = resultValue(
      roundTrip([result({ gone: undefined, list: [undefined, 1], when: date, raw: buffer })])[0],
    );
    expect(decoded).toEqual({
      list: [null, 1],
      when: "2025-01-02T03:04:05.006Z",
      raw: new Uint8Array([5, 6]),
    });
  });

  it("keeps a __proto__ key an ordinary key, also when the object is copied for tagging", () => {
    const value = JSON.parse('{"__proto__": {"x": 1}, "b": "z"}') as Record<string, unknown>;
    value.b = new Uint8Array([1]);
    const decoded = resultValue(roundTrip([result(value)])[0]) as Record<string, unknown>;
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(Object.keys(decoded)).toEqual(["__proto__", "b"]);
    expect(Object.getOwnPropertyDescriptor(decoded, "__proto__")?.value).toEqual({ x: 1 });
  });

  it("accepts objects without a prototype", () => {
    const value = Object.assign(Object.create(null) as Record<string, unknown>, {
      a: 1,
      b: new Uint8Array([2]),
    });
    expect(resultValue(roundTrip([result(value)])[0])).toEqual({ a: 1, b: new Uint8Array([2]) });
  });

  it("does not change the caller's values when it tags copies of them", () => {
    const args = [1, { blob: new Uint8Array([1]), n: Number.NaN }];
    const kwargs = { $key: 1 };
    const message: WireMessage = {
      t: "submit",
      id: "t-1",
      fn: "m:f",
      args: args as WireValue[],
      kwargs,
      timeout: null,
      stream: false,
      worker: null,
    };
    frameOf([message]);
    expect(args[1]).toEqual({ blob: new Uint8Array([1]), n: Number.NaN });
    expect(kwargs).toEqual({ $key: 1 });
  });

  it("passes large segments through without copying and coalesces small ones", () => {
    const large = new Uint8Array(1024 * 1024).fill(7);
    const small = [new Uint8Array([1]), new Uint8Array([2, 2]), new Uint8Array([3, 3, 3])];
    const buffers = encodeFrame([result([small[0], large, small[1], small[2]])]);
    expect(buffers).toHaveLength(3);
    expect(buffers[1]).toBe(large);
    expect([...buffers[2]!]).toEqual([2, 2, 3, 3, 3]);
    const first = Buffer.from(buffers[0]!);
    expect(first.at(-1)).toBe(1); // the first small segment rides with the header
  });

  it("round-trips 64 MiB of bytes without corruption, in one chunk and in socket-sized chunks", () => {
    const payload = new Uint8Array(64 * 1024 * 1024);
    randomFillSync(payload);
    const buffers = encodeFrame([result({ blob: payload, tail: new Uint8Array([1, 2, 3]) })]);
    expect(buffers.includes(payload)).toBe(true); // passed through, not copied
    const frame = concat(buffers);

    const whole = resultValue(decodeFrame(frame)[0]) as { blob: Uint8Array; tail: Uint8Array };
    expect(Buffer.compare(whole.blob, payload)).toBe(0);
    expect(whole.blob.buffer === frame.buffer).toBe(true); // a view into the received chunk, no copy
    expect(whole.tail).toEqual(new Uint8Array([1, 2, 3]));

    const decoder = new FrameDecoder();
    const frames: ReceivedMessage[][] = [];
    const step = 65536 + 13;
    for (let offset = 0; offset < frame.byteLength; offset += step) {
      frames.push(...decoder.push(frame.subarray(offset, offset + step)));
    }
    decoder.end();
    expect(frames).toHaveLength(1);
    const chunked = resultValue(frames[0]![0]) as { blob: Uint8Array };
    expect(Buffer.compare(chunked.blob, payload)).toBe(0);
    // The body was assembled once, into a buffer of exactly its size.
    expect(chunked.blob.buffer.byteLength).toBe(payload.byteLength + 3);
  });
});

describe("unsendable values", () => {
  class Model {
    weights = [1];
  }
  const cases: [string, unknown, string][] = [
    ["a function", () => 1, "args[1].model: cannot send a value of type function"],
    ["a symbol", Symbol("s"), "args[1].model: cannot send a value of type symbol"],
    ["a Map", new Map(), "args[1].model: cannot send a value of type Map"],
    ["a Set", new Set([1]), "args[1].model: cannot send a value of type Set"],
    ["a class instance", new Model(), "args[1].model: cannot send a value of type Model"],
    ["a DataView", new DataView(new ArrayBuffer(2)), "args[1].model: cannot send a value of type DataView"],
    ["an invalid Date", new Date(Number.NaN), "args[1].model: cannot send an invalid Date"],
    ["a nested iterator", [1].values(), "only be sent as a top-level argument marked as an input stream"],
  ];

  it.each(cases)("refuses %s, naming where it was", (_, value, message) => {
    const error = serializationFailure(() =>
      frameOf([
        {
          t: "submit",
          id: "t-5",
          fn: "m:f",
          args: [1, { model: value } as unknown as WireValue],
          kwargs: {},
          timeout: null,
          stream: false,
          worker: null,
        },
      ]),
    );
    expect(error.message).toContain(message);
    expect(error.taskId).toBe("t-5");
    expect(error.side).toBe("client");
  });

  it("names keys that are not identifiers with brackets", () => {
    const error = serializationFailure(() => frameOf([result({ "a key": [0, { $x: () => 1 }] })]));
    expect(error.message).toBe('value["a key"][1].$x: cannot send a value of type function');
  });

  it("refuses a circular value instead of overflowing the stack", () => {
    const value: Record<string, unknown> = {};
    value.self = value;
    const error = serializationFailure(() => frameOf([result(value)]));
    expect(error.message).toMatch(/^value\.self\.self\.self.*nested deeper than 1000 levels/);
  });

  it("leaves a frame builder unchanged after a refused message", () => {
    const builder = new FrameBuilder();
    expect(builder.add(result(new Uint8Array([1])))).toBe(true);
    serializationFailure(() => builder.add(result([new Uint8Array([2, 2]), new Map()])));
    expect(builder.messageCount).toBe(1);
    expect(builder.bodyLength).toBe(1);
    expect(decodeFrame(concat(builder.finish()))).toEqual([
      { t: "result", id: "t-1", value: new Uint8Array([1]) },
    ]);
  });
});

describe("frame limits", () => {
  it("starts a new frame when a message would take the header past 64 MiB", () => {
    const text = "x".repeat(40 * 1024 * 1024);
    const builder = new FrameBuilder();
    expect(builder.add(result(text))).toBe(true);
    expect(builder.add(result(text))).toBe(false);
    expect(builder.messageCount).toBe(1);
  });

  it("refuses a single message whose header would be over 64 MiB", () => {
    const builder = new FrameBuilder();
    expect(() => builder.add(result("x".repeat(MAX_HEADER_BYTES)))).toThrow(/64 MiB/);
    expect(builder.messageCount).toBe(0);
  });

  it("refuses a header length over 64 MiB as soon as the prefix arrives", () => {
    const prefix = Buffer.alloc(8);
    prefix.writeUInt32BE(MAX_HEADER_BYTES + 1, 0);
    const decoder = new FrameDecoder();
    expect(() => decoder.push(prefix)).toThrow(/limit/);
    // …and stays failed.
    expect(() => decoder.push(rawFrame('[{"t":"ready"}]'))).toThrow(/limit/);
  });
});

describe("decoding frames", () => {
  const frames = [
    frameOf([{ t: "ready" }]),
    frameOf([result({ blob: new Uint8Array(100_000).fill(3), n: 1 }), { t: "end", id: "t-2" }]),
    frameOf([{ t: "pong", ts: 1.5 }]),
    frameOf([result(new Uint8Array(0))]),
    frameOf([{ t: "out", id: null, stream: "stdout", node: 0, worker: null, data: "ünïcödé\n" }]),
  ];
  const stream = Buffer.concat(frames);
  const expected = frames.map((frame) => decodeFrame(frame));

  it.each([1, 2, 3, 7, 8, 9, 4096 + 13, 65536, stream.byteLength])(
    "decodes a stream pushed in chunks of %i bytes",
    (size) => {
      const decoder = new FrameDecoder();
      const out: ReceivedMessage[][] = [];
      for (let offset = 0; offset < stream.byteLength; offset += size) {
        out.push(...decoder.push(stream.subarray(offset, offset + size)));
      }
      decoder.end();
      expect(out).toEqual(expected);
      expect(decoder.pendingBytes).toBe(0);
    },
  );

  it("reports a truncated frame at the end of the stream", () => {
    const decoder = new FrameDecoder();
    expect(decoder.push(stream.subarray(0, stream.byteLength - 1))).toHaveLength(frames.length - 1);
    expect(decoder.pendingBytes).toBe(frames.at(-1)!.byteLength - 1);
    expect(() => decoder.end()).toThrow(/truncated/);
  });

  it("validates the fields of known messages", () => {
    expect(refusal(rawFrame('[{"t":"result","value":1}]')).message).toBe(
      '"result" message field "id": expected a string, received nothing',
    );
    expect(refusal(rawFrame('[{"t":"item","id":"a","seq":1.5,"value":1}]')).message).toContain(
      '"seq": expected an integer',
    );
    expect(
      refusal(
        rawFrame('[{"t":"error","id":"a","kind":"oops","type":"E","message":"m","traceback":"","node":0}]'),
      ).message,
    ).toContain('"kind": expected one of "exception"');
    expect(refusal(rawFrame('[{"t":"welcome","version":1}]')).message).toContain(
      '"welcome" message field "node"',
    );
  });

  it("passes messages of unknown types through, and tells them apart", () => {
    const [known, unknown] = decodeFrame(rawFrame('[{"t":"ready"},{"t":"later","x":{"$f":"nan"}}]'));
    expect(isKnownMessage(known!)).toBe(true);
    expect(isKnownMessage(unknown!)).toBe(false);
    expect((unknown as UnknownWireMessage).x).toBeNaN();
  });

  it("refuses an object that mixes a $ key with other keys", () => {
    expect(refusal(rawFrame('[{"t":"result","id":"a","value":{"$d":{},"x":1}}]')).message).toMatch(
      /"\$d" starts with "\$" but the object is not a tag/,
    );
  });

  it("refuses a header nested too deeply for the decoder", () => {
    const depth = 200_000;
    const header = `[{"t":"result","id":"a","value":${"[".repeat(depth)}{"$f":"nan"}${"]".repeat(depth)}}]`;
    expect(() => decodeFrame(rawFrame(header))).toThrow(ProtocolError);
  });
});

describe("expected form", () => {
  it("writes bytes as $hex and reads them back", () => {
    const native = { a: new Uint8Array([0, 255]), b: [2n ** 60n, Number.NaN], $c: new InputStream(1) };
    const expected = toExpectedForm(native);
    expect(expected).toEqual({
      $d: { a: { $hex: "00ff" }, b: [{ $i: "1152921504606846976" }, { $f: "nan" }], $c: { $s: 1 } },
    });
    expect(fromExpectedForm(expected)).toEqual(native);
  });
});

describe("markInputStreams", () => {
  it("marks async iterables and iterators in argument position, numbering them in order", () => {
    async function* numbers() {
      yield 1;
    }
    const generator = numbers();
    const iterator = [1, 2].values();
    const marked = markInputStreams([1, generator, [1, 2], new Set([1])], { rows: iterator, name: "x" });
    expect(marked.streams.map((stream) => stream.index)).toEqual([0, 1]);
    expect(marked.streams[0]!.source).toBe(generator);
    expect(marked.streams[1]!.source).toBe(iterator);
    expect(marked.args[1]).toBe(marked.streams[0]);
    expect(marked.args[2]).toEqual([1, 2]);
    expect(marked.args[3]).toEqual(new Set([1]));
    expect(marked.kwargs).toEqual({ rows: marked.streams[1], name: "x" });
    const [submit] = roundTrip([
      {
        t: "submit",
        id: "t-1",
        fn: "m:f",
        args: [marked.args[0] as WireValue, marked.args[1] as WireValue],
        kwargs: { rows: marked.kwargs.rows as WireValue },
        timeout: null,
        stream: false,
        worker: null,
      },
    ]);
    expect(toExpectedForm(submit)).toMatchObject({ args: [1, { $s: 0 }], kwargs: { rows: { $s: 1 } } });
  });
});
