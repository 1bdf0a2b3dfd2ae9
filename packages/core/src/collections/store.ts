/**
 * The authority of a pool's distributed collections: every `dict`, `set`, `counter`, `queue`,
 * `barrier` and `lock` lives here, in the client process, and every operation — from a task or from
 * the client itself — is applied here one at a time, in arrival order. That single ordering point is
 * what makes `"strong"` linearizable (the shape of Dask's scheduler-held `Lock`/`Queue`/`Variable`).
 *
 * Blocking operations are answered when they can be, never polled: a queue `get` waits in the
 * queue's list of takers (Redis `BLPOP`), a lock `acquire` in the lock's list of waiters (`SET NX`
 * whose "expiry" is the end of the holder's task, not a clock), a barrier `wait` until its `n`th
 * caller arrives. Each wait has its own timer for its timeout, and is dropped when its task ends.
 */
import { CancelledError, ConfigurationError } from "../errors/errors.js";
import type { WireValue } from "../protocol/protocol.js";

/** The reserved function name a task's collection operation travels under (a `subtask` message). */
export const COLLECTION_REF = "skyward.collections:op";

/** Who asks: a task (by id) or the client itself. Locks are held by an owner. */
export type Owner = string;

/** The client's own owner id (locks taken with `pool.lock(…)`). */
export const CLIENT_OWNER = "client";

/** A pending operation: its answer, and a way to give up on it (its task ended, an abort). */
export interface Pending {
  readonly answer: Promise<WireValue>;
  cancel(reason: string): void;
}

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

interface Waiter {
  readonly owner: Owner;
  resolve(value: WireValue): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout> | undefined;
  done: boolean;
}

interface QueueState {
  readonly items: WireValue[];
  head: number;
  readonly takers: Waiter[];
}

interface BarrierState {
  parties: number;
  readonly arrived: Waiter[];
  generation: number;
}

interface LockState {
  holder: Owner | undefined;
  readonly waiters: Waiter[];
}

/**
 * The collections' contents, as a detached pool's state file keeps them (sealed): every dict, set,
 * counter and queue, and each held lock's holder. Waits are not in it: a task's pending wait is
 * asked again of the next client by its worker (docs/sessions.md).
 */
export interface CollectionsSnapshot {
  readonly dicts: readonly (readonly [string, readonly (readonly [WireValue, WireValue])[]])[];
  readonly sets: readonly (readonly [string, readonly WireValue[]])[];
  readonly counters: readonly (readonly [string, number | bigint])[];
  readonly queues: readonly (readonly [string, readonly WireValue[]])[];
  /** `[lock name, holder task id]`. */
  readonly locks: readonly (readonly [string, Owner])[];
}

const KINDS = ["dict", "set", "counter", "queue", "barrier", "lock"] as const;
type Kind = (typeof KINDS)[number];

/** Every collection of one pool, and the waits on them. */
export class CollectionStore {
  readonly #dicts = new Map<string, Map<string, [WireValue, WireValue]>>();
  readonly #sets = new Map<string, Map<string, WireValue>>();
  readonly #counters = new Map<string, number | bigint>();
  readonly #queues = new Map<string, QueueState>();
  readonly #barriers = new Map<string, BarrierState>();
  readonly #locks = new Map<string, LockState>();
  /** The locks each owner holds, released when it ends. */
  readonly #held = new Map<Owner, Set<string>>();
  /** The waits each owner has open, dropped when it ends. */
  readonly #waits = new Map<Owner, Set<Waiter>>();
  readonly #enabled: boolean;
  #closed: string | undefined;
  /** Set by {@link freeze}: nothing changes any more (the pool is being detached). */
  #frozen = false;

  constructor(options: { enabled: boolean }) {
    this.#enabled = options.enabled;
  }

