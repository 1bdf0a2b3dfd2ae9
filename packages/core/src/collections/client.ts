/**
 * The client's view of a pool's distributed collections (`pool.dict(…)`, `pool.queue(…)` …): the
 * same operations tasks have (`sky.dict` …), typed and async, applied to the pool's authority on
 * its head node. Every value goes through the wire encoding first, so the client stores exactly
 * what a task would read back (and an unsendable value fails here, not in a task).
 */
import { randomUUID } from "node:crypto";
import { CancelledError, SerializationError } from "../errors/errors.js";
import { decodeFrame, encodeFrame, type WireValue } from "../protocol/protocol.js";
import { CLIENT_OWNER, CollectionOpError, type Owner, type Pending } from "./operation.js";

/** Options of a collection operation from the client. */
export interface CollectionCallOptions {
  /** Aborting gives up on the operation (a blocking one stops waiting) with a `CancelledError`. */
  readonly signal?: AbortSignal;
}

/** Options of an operation that may wait: a queue `get`, a barrier `wait`, a lock `acquire`. */
export interface BlockingCallOptions extends CollectionCallOptions {
  /** Seconds to wait at most; default: as long as it takes. */
  readonly timeout?: number;
}

/** The operations the client's handles need: apply one (on the head), and check the pool can run it. */
export interface CollectionHost {
  apply(owner: Owner, request: readonly WireValue[]): Pending;
  /** Throws when the pool is not ready (closed, or collections are off). */
  check(): void;
}

/**
 * Round-trips `value` through the wire encoding: what a task reads back, or a SerializationError.
 * A string, a boolean, null or an exact integer (not -0) reads back as itself: no round trip.
 */
function wire(value: unknown, what: string): WireValue {
  if (
    value === null ||
    typeof value === "string" ||
    typeof value === "boolean" ||
    (Number.isSafeInteger(value) && !Object.is(value, -0))
  )
    return value as WireValue;
  let frames: Uint8Array[];
  try {
    frames = encodeFrame([{ t: "subresult", id: "c", sub: 0, value: value as WireValue }]);
  } catch (error) {
    throw new SerializationError({
      side: "client",
      message: `${what}: ${(error as Error).message}`,
      cause: error,
    });
  }
  const bytes = Buffer.concat(frames);
  const [message] = decodeFrame(bytes);
  return (message as { value: WireValue }).value;
}

abstract class Handle {
  /** The collection's name. */
  readonly name: string;
  readonly #host: CollectionHost;
  readonly #kind: string;
  readonly #owner: Owner;

  constructor(host: CollectionHost, kind: string, name: string, owner: Owner = CLIENT_OWNER) {
    if (typeof name !== "string" || name === "")
      throw new TypeError(`a ${kind}'s name must be a non-empty string`);
    this.#host = host;
    this.#kind = kind;
    this.name = name;
    this.#owner = owner;
  }

  /** Applies `op` with `args`, giving up when `signal` aborts. */
  protected async call(
    op: string,
    args: readonly unknown[],
    options?: CollectionCallOptions,
  ): Promise<WireValue> {
    this.#host.check();
    const signal = options?.signal;
    const what = `${this.#kind} ${JSON.stringify(this.name)}.${op}`;
    if (signal?.aborted) throw new CancelledError({ message: `${what} was aborted`, cause: signal.reason });
    const request = [
      this.#kind,
      this.name,
      op,
      ...args.map((arg, index) => wire(arg, `${what} argument ${index}`)),
    ];
    const pending = this.#host.apply(this.#owner, request);
    if (!signal) return unwrap(pending.answer);
    const onAbort = () => pending.cancel(`${what} was aborted`);
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      return await unwrap(pending.answer);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }
}

async function unwrap(answer: Promise<WireValue>): Promise<WireValue> {
  try {
    return await answer;
  } catch (error) {
    if (error instanceof CollectionOpError) throw new TypeError(error.message);
    throw error;
  }
}

