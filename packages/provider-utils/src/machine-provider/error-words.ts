/**
 * A classifier written as data: APIs that answer most refusals with one status (TensorDock's and
 * Hyperstack's 400) are told apart by the words of their message, tried in the table's order.
 */
import type { MachineErrorClassifier, MachineErrorKind } from "./errors.js";

/** One row: the words of a message, and the kind they mean. */
export type ErrorWords = readonly [words: RegExp, kind: MachineErrorKind];

/**
 * The classifier of `table`: the first row whose words the message holds gives the kind. No answer,
 * a 5xx and a 429 are left to their status (retried), whatever they say.
 */
export function classifyByWords(table: readonly ErrorWords[]): MachineErrorClassifier {
  return ({ statusCode, message }) =>
    statusCode === undefined || statusCode >= 500 || statusCode === 429
      ? undefined
      : table.find(([words]) => words.test(message))?.[1];
}
