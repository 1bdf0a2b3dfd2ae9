/**
 * The test vectors' *expected form* (docs/protocol.md, "Test vectors"), shared by the TypeScript and
 * Python sides' vector replays: a value as on the wire, except that bytes are `{"$hex": "…"}`.
 */

import { Buffer } from "node:buffer";
import { decodeTag } from "./decoder.js";
import { InputStream } from "./messages.js";
import {
  decodeRemoteRef,
  encodeNDArray,
  encodePyObject,
  encodeRefArgument,
  NDArray,
  PyObject,
  RefArgument,
  RemoteRef,
  type TypedArray,
} from "./values.js";
import { DOLLAR, MAX_SAFE_BIGINT, MIN_SAFE_BIGINT, setOwn } from "./wire-primitives.js";

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
