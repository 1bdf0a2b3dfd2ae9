/**
 * The collections whose operations answer at once — dict, set and counter — as functions of their
 * contents, and the canonical keys that make values Python holds equal share an entry.
 */
import type { WireValue } from "../protocol/protocol.js";

/** An operation was refused: bad arguments, a lock released by a task that does not hold it. */
export class CollectionOpError extends Error {
  constructor(
    message: string,
    /** The Python exception type the task should raise. */
    readonly pythonType: string = "RuntimeError",
  ) {
    super(message);
    this.name = "CollectionOpError";
  }
}

/**
 * A canonical string for a wire value, so values Python holds equal share an entry, as they share
 * a key of a Python `dict` or `set` (equal, with the same hash):
 *
 * - numbers compare by value whatever their type: `True == 1 == 1.0`, `False == 0 == -0.0`, and an
 *   integer past 2^53 (a bigint) equals the float of the same value (`2**60 == 2.0**60`, while
 *   `10**300 != 1e300`, which is not exactly that integer);
 * - `str`, `bytes` and numbers stay apart (`"1"`, `b"1"` and `1` are three keys), lists and tuples
 *   (both arrays on the wire) compare item by item (`(True, 2) == (1, 2.0)`), objects field by field
 *   whatever their order;
 * - every NaN is one key. Python's dict finds a NaN key only by identity (`nan != nan`), and no
 *   identity crosses the wire: one key for all of them (JavaScript's `Map` does the same) is what
 *   lets a NaN key be found again at all.
 *
 * The encoding tags every non-string leaf, so no string or object a task sends can spell another
 * value's key.
 */
export function keyOf(value: unknown): string {
  return JSON.stringify(canonicalKey(value));
}

function canonicalKey(item: unknown): unknown {
  switch (typeof item) {
    case "boolean":
      return { $n: item ? "1" : "0" };
    case "bigint":
      return { $n: item.toString() };
    case "number":
      if (Number.isNaN(item)) return { $f: "nan" };
      if (!Number.isFinite(item)) return { $f: item > 0 ? "inf" : "-inf" };
      // An integral float is the integer it equals (exactly: BigInt of a double is exact).
      return { $n: Number.isInteger(item) ? BigInt(item).toString() : String(item) };
    case "string":
      return item;
    default:
      break;
  }
  if (item === null || item === undefined) return null;
  if (item instanceof Uint8Array) return { $b: Buffer.from(item).toString("base64") };
  if (Array.isArray(item)) return item.map(canonicalKey);
  if (typeof item === "object") {
    // Key order must not matter.
    const fields = item as Record<string, unknown>;
    return {
      $o: Object.keys(fields)
        .sort()
        .map((name) => [name, canonicalKey(fields[name])]),
    };
  }
  return { $x: String(item) };
}

/** Applies dict operation `op` to `dict` (created empty by the store on first use). */
export function dictOperation(
  dict: Map<string, [WireValue, WireValue]>,
  op: string,
  args: readonly WireValue[],
): WireValue {
  const [key, value] = args;
  switch (op) {
    case "get": {
      const entry = dict.get(keyOf(key));
      return entry ? [true, entry[1]] : [false, null];
    }
    case "set":
      dictSet(dict, key as WireValue, value as WireValue);
      return null;
    case "has":
      return dict.has(keyOf(key));
    case "pop": {
      const canonical = keyOf(key);
      const entry = dict.get(canonical);
      if (!entry) return [false, null];
      dict.delete(canonical);
      return [true, entry[1]];
    }
    case "update": {
      if (!Array.isArray(key))
        throw new CollectionOpError("update expects a list of [key, value] pairs", "TypeError");
      for (const pair of key as WireValue[]) {
        if (!Array.isArray(pair) || pair.length !== 2)
          throw new CollectionOpError("update expects a list of [key, value] pairs", "TypeError");
      }
      for (const [k, v] of key as [WireValue, WireValue][]) dictSet(dict, k, v);
      return null;
    }
    case "len":
      return dict.size;
    case "items":
      return [...dict.values()].map(([k, v]) => [k, v]);
    case "clear":
      dict.clear();
      return null;
    default:
      throw unknownOp("dict", op);
  }
}

/** `d[key] = value`: an equal key already there stays (as in Python, `d[1] = …; d[True] = …` keeps `1`). */
function dictSet(dict: Map<string, [WireValue, WireValue]>, key: WireValue, value: WireValue): void {
  const canonical = keyOf(key);
  const existing = dict.get(canonical);
  dict.set(canonical, [existing ? existing[0] : key, value]);
}

/** Applies set operation `op` to `set`, keyed by {@link keyOf}. */
export function setOperation(set: Map<string, WireValue>, op: string, args: readonly WireValue[]): WireValue {
  const [value] = args;
  switch (op) {
    case "add": {
      const canonical = keyOf(value);
      if (set.has(canonical)) return false;
      set.set(canonical, value as WireValue);
      return true;
    }
    case "discard":
      return set.delete(keyOf(value));
    case "has":
      return set.has(keyOf(value));
    case "len":
      return set.size;
    case "values":
      return [...set.values()];
    default:
      throw unknownOp("set", op);
  }
}

/** Applies counter operation `op` to a counter at `current`: the counter's value after it. */
export function counterOperation(
  current: number | bigint,
  op: string,
  args: readonly WireValue[],
): number | bigint {
  const [amount] = args;
  const n = amount === undefined || amount === null ? 1 : amount;
  switch (op) {
    case "value":
      return current;
    case "increment":
      return add(current, integer(n, "n"));
    case "decrement":
      return add(current, negate(integer(n, "n")));
    case "reset":
      return integer(amount === undefined || amount === null ? 0 : amount, "value");
    default:
      throw unknownOp("counter", op);
  }
}

/** The error of an operation a collection does not have. */
export function unknownOp(kind: string, op: string): CollectionOpError {
  return new CollectionOpError(`a ${kind} has no operation ${JSON.stringify(op)}`, "ValueError");
}

function integer(value: unknown, what: string): number | bigint {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isInteger(value)) return value;
  throw new CollectionOpError(`counter ${what} must be an integer, not ${String(value)}`, "TypeError");
}

function negate(value: number | bigint): number | bigint {
  return typeof value === "bigint" ? -value : -value;
}

/** Sums exactly: past 2^53 the counter becomes a bigint (the wire's big integers). */
function add(a: number | bigint, b: number | bigint): number | bigint {
  if (typeof a === "number" && typeof b === "number") {
    const sum = a + b;
    if (Number.isSafeInteger(sum)) return sum;
  }
  const big = BigInt(a) + BigInt(b);
  return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
}
