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
import {
  CollectionOpError,
  counterOperation,
  dictOperation,
  keyOf,
  setOperation,
  unknownOp,
} from "./immediate.js";

export { CollectionOpError, keyOf } from "./immediate.js";

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
        return now(
          dictOperation(
            getOrCreate(this.#dicts, name, () => new Map()),
            op,
            args,
          ),
        );
      case "set":
        return now(
          setOperation(
            getOrCreate(this.#sets, name, () => new Map()),
            op,
            args,
          ),
        );
      case "counter": {
        const value = counterOperation(this.#counters.get(name) ?? 0, op, args);
        if (op !== "value") this.#counters.set(name, value);
        return now(value);
      }
      case "queue":
        return this.#queueOp(name, op, args, owner);
      case "barrier":
        return this.#barrierOp(name, op, args, owner);
      case "lock":
        return this.#lockOp(name, op, args, owner);
    }
  }

  // ———————————————————————————————————————————————————————————————— queue

  #queueOp(name: string, op: string, args: WireValue[], owner: Owner): Pending {
    const queue = getOrCreate(this.#queues, name, () => ({ items: [], head: 0, takers: [] }));
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
    const lock = getOrCreate(this.#locks, name, (): LockState => ({ holder: undefined, waiters: [] }));
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
    getOrCreate(this.#held, owner, () => new Set<string>()).add(name);
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
    getOrCreate(this.#waits, owner, () => new Set<Waiter>()).add(waiter);
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

/** The entry of `map` under `key`, made by `create` (and kept) on first use. */
function getOrCreate<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
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
