/**
 * The pool's side of remote references (docs/protocol.md, _Remote references_): which nodes hold
 * each reference, moving one to a node that does not hold it yet (once: node to node, `ref-moves.ts`,
 * once the call's node is known — bound, or given by the task manager; worker → client → worker when
 * the peer cannot be reached), fetching and releasing, and what the nodes keep (`pool.refs()`).
 */
import { RemoteRefError } from "../errors/errors.js";
import {
  bindRemoteRef,
  type PyObject,
  RefArgument,
  RemoteRef,
  type RemoteRefOwner,
  type RemoteRefState,
  remoteRefOwner,
} from "../protocol/values.js";
import { setOwn } from "../protocol/wire-primitives.js";
import type { Kwargs } from "./python-function.js";
import { python } from "./python-function.js";
import { type PeerBytes, PeerMoves, type PeerMovesHost } from "./ref-moves.js";
import type { TaskCallbacks } from "./task-manager.js";

/** What one node keeps for remote references, as far as the client has told it. */
export interface RemoteRefNodeStats {
  /** The node. */
  readonly node: number;
  /** How many references it holds. */
  readonly count: number;
  /** Their sizes (pickled) added up, in bytes. */
  readonly bytes: number;
}

/** What `pool.refs()` says: the references held now, and what each node keeps for them. */
export interface RemoteRefStats {
  /** References not released nor lost. */
  readonly count: number;
  /** Their sizes added up, once each (copies on other nodes not counted), in bytes. */
  readonly bytes: number;
  /** Per node holding any: copies moved there included. */
  readonly nodes: readonly RemoteRefNodeStats[];
}

/** A remote reference as a detached pool's state file records it. */
export interface RecordedRef {
  readonly id: string;
  readonly node: number;
  readonly type: string;
  readonly size: number;
  /** The nodes holding it: its own, and those it moved to. */
  readonly holders: readonly number[];
}

interface RefEntry {
  readonly ref: RemoteRef;
  readonly holders: Set<number>;
  state: RemoteRefState;
  /** Its pickle on its way to the client, shared by the moves that need it at the same time. */
  payload: Promise<PyObject> | undefined;
  /** Its moves under way, by the node it moves to: the pickle to carry, or none once moved node to node. */
  readonly moves: Map<number, Promise<PyObject | undefined>>;
}

/** What the registry needs from its pool. */
export interface RemoteRefHost extends PeerMovesHost {
  /** Sends `unref` to a node, if it is connected. */
  unref(node: number, ids: readonly string[]): void;
  /** Whether references move node to node (the workers serve them to each other); else through the client. */
  readonly betweenNodes?: boolean;
}

const pickledOf = python<[value: unknown], PyObject>("skyward.refs:pickled");
const keptValue = python<[value: unknown], unknown>("skyward.refs:value");
/** Deeper than this is not searched for references (the encoder refuses such values anyway). */
const MAX_DEPTH = 64;

/** The remote references among a call's arguments (in arrays and plain objects too), each once. */
export function remoteRefsIn(args: readonly unknown[], kwargs: Kwargs): RemoteRef[] {
  const found = new Set<RemoteRef>();
  const visit = (value: unknown, depth: number): void => {
    if (typeof value !== "object" || value === null || depth > MAX_DEPTH) return;
    if (value instanceof RemoteRef) {
      found.add(value);
      return;
    }
    if (Array.isArray(value)) {
      for (const item of value) visit(item, depth + 1);
      return;
    }
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype === Object.prototype || prototype === null)
      for (const item of Object.values(value)) visit(item, depth + 1);
  };
  for (const arg of args) visit(arg, 0);
  for (const arg of Object.values(kwargs)) visit(arg, 0);
  return [...found];
}