function found<V>(answer: WireValue): V | undefined {
  const [ok, value] = answer as [boolean, WireValue];
  return ok ? (value as V) : undefined;
}

/**
 * A pool-wide dict by name (`sky.dict(name)` in tasks). A stored `null` (Python `None`) is a value:
 * `get` answers `undefined` only for a missing key. Keys compare as in a Python dict: `true`, `1`
 * and `1n` (Python's `True`, `1`, `1.0`) are one key, and the first one stored stays; `"1"` and a
 * `Uint8Array` of it are other keys; every `NaN` is one key.
 */
export class DistributedDict<V = unknown, K = string> extends Handle {
  /** @internal Use `pool.dict(name)`. */
  constructor(host: CollectionHost, name: string) {
    super(host, "dict", name);
  }

  /** The value under `key`, or `undefined` when there is none. */
  async get(key: K, options?: CollectionCallOptions): Promise<V | undefined> {
    return found<V>(await this.call("get", [key], options));
  }

  /** Stores `value` under `key`. */
  async set(key: K, value: V, options?: CollectionCallOptions): Promise<void> {
    await this.call("set", [key, value], options);
  }

  /** Whether `key` is present. */
  async has(key: K, options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("has", [key], options)) === true;
  }

  /** Removes `key`; whether it was present. */
  async delete(key: K, options?: CollectionCallOptions): Promise<boolean> {
    return ((await this.call("pop", [key], options)) as [boolean])[0];
  }

  /** Removes `key` and answers its value (`undefined` when it was missing). */
  async pop(key: K, options?: CollectionCallOptions): Promise<V | undefined> {
    return found<V>(await this.call("pop", [key], options));
  }

  /** Stores every entry, atomically (no task sees half of them). */
  async update(
    entries: Iterable<readonly [K, V]> | Record<string, V>,
    options?: CollectionCallOptions,
  ): Promise<void> {
    const pairs =
      Symbol.iterator in Object(entries)
        ? [...(entries as Iterable<readonly [K, V]>)].map(([key, value]) => [key, value])
        : Object.entries(entries as Record<string, V>);
    await this.call("update", [pairs], options);
  }

  /** How many entries it holds. */
  async size(options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("len", [], options));
  }

  /** A snapshot of its entries. */
  async entries(options?: CollectionCallOptions): Promise<[K, V][]> {
    return (await this.call("items", [], options)) as unknown as [K, V][];
  }
}

/** A pool-wide set by name (`sky.set(name)` in tasks). Members compare as in a Python set (see {@link DistributedDict}). */
export class DistributedSet<T = unknown> extends Handle {
  /** @internal Use `pool.set(name)`. */
  constructor(host: CollectionHost, name: string) {
    super(host, "set", name);
  }

  /** Adds `value`; whether it was new. */
  async add(value: T, options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("add", [value], options)) === true;
  }

  /** Removes `value`; whether it was present. */
  async discard(value: T, options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("discard", [value], options)) === true;
  }

  /** Whether `value` is a member. */
  async has(value: T, options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("has", [value], options)) === true;
  }

  /** How many members it has. */
  async size(options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("len", [], options));
  }

  /** A snapshot of its members. */
  async values(options?: CollectionCallOptions): Promise<T[]> {
    return (await this.call("values", [], options)) as unknown as T[];
  }
}

/** A pool-wide integer counter by name (`sky.counter(name)` in tasks); exact up to 2^53. */
export class DistributedCounter extends Handle {
  /** @internal Use `pool.counter(name)`. */
  constructor(host: CollectionHost, name: string) {
    super(host, "counter", name);
  }

  /** Its current value. */
  async value(options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("value", [], options));
  }

  /** Adds `n` (default 1) and answers the new value. */
  async increment(n = 1, options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("increment", [n], options));
  }

  /** Subtracts `n` (default 1) and answers the new value. */
  async decrement(n = 1, options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("decrement", [n], options));
  }

  /** Sets it to `value` (default 0) in one step. */
  async reset(value = 0, options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("reset", [value], options));
  }
}

