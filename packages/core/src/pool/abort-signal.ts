/**
 * The `signal` a caller passes (to `compute`, `attach` and every call of a pool that waits) is checked
 * before anything starts: a value that is not an AbortSignal (the AbortController itself is the
 * usual slip) would otherwise fail half-way, after a task was submitted or a target set.
 */
import { ConfigurationError } from "../errors/errors.js";

/** Refuses a `signal` that is given and is not an AbortSignal, naming `path`. */
export function checkAbortSignal(signal: unknown, path = "signal"): void {
  if (signal === undefined || signal instanceof AbortSignal) return;
  const hint = signal instanceof AbortController ? " (pass controller.signal, not the controller)" : "";
  throw new ConfigurationError({
    issues: [{ path, message: `expected an AbortSignal${hint}, received ${describe(signal)}` }],
  });
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof name !== "string" || name === "Object") return "an object";
    return `${/^[AEIOU]/.test(name) ? "an" : "a"} ${name}`;
  }
  return `${typeof value} ${JSON.stringify(value) ?? String(value)}`;
}