/** `value` with each reference replaced by its {@link RefArgument} (containers copied where one is). */
function substitute(value: unknown, replace: (ref: RemoteRef) => RefArgument, depth: number): unknown {
  if (typeof value !== "object" || value === null || depth > MAX_DEPTH) return value;
  if (value instanceof RemoteRef) return replace(value);
  if (Array.isArray(value)) return value.map((item) => substitute(item, replace, depth + 1));
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const out: Record<string, unknown> = {};
  // setOwn: a `__proto__` key (JSON data has them) is a key here, not the copy's prototype.
  for (const [key, item] of Object.entries(value)) setOwn(out, key, substitute(item, replace, depth + 1));
  return out;
}

/** One pool's remote references. */
export class RemoteRefRegistry implements RemoteRefOwner {
  readonly #host: RemoteRefHost;
  /** Live references by id (released and lost ones are dropped from here). */
  readonly #live = new Map<string, RefEntry>();
  readonly #entries = new WeakMap<RemoteRef, RefEntry>();
  readonly #peers: PeerMoves;

  constructor(host: RemoteRefHost) {
    this.#host = host;
    this.#peers = new PeerMoves(host);
  }

  /** What node `node` served to and fetched from the other nodes for references. */
  peerBytes(node: number): PeerBytes {
    return this.#peers.bytes(node);
  }

  /** Takes in a reference a task returned: this pool's, held on its node (and `holders`, if given). */
  adopt(ref: RemoteRef, holders: readonly number[] = [ref.node]): void {
    const known = this.#live.get(ref.id);
    if (known !== undefined) {
      // The same reference again (a detached pool's, handed over twice): one entry for both objects.
      for (const node of holders) known.holders.add(node);
      this.#entries.set(ref, known);
      bindRemoteRef(ref, this);
      return;
    }
    const entry: RefEntry = {
      ref,
      holders: new Set(holders),
      state: "held",
      payload: undefined,
      moves: new Map(),
    };
    this.#live.set(ref.id, entry);
    this.#entries.set(ref, entry);
    bindRemoteRef(ref, this);
  }

  state(ref: RemoteRef): RemoteRefState {
    return this.#entries.get(ref)?.state ?? "released";
  }

  holders(ref: RemoteRef): readonly number[] {
    const entry = this.#entries.get(ref);
    return entry?.state === "held" ? [...entry.holders].sort((a, b) => a - b) : [];
  }

  /** Whether `node` holds `ref` now. */
  holds(ref: RemoteRef, node: number): boolean {
    const entry = this.#entries.get(ref);
    return entry?.state === "held" && entry.holders.has(node);
  }

  /**
   * The reference's entry, when it can be used here.
   *
   * @throws {RemoteRefError} naming it when it was released or lost, or belongs to another pool.
   */
  check(ref: RemoteRef): RefEntry {
    const entry = this.#entries.get(ref);
    if (entry === undefined) {
      throw new RemoteRefError({
        refId: ref.id,
        node: ref.node,
        problem: remoteRefOwner(ref) === undefined ? "released" : "other-pool",
        message:
          remoteRefOwner(ref) === undefined
            ? `remote reference ${ref.id} (${ref.type}) belongs to no open pool: its pool was closed`
            : `remote reference ${ref.id} (${ref.type}) belongs to another pool: a reference is used only with the pool that made it`,
      });
    }
    if (entry.state !== "held") {
      throw new RemoteRefError({
        refId: ref.id,
        node: ref.node,
        problem: entry.state,
        message:
          entry.state === "released"
            ? `remote reference ${ref.id} (${ref.type}, from node ${ref.node}) was released`
            : `remote reference ${ref.id} (${ref.type}, from node ${ref.node}) is lost: every node holding it was lost`,
      });
    }
    return entry;
  }

  /** A node was lost: what it held is gone; a reference no node holds any more is lost. */
  nodeLost(node: number): void {
    this.#peers.nodeLost(node);
    for (const [id, entry] of this.#live) {
      entry.holders.delete(node);
      if (entry.holders.size === 0) {
        entry.state = "lost";
        this.#live.delete(id);
      }
    }
  }