  /** Throws the error that names `options.cluster` when collections are off. */
  checkEnabled(): void {
    if (!this.#enabled) throw disabledError();
  }

  /**
   * Applies one operation for `owner`. `op` is the task's argument list: `[kind, name, op, …args]`.
   * Immediate operations settle at once; blocking ones when satisfied, on timeout, or on `cancel`.
   */
  apply(owner: Owner, request: readonly WireValue[]): Pending {
    if (!this.#enabled) return settled(Promise.reject(disabledError()));
    if (this.#closed !== undefined)
      return settled(Promise.reject(new CancelledError({ message: this.#closed })));
    try {
      const [kind, name, op, ...args] = request;
      if (typeof kind !== "string" || !(KINDS as readonly string[]).includes(kind))
        throw new CollectionOpError(`unknown collection kind ${String(kind)}`, "ValueError");
      if (typeof name !== "string" || name === "")
        throw new CollectionOpError("a collection's name must be a non-empty string", "ValueError");
      if (typeof op !== "string") throw new CollectionOpError("missing operation", "ValueError");
      return this.#dispatch(kind as Kind, name, op, args, owner);
    } catch (error) {
      return settled(Promise.reject(error));
    }
  }

  /**
   * The pool is being detached: no operation is applied from now on (the client's are refused with
   * `reason`; the workers park theirs for the next client), and a task ending keeps its locks —
   * whoever attaches releases those of tasks no longer running. Returns the contents, for the state
   * file: locks held by tasks are kept, those of the client's own `pool.lock` handles (which end
   * with this process) are not.
   */
  freeze(reason: string): CollectionsSnapshot {
    this.#closed = reason;
    this.#frozen = true;
    return {
      dicts: [...this.#dicts].map(([name, dict]) => [name, [...dict.values()]] as const),
      sets: [...this.#sets].map(([name, set]) => [name, [...set.values()]] as const),
      counters: [...this.#counters],
      queues: [...this.#queues].map(([name, queue]) => [name, queue.items.slice(queue.head)] as const),
      locks: [...this.#locks]
        .filter(([, lock]) => lock.holder !== undefined && !isClientOwner(lock.holder))
        .map(([name, lock]) => [name, lock.holder as Owner] as const),
    };
  }

  /** Loads a detached pool's collections (into an empty store, before any operation). */
  restore(snapshot: CollectionsSnapshot): void {
    for (const [name, entries] of snapshot.dicts)
      this.#dicts.set(name, new Map(entries.map(([key, value]) => [keyOf(key), [key, value]] as const)));
    for (const [name, values] of snapshot.sets)
      this.#sets.set(name, new Map(values.map((value) => [keyOf(value), value] as const)));
    for (const [name, value] of snapshot.counters) this.#counters.set(name, value);
    for (const [name, items] of snapshot.queues)
      this.#queues.set(name, { items: [...items], head: 0, takers: [] });
    for (const [name, holder] of snapshot.locks) {
      const lock: LockState = { holder: undefined, waiters: [] };
      this.#locks.set(name, lock);
      this.#take(name, lock, holder);
    }
  }

  /** Whether {@link freeze} was called: a worker's operation arriving now is left for the next client. */
  get frozen(): boolean {
    return this.#frozen;
  }

  /** The owners holding a lock now. */
  holders(): Owner[] {
    return [...this.#held].filter(([, names]) => names.size > 0).map(([owner]) => owner);
  }

  /** `owner` (a task) ended or was lost with its node: its locks are released, its waits dropped. */
  ownerEnded(owner: Owner): void {
    if (this.#frozen) return;
    const waits = this.#waits.get(owner);
    if (waits) {
      this.#waits.delete(owner);
      for (const waiter of waits) {
        this.#drop(waiter);
        waiter.reject(new CancelledError({ message: `its task ${owner} ended` }));
      }
    }
    const held = this.#held.get(owner);
    if (held) {
      this.#held.delete(owner);
      for (const name of held) {
        const lock = this.#locks.get(name);
        if (lock?.holder === owner) this.#handOver(name, lock);
      }
    }
  }

  /** The pool is going away: every pending wait (the client's included) is rejected; no new one may start. */
  close(reason: string): void {
    this.#closed = reason;
    for (const owner of [...this.#waits.keys()]) {
      const waits = this.#waits.get(owner);
      this.#waits.delete(owner);
      for (const waiter of waits ?? []) {
        this.#drop(waiter);
        waiter.reject(new CancelledError({ message: reason }));
      }
    }
  }

  #dispatch(kind: Kind, name: string, op: string, args: WireValue[], owner: Owner): Pending {
    switch (kind) {
      case "dict":
        return now(this.#dictOp(name, op, args));
      case "set":
        return now(this.#setOp(name, op, args));
      case "counter":
        return now(this.#counterOp(name, op, args));
      case "queue":
        return this.#queueOp(name, op, args, owner);
      case "barrier":
        return this.#barrierOp(name, op, args, owner);
      case "lock":
        return this.#lockOp(name, op, args, owner);
    }
  }

  // ———————————————————————————————————————————————————————————————— dict, set, counter

  #dictOp(name: string, op: string, args: WireValue[]): WireValue {
    let dict = this.#dicts.get(name);
    if (!dict) {
      dict = new Map();
      this.#dicts.set(name, dict);
    }
    const [key, value] = args;
    switch (op) {
      case "get": {
        const entry = dict.get(keyOf(key));
        return entry ? [true, entry[1]] : [false, null];
      }
      case "set":
        this.#dictSet(dict, key as WireValue, value as WireValue);
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
        for (const [k, v] of key as [WireValue, WireValue][]) this.#dictSet(dict, k, v);
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
  #dictSet(dict: Map<string, [WireValue, WireValue]>, key: WireValue, value: WireValue): void {
    const canonical = keyOf(key);
    const existing = dict.get(canonical);
    dict.set(canonical, [existing ? existing[0] : key, value]);
  }

  #setOp(name: string, op: string, args: WireValue[]): WireValue {
    let set = this.#sets.get(name);
    if (!set) {
      set = new Map();
      this.#sets.set(name, set);
    }
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

  #counterOp(name: string, op: string, args: WireValue[]): WireValue {
    const current = this.#counters.get(name) ?? 0;
    const [amount] = args;
    const n = amount === undefined || amount === null ? 1 : amount;
    switch (op) {
      case "value":
        return current;
      case "increment":
        return this.#setCounter(name, add(current, integer(n, "n")));
      case "decrement":
        return this.#setCounter(name, add(current, negate(integer(n, "n"))));
      case "reset":
        return this.#setCounter(name, integer(amount === undefined || amount === null ? 0 : amount, "value"));
      default:
        throw unknownOp("counter", op);
    }
  }

  #setCounter(name: string, value: number | bigint): number | bigint {
    this.#counters.set(name, value);
    return value;
  }

  // ———————————————————————————————————————————————————————————————— queue

  #queueOp(name: string, op: string, args: WireValue[], owner: Owner): Pending {
    let queue = this.#queues.get(name);
    if (!queue) {
      queue = { items: [], head: 0, takers: [] };
      this.#queues.set(name, queue);
    }
    switch (op) {
      case "put": {
        const value = (args[0] ?? null) as WireValue;
        // A waiting taker gets it directly (first come, first served).
        while (queue.takers.length > 0) {
          const taker = queue.takers.shift() as Waiter;
          if (taker.done) continue;
          this.#settle(taker, [true, value]);
          return now(null);
        }
        queue.items.push(value);
        return now(null);
      }
      case "get": {
        if (queue.items.length > queue.head) return now([true, takeFirst(queue)]);
        const timeout = seconds(args[0], "timeout");
        if (timeout === 0) return now([false, null]);
        return this.#wait(owner, queue.takers, timeout, [false, null]);
      }
      case "len":
        return now(queue.items.length - queue.head);
      case "empty":
        return now(queue.items.length === queue.head);
      default:
        throw unknownOp("queue", op);
    }
  }

  // ———————————————————————————————————————————————————————————————— barrier

  #barrierOp(name: string, op: string, args: WireValue[], owner: Owner): Pending {
    if (op !== "wait") throw unknownOp("barrier", op);
    const parties = args[0];
    if (typeof parties !== "number" || !Number.isInteger(parties) || parties < 1)
      throw new CollectionOpError(
        `barrier n must be a positive integer, not ${String(parties)}`,
        "ValueError",
      );
    let barrier = this.#barriers.get(name);
    if (!barrier) {
      barrier = { parties, arrived: [], generation: 0 };
      this.#barriers.set(name, barrier);
    }
    if (barrier.arrived.length === 0) barrier.parties = parties;
    else if (barrier.parties !== parties)
      throw new CollectionOpError(
        `barrier ${JSON.stringify(name)} is waiting for ${barrier.parties} callers; this caller asked for ${parties}`,
        "ValueError",
      );
    const timeout = seconds(args[1], "timeout");
    const index = barrier.arrived.filter((waiter) => !waiter.done).length;
    if (index + 1 >= barrier.parties) {
      // The last caller: everyone goes, and the barrier is ready for the next round.
      const arrived = barrier.arrived.splice(0);
      barrier.generation += 1;
      let position = 0;
      for (const waiter of arrived) if (!waiter.done) this.#settle(waiter, position++);
      return now(position);
    }
    return this.#wait(owner, barrier.arrived, timeout, null);
  }

  // ———————————————————————————————————————————————————————————————— lock

  #lockOp(name: string, op: string, args: WireValue[], owner: Owner): Pending {
    let lock = this.#locks.get(name);
    if (!lock) {
      lock = { holder: undefined, waiters: [] };
      this.#locks.set(name, lock);
    }
    switch (op) {
      case "acquire": {
        if (lock.holder === undefined) {
          this.#take(name, lock, owner);
          return now(true);
        }
        const timeout = seconds(args[0], "timeout");
        if (timeout === 0) return now(false);
        const lockName = name;
        const state = lock;
        const pending = this.#wait(owner, lock.waiters, timeout, false, (granted) => {
          // Called when the waiter is settled true by #handOver: it holds the lock now.
          if (granted === true) this.#take(lockName, state, owner);
        });
        return pending;
      }
      case "release": {
        if (lock.holder !== owner)
          throw new CollectionOpError(
            lock.holder === undefined
              ? `lock ${JSON.stringify(name)} is not held: release() without acquire()`
              : `lock ${JSON.stringify(name)} is held by another holder (another task, or another pool.lock handle): only the task or handle that acquired it can release it`,
            "RuntimeError",
          );
        this.#held.get(owner)?.delete(name);
        this.#handOver(name, lock);
        return now(null);
      }
      case "locked":
        return now(lock.holder !== undefined);
      default:
        throw unknownOp("lock", op);
    }
  }

  #take(name: string, lock: LockState, owner: Owner): void {
    lock.holder = owner;
    let held = this.#held.get(owner);
    if (!held) {
      held = new Set();
      this.#held.set(owner, held);
    }
    held.add(name);
  }

  /** The holder let go: the longest waiter gets the lock, or it is free. */
  #handOver(_name: string, lock: LockState): void {
    lock.holder = undefined;
    while (lock.waiters.length > 0) {
      const waiter = lock.waiters.shift() as Waiter;
      if (waiter.done) continue;
      this.#settle(waiter, true);
      return;
    }
  }

  // ———————————————————————————————————————————————————————————————— waits

  /** A wait in `list` until settled, `timeout` seconds (null: none) pass (answering `onTimeout`), or cancelled. */
  #wait(
    owner: Owner,
    list: Waiter[],
    timeout: number | null,
    onTimeout: WireValue,
    onSettle?: (value: WireValue) => void,
  ): Pending {
    let resolve!: (value: WireValue) => void;
    let reject!: (error: Error) => void;
    const answer = new Promise<WireValue>((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    const waiter: Waiter = {
      owner,
      done: false,
      timer: undefined,
      resolve: (value) => {
        onSettle?.(value);
        resolve(value);
      },
      reject,
    };
    list.push(waiter);
    let waits = this.#waits.get(owner);
    if (!waits) {
      waits = new Set();
      this.#waits.set(owner, waits);
    }
    waits.add(waiter);
    if (timeout !== null) {
      waiter.timer = setTimeout(() => {
        if (waiter.done) return;
        this.#drop(waiter);
        removeFrom(list, waiter);
        resolve(onTimeout);
      }, timeout * 1000);
    }
    return {
      answer,
      cancel: (reason) => {
        if (waiter.done) return;
        this.#drop(waiter);
        removeFrom(list, waiter);
        reject(new CancelledError({ message: reason }));
      },
    };
  }

  #settle(waiter: Waiter, value: WireValue): void {
    this.#drop(waiter);
    waiter.resolve(value);
  }

  #drop(waiter: Waiter): void {
    if (waiter.done) return;
    waiter.done = true;
    if (waiter.timer) clearTimeout(waiter.timer);
    const waits = this.#waits.get(waiter.owner);
    if (waits) {
      waits.delete(waiter);
      if (waits.size === 0) this.#waits.delete(waiter.owner);
    }
  }
}

/** The client itself, or one of its `pool.lock` handles (`client:<uuid>`), as opposed to a task. */
function isClientOwner(owner: Owner): boolean {
  return owner === CLIENT_OWNER || owner.startsWith(`${CLIENT_OWNER}:`);
}

function disabledError(): ConfigurationError {
  return new ConfigurationError({
    issues: [
      {
        path: "options.cluster",
        message:
          "distributed collections need the nodes to form a cluster: the pool was made with options.cluster: false (set it to true, the default, to use dict, set, counter, queue, barrier and lock)",
      },
    ],
  });
}

function unknownOp(kind: string, op: string): CollectionOpError {
  return new CollectionOpError(`a ${kind} has no operation ${JSON.stringify(op)}`, "ValueError");
}

function now(value: WireValue): Pending {
  return settled(Promise.resolve(value));
}

function settled(answer: Promise<WireValue>): Pending {
  return { answer, cancel: () => undefined };
}

function takeFirst(queue: QueueState): WireValue {
  const value = queue.items[queue.head] as WireValue;
  queue.items[queue.head] = null;
  queue.head += 1;
  if (queue.head > 1024 && queue.head * 2 > queue.items.length) {
    queue.items.splice(0, queue.head);
    queue.head = 0;
  }
  return value;
}

function removeFrom(list: Waiter[], waiter: Waiter): void {
  const index = list.indexOf(waiter);
  if (index >= 0) list.splice(index, 1);
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

/** A timeout argument: null/undefined for none, else non-negative seconds. */
function seconds(value: unknown, what: string): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0)
    throw new CollectionOpError(
      `${what} must be null or a non-negative number of seconds, not ${String(value)}`,
      "ValueError",
    );
  return value;
}
