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

/**
 * Throws a {@link ConfigurationError} naming the field when `options` is not an object of the
 * `allowed` fields, `signal` is not an `AbortSignal`, or `ordered` not a boolean.
 */
export function checkCallOptions(options: unknown, allowed: readonly string[]): void {
  const fail = (path: string, message: string) => new ConfigurationError({ issues: [{ path, message }] });
  if (options === undefined) return;
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw fail("options", `expected an object of ${allowed.join(", ")}, received ${String(options)}`);
  const unknown = Object.keys(options).filter((key) => !allowed.includes(key));
  if (unknown.length > 0)
    throw fail(
      "options",
      `unknown field ${unknown.map((key) => JSON.stringify(key)).join(", ")} (expected ${allowed.join(", ")})`,
    );
  const { signal, ordered } = options as { signal?: unknown; ordered?: unknown };
  checkAbortSignal(signal, "options.signal");
  if (ordered !== undefined && typeof ordered !== "boolean")
    throw fail("options.ordered", `expected a boolean, received ${String(ordered)}`);
}
