/**
 * An error classifier written as data: rules read in order, the first whose conditions all hold gives
 * the kind. A provider's classification is then a table of what its API documents (a status, an
 * `error` code in the answer, words of the message), not a function each provider writes again.
 */
import type { MachineErrorClassifier, MachineErrorKind, MachineErrorStructure } from "./errors.js";

/** One rule: every condition given must hold. */
export interface MachineErrorRule {
  /** The kind; `undefined` leaves the failure to the HTTP status's default kind. */
  readonly kind: MachineErrorKind | undefined;
  /** HTTP statuses: a number, `"5xx"` for any server error, `"none"` for a failure without one. */
  readonly status?: readonly (number | "5xx" | "none")[];
  /** Words of the message. */
  readonly words?: RegExp;
  /** Values of the answer's `error` field (`no_such_instance`). */
  readonly code?: readonly string[];
}

/** The first rule of most tables: no answer, a 5xx or a 429 is left to its status (retried), whatever it says. */
export const LEFT_TO_STATUS: MachineErrorRule = Object.freeze<MachineErrorRule>({
  status: ["none", "5xx", 429],
  kind: undefined,
});

function statusMatches(statuses: readonly (number | "5xx" | "none")[], status: number | undefined) {
  return statuses.some((entry) =>
    entry === "none" ? status === undefined : entry === "5xx" ? (status ?? 0) >= 500 : entry === status,
  );
}

/** The classifier of `rules`: the first rule that holds, else undefined (the status's default kind). */
export function errorTable(rules: readonly MachineErrorRule[]): MachineErrorClassifier {
  return (failure: MachineErrorStructure) => {
    const field =
      typeof failure.answer === "object" && failure.answer !== null
        ? (failure.answer as { error?: unknown }).error
        : undefined;
    const code = typeof field === "string" ? field : "";
    const rule = rules.find(
      (candidate) =>
        (candidate.status === undefined || statusMatches(candidate.status, failure.statusCode)) &&
        (candidate.code === undefined || candidate.code.includes(code)) &&
        (candidate.words === undefined || candidate.words.test(failure.message)),
    );
    return rule?.kind;
  };
}
