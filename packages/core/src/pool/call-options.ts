/**
 * The options of a call (`run`, `submit`, `broadcast`, `gather`, `stream`, `map`), checked when it is
 * made: JavaScript callers have no types, and a misspelt option (`{ node: 2 }` for `{ target: 2 }`)
 * would otherwise be ignored — the call running somewhere else, or not abortable.
 */
import { ConfigurationError } from "../errors/errors.js";
import { checkAbortSignal } from "./abort-signal.js";

/** The fields each verb takes. */
export const CALL_OPTION_FIELDS = {
  run: ["target", "signal"],
  wait: ["signal"],
  stream: ["signal", "ordered"],
} as const;

function fail(path: string, message: string): ConfigurationError {
  return new ConfigurationError({ issues: [{ path, message }] });
}

/**
 * Throws a {@link ConfigurationError} naming the field when `options` is not an object of the
 * `allowed` fields, `signal` is not an `AbortSignal`, or `ordered` not a boolean.
 */
export function checkCallOptions(options: unknown, allowed: readonly string[]): void {
  if (options === undefined) return;
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw fail("options", `expected an object of ${allowed.join(", ")}, received ${String(options)}`);
  // Once per call (every pool.run and pool.submit): when every field is known, nothing is built.
  for (const key in options) {
    if (!Object.hasOwn(options, key) || allowed.includes(key)) continue;
    const unknown = Object.keys(options).filter((field) => !allowed.includes(field));
    throw fail(
      "options",
      `unknown field ${unknown.map((field) => JSON.stringify(field)).join(", ")} (expected ${allowed.join(", ")})`,
    );
  }
  const { signal, ordered } = options as { signal?: unknown; ordered?: unknown };
  checkAbortSignal(signal, "options.signal");
  if (ordered !== undefined && typeof ordered !== "boolean")
    throw fail("options.ordered", `expected a boolean, received ${String(ordered)}`);
}
