/**
 * The small pieces the encoder, the decoder and the test vectors' expected form share: the `$` of
 * a tag, the safe-integer range of `$i`, own-property writes and the protocol error.
 */

import { ProtocolError } from "../errors/errors.js";
import { InputStream } from "./messages.js";

export const DOLLAR = 36; // "$"
export const MAX_SAFE_BIGINT = BigInt(Number.MAX_SAFE_INTEGER);
export const MIN_SAFE_BIGINT = -MAX_SAFE_BIGINT;

export function protocolError(message: string): ProtocolError {
  return new ProtocolError({ message });
}

/** Sets an own property, also when the key is `__proto__`. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else target[key] = value;
}

/** A JSON object: not an array, bytes or an input stream. */
export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" &&
  value !== null &&
  !Array.isArray(value) &&
  !(value instanceof Uint8Array) &&
  !(value instanceof InputStream);