/** A pool-wide FIFO queue by name (`sky.queue(name)` in tasks): each item is taken exactly once. */
export class DistributedQueue<T = unknown> extends Handle {
  /** @internal Use `pool.queue(name)`. */
  constructor(host: CollectionHost, name: string) {
    super(host, "queue", name);
  }

  /** Appends `value` (a waiting `get` takes it at once). */
  async put(value: T, options?: CollectionCallOptions): Promise<void> {
    await this.call("put", [value], options);
  }

  /**
   * Takes the oldest item, waiting for one up to `timeout` seconds (default: as long as it takes);
   * `undefined` on timeout. A stored `null` (Python `None`) is an item.
   */
  async get(options?: BlockingCallOptions): Promise<T | undefined> {
    return found<T>(await this.call("get", [options?.timeout ?? null], options));
  }

  /** How many items wait in it. */
  async size(options?: CollectionCallOptions): Promise<number> {
    return Number(await this.call("len", [], options));
  }

  /** Whether it holds no item. */
  async empty(options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("empty", [], options)) === true;
  }
}

/** A pool-wide barrier by name for `n` callers (`sky.barrier(name, n)` in tasks), reusable round after round. */
export class DistributedBarrier extends Handle {
  /** How many callers each round waits for. */
  readonly parties: number;

  /** @internal Use `pool.barrier(name, n)`. */
  constructor(host: CollectionHost, name: string, parties: number) {
    super(host, "barrier", name);
    if (!Number.isInteger(parties) || parties < 1)
      throw new TypeError(`barrier n must be a positive integer, received ${String(parties)}`);
    this.parties = parties;
  }

  /**
   * Waits until `n` callers (tasks or the client) have arrived; answers this caller's arrival index
   * (0 … n-1). Rejects with a `CancelledError` on timeout or abort (this caller no longer counts).
   */
  async wait(options?: BlockingCallOptions): Promise<number> {
    const index = await this.call("wait", [this.parties, options?.timeout ?? null], options);
    if (index === null)
      throw new CancelledError({
        message: `barrier ${JSON.stringify(this.name)}: fewer than ${this.parties} callers arrived within ${options?.timeout} s`,
      });
    return Number(index);
  }
}

/**
 * A pool-wide mutex by name (`sky.lock(name)` in tasks). Each handle is its own holder: two handles
 * exclude each other as two tasks do.
 */
export class DistributedLock extends Handle {
  readonly #timeout: number | undefined;

  /** @internal Use `pool.lock(name)`. */
  constructor(host: CollectionHost, name: string, timeout?: number) {
    super(host, "lock", name, `${CLIENT_OWNER}:${randomUUID()}`);
    this.#timeout = timeout;
  }

  /** Takes the lock, waiting up to `timeout` seconds (default: the handle's); false if it did not get it. */
  async acquire(options?: BlockingCallOptions): Promise<boolean> {
    return (await this.call("acquire", [options?.timeout ?? this.#timeout ?? null], options)) === true;
  }

  /** Lets the lock go (rejects with a `TypeError` when this handle does not hold it). */
  async release(options?: CollectionCallOptions): Promise<void> {
    await this.call("release", [], options);
  }

  /** Whether anyone holds it now. */
  async locked(options?: CollectionCallOptions): Promise<boolean> {
    return (await this.call("locked", [], options)) === true;
  }

  /** Runs `fn` holding the lock and releases it after; rejects with a `CancelledError` if it was not acquired in time. */
  async hold<R>(fn: () => R | Promise<R>, options?: BlockingCallOptions): Promise<R> {
    if (!(await this.acquire(options)))
      throw new CancelledError({
        message: `lock ${JSON.stringify(this.name)} was not acquired within ${options?.timeout ?? this.#timeout} s`,
      });
    try {
      return await fn();
    } finally {
      await this.release();
    }
  }
}