  /** The pool closes: every reference is released (the workers drop theirs on `release` or exit). */
  closeAll(): void {
    for (const entry of this.#live.values()) entry.state = "released";
    this.#live.clear();
  }

  async release(ref: RemoteRef): Promise<void> {
    const entry = this.#entries.get(ref);
    if (entry === undefined || entry.state !== "held") return;
    entry.state = "released";
    this.#live.delete(ref.id);
    for (const node of entry.holders) this.#host.unref(node, [ref.id]);
    entry.holders.clear();
  }

  async fetch(ref: RemoteRef, options: { signal?: AbortSignal } = {}): Promise<unknown> {
    const entry = this.check(ref);
    return this.#host.run(keptValue(ref), [...entry.holders][0]!, options.signal);
  }

  /** The reference's pickle, brought from a node holding it (once for the moves under way). */
  #payload(entry: RefEntry): Promise<PyObject> {
    if (entry.payload === undefined) {
      const from = entry.holders.has(entry.ref.node) ? entry.ref.node : [...entry.holders][0]!;
      const payload = this.#host.run(pickledOf(entry.ref), from) as Promise<PyObject>;
      entry.payload = payload;
      const clear = () => {
        if (entry.payload === payload) entry.payload = undefined;
      };
      payload.then(clear, clear);
    }
    return entry.payload;
  }

