import type { z } from "zod";
import { ConfigurationError, type ConfigurationIssue } from "./errors.js";

/** Renders a zod path as `a.b[0].c`, prefixed with `prefix` when given. */
export function formatPath(path: readonly PropertyKey[], prefix = ""): string {
  let out = prefix;
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else {
      const key = String(segment);
      const plain = /^[A-Za-z_$][\w$-]*$/.test(key);
      if (plain) out += out ? `.${key}` : key;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out;
}

function describeReceived(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  return typeof value;
}

type AnyIssue = z.core.$ZodIssue;

/** Turns zod issues into configuration issues, each naming its field path and what was expected. */
export function toConfigurationIssues(
  issues: readonly AnyIssue[],
  prefix = "",
  input?: unknown,
): ConfigurationIssue[] {
  const out: ConfigurationIssue[] = [];
  for (const issue of issues) {
    const path = formatPath(issue.path, prefix);
    switch (issue.code) {
      case "unrecognized_keys":
        for (const key of issue.keys) {
          out.push({ path: formatPath([...issue.path, key], prefix), message: "unknown field" });
        }
        break;
      case "invalid_type": {
        const received = valueAt(input, issue.path);
        const message =
          issue.message && !issue.message.startsWith("Invalid input")
            ? issue.message
            : `expected ${issue.expected}, received ${received.found ? describeReceived(received.value) : "nothing"}`;
        out.push({ path, message });
        break;
      }
      case "invalid_union": {
        // A branch that got past the value's own type says most: one whose issues sit deeper, or
        // one that accepted the type but not the value. Otherwise the union's message says what
        // was expected.
        const score = (branch: readonly AnyIssue[]) =>
          depth(branch) > 0 ? 2 : branch.some((inner) => inner.code !== "invalid_type") ? 1 : 0;
        const best = issue.errors
          .filter((branch) => branch.length > 0)
          .sort((a, b) => score(b) - score(a) || depth(b) - depth(a))[0];
        if (best && score(best) > 0) {
          const absolute = best.map(
            (inner) => ({ ...inner, path: [...issue.path, ...inner.path] }) as AnyIssue,
          );
          out.push(...toConfigurationIssues(absolute, prefix, input));
        } else out.push({ path, message: issue.message || "invalid value" });
        break;
      }
      default:
        out.push({ path, message: issue.message });
    }
  }
  return out;
}

function depth(issues: readonly AnyIssue[]): number {
  return Math.max(...issues.map((issue) => issue.path.length));
}

function valueAt(input: unknown, path: readonly PropertyKey[]): { found: boolean; value: unknown } {
  let current: unknown = input;
  for (const segment of path) {
    if (current === null || typeof current !== "object" || !(segment in (current as object))) {
      return { found: false, value: undefined };
    }
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return { found: current !== undefined, value: current };
}

/**
 * Parses `input` with `schema`; on failure throws a {@link ConfigurationError} whose issues name
 * each bad field's path (prefixed with `prefix`, e.g. `pools.train`).
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, prefix = ""): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ConfigurationError({ issues: toConfigurationIssues(result.error.issues, prefix, input) });
}

/**
 * A zod error map for `z.number()`: zod rejects NaN and ±Infinity as "not a number", which reads
 * badly; this says what was expected instead. Internal, not re-exported.
 */
export function nonFiniteMessage(expected: string) {
  return (issue: { input?: unknown }): string | undefined =>
    typeof issue.input === "number" ? `expected ${expected}, received ${issue.input}` : undefined;
}