  /**
   * Brings `entry` to `node` for a call about to run there: node to node when the pool moves
   * references so (once for the calls that need it at the same time), else — or when that failed —
   * its pickle through the client, to carry with the call. Resolves the pickle to carry, or none.
   */
  #bring(entry: RefEntry, node: number): Promise<PyObject | undefined> {
    if (this.#host.betweenNodes !== true) return this.#payload(entry);
    let move = entry.moves.get(node);
    if (move === undefined) {
      const from = entry.holders.has(entry.ref.node) ? entry.ref.node : [...entry.holders][0]!;
      move = this.#peers.move(entry.ref.id, from, node).then((moved) => {
        if (!moved) return this.#payload(entry);
        if (entry.state === "held") entry.holders.add(node);
        // Released while it moved: the copy it left is let go too.
        else this.#host.unref(node, [entry.ref.id]);
        return undefined;
      });
      entry.moves.set(node, move);
      const settled = move;
      const clear = () => {
        if (entry.moves.get(node) === settled) entry.moves.delete(node);
      };
      settled.then(clear, clear);
    }
    return move;
  }

  /**
   * Prepares a call whose arguments hold references, bound for `node` (or any of `nodes`:
   * `undefined`, and any node still to come when `mayGrow`). Its references become
   * {@link RefArgument}s that carry the object to a node not holding it. When the pool moves
   * references node to node, what the call's node lacks moves there directly before its `submit`:
   * first for a call bound to a node; for one that may run anywhere, once the task manager gives it
   * a node (its `readying` hook). Otherwise the objects are brought to the client first when some
   * node the call may run on lacks one. Returns the arguments and the callbacks that tell each
   * argument its node and record the move.
   *
   * @throws {RemoteRefError} synchronously when a reference cannot be used.
   */
  prepare(
    refs: readonly RemoteRef[],
    args: readonly unknown[],
    kwargs: Kwargs,
    node: number | undefined,
    nodes: readonly number[],
    mayGrow: boolean,
  ): ({ ready: true } & PreparedCall) | { ready: false; later: Promise<PreparedCall> } {
    const entries = refs.map((ref) => this.check(ref));
    const targets = node === undefined ? nodes : [node];
    // A call on any node of a pool that may still grow can land on a node that holds nothing yet.
    const moving = entries.filter(
      (entry) => (node === undefined && mayGrow) || targets.some((target) => !entry.holders.has(target)),
    );
    if (moving.length === 0) return { ready: true, ...this.#build(args, kwargs, new Map()).call };
    if (node === undefined && this.#host.betweenNodes === true) {
      const { call, made } = this.#build(args, kwargs, new Map());
      const readying = (at: number) => this.#readyOn(made, at);
      return { ready: true, ...call, hooks: { ...call.hooks, readying } };
    }
    const later = Promise.all(
      moving.map(
        async (entry) =>
          [entry.ref, await (node === undefined ? this.#payload(entry) : this.#bring(entry, node))] as const,
      ),
    ).then(
      (pairs) =>
        this.#build(
          args,
          kwargs,
          new Map(pairs.filter((pair): pair is readonly [RemoteRef, PyObject] => pair[1] !== undefined)),
        ).call,
    );
    return { ready: false, later };
  }

  /**
   * Moves to `node` the references among `made` it lacks (node to node, or their pickles through the
   * client when that fails, given to the arguments to carry); undefined when it holds them all.
   *
   * Rejects with a {@link RemoteRefError} when a reference was released or lost since the call was made.
   */
  #readyOn(made: readonly RefArgument[], node: number): Promise<void> | undefined {
    const lacking = new Map<RemoteRef, RefArgument[]>();
    for (const argument of made) {
      if (this.holds(argument.ref, node) || argument.payload !== undefined) continue;
      lacking.set(argument.ref, [...(lacking.get(argument.ref) ?? []), argument]);
    }
    if (lacking.size === 0) return undefined;
    const moves = [...lacking].map(async ([ref, uses]) => {
      const payload = await this.#bring(this.check(ref), node);
      if (payload !== undefined) for (const argument of uses) argument.payload = payload;
    });
    return Promise.all(moves).then(() => undefined);
  }

  /** A call's arguments with each reference a {@link RefArgument} (carrying its pickle from `payloads`). */
  #build(
    args: readonly unknown[],
    kwargs: Kwargs,
    payloads: ReadonlyMap<RemoteRef, PyObject>,
  ): { call: PreparedCall; made: RefArgument[] } {
    let target: number | undefined;
    const made: RefArgument[] = [];
    const replace = (ref: RemoteRef) => {
      const argument = new RefArgument(
        ref,
        payloads.get(ref),
        () => target !== undefined && this.holds(ref, target),
      );
      made.push(argument);
      return argument;
    };
    const call: PreparedCall = {
      args: substitute(args, replace, 0) as unknown[],
      kwargs: substitute(kwargs, replace, 0) as Kwargs,
      hooks: {
        sending: (at) => {
          target = at;
        },
        sent: (at) => {
          for (const argument of made) {
            const entry = this.#entries.get(argument.ref);
            if (entry?.state === "held" && argument.payload !== undefined) entry.holders.add(at);
          }
        },
      },
    };
    return { call, made };
  }

  /** The references held now, as a detached pool's state file records them (no value, no secret). */
  snapshot(): RecordedRef[] {
    return [...this.#live.values()].map(({ ref, holders }) => ({
      id: ref.id,
      node: ref.node,
      type: ref.type,
      size: ref.size,
      holders: [...holders].sort((a, b) => a - b),
    }));
  }

  /** Takes in the references a detached pool held (its state file's {@link snapshot}); returns them. */
  restore(recorded: readonly RecordedRef[]): RemoteRef[] {
    return recorded.map((entry) => {
      const ref = new RemoteRef(entry.id, entry.node, entry.type, entry.size);
      this.adopt(ref, entry.holders.length > 0 ? entry.holders : [entry.node]);
      return ref;
    });
  }

  /** What the nodes keep, per node, as far as the client knows. */
  stats(): RemoteRefStats {
    const nodes = new Map<number, { count: number; bytes: number }>();
    let bytes = 0;
    for (const entry of this.#live.values()) {
      bytes += entry.ref.size;
      for (const node of entry.holders) {
        const stats = nodes.get(node) ?? { count: 0, bytes: 0 };
        stats.count += 1;
        stats.bytes += entry.ref.size;
        nodes.set(node, stats);
      }
    }
    return {
      count: this.#live.size,
      bytes,
      nodes: [...nodes.entries()]
        .sort(([a], [b]) => a - b)
        .map(([node, stats]) => ({ node, count: stats.count, bytes: stats.bytes })),
    };
  }
}

/** A call's arguments with their references prepared (see {@link RemoteRefRegistry.prepare}). */
export interface PreparedCall {
  readonly args: readonly unknown[];
  readonly kwargs: Kwargs;
  readonly hooks: Pick<TaskCallbacks, "sending" | "sent" | "readying">;
}
