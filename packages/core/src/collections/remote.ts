/**
 * The client's way to the pool's distributed collections: they are held by the head node's worker
 * (node 0), so each operation of a `pool.dict(…)`, `pool.lock(…)` … handle is a `coll` message on the
 * connection to the head, answered by `coll_answer` (docs/protocol.md, "Distributed collections").
 * Tasks reach the same store from their own nodes, never through this process: the collections go
 * on while the client is detached or gone.
 */
import { CancelledError } from "../errors/errors.js";
import type {
  AuthorityMessage,
  CollectionAnswerMessage,
  CollectionCancelMessage,
  CollectionOpMessage,
  CollectionsAddress,
  WireValue,
  WorkerMessage,
} from "../protocol/protocol.js";
import { CollectionOpError, type Owner, type Pending } from "./operation.js";

/** The head's connection, as far as the collections need it. */
export interface HeadConnection {
  readonly isOpen: boolean;
  send(message: CollectionOpMessage | CollectionCancelMessage): void;
  onMessage(listener: (message: WorkerMessage) => void): () => void;
  readonly closed: Promise<unknown>;
}

interface Waiting {
  readonly owner: Owner;
  readonly connection: HeadConnection;
  resolve(value: WireValue): void;
  reject(error: Error): void;
}

/**
 * The next `coll` id, one sequence for the whole client: every instance (the pool's handles', and
 * each `$replica`/`$promote`/`$lost` ask) listens to every `coll_answer` of its connection, so ids
 * must not repeat on one connection.
 */
let nextId = 1;

/** Applies the client's collection operations on the head. */
export class RemoteCollections {
  readonly #head: () => HeadConnection | undefined;
  readonly #waiting = new Map<number, Waiting>();
  readonly #listening = new WeakSet<HeadConnection>();
  /** Stops listening to each connection listened to (for a one-off ask). */
  readonly #stops: (() => void)[] = [];
  readonly #unavailable: () => string | undefined;
  #closed: string | undefined;

  /**
   * `head`: the connection to the node holding the collections now (undefined while there is
   * none); `unavailable`: why they cannot be reached now, when the pool knows (a holder lost).
   */
  constructor(
    head: () => HeadConnection | undefined,
    unavailable: () => string | undefined = () => undefined,
  ) {
    this.#head = head;
    this.#unavailable = unavailable;
  }

  /** Sends `request` (`[kind, name, op, …args]`) for `owner`; the answer settles the pending. */
  apply(owner: Owner, request: readonly WireValue[]): Pending {
    if (this.#closed !== undefined) return rejected(new CancelledError({ message: this.#closed }));
    const unavailable = this.#unavailable();
    if (unavailable !== undefined) return rejected(new CancelledError({ message: unavailable }));
    const connection = this.#head();
    if (!connection?.isOpen)
      return rejected(
        new CancelledError({
          message: "the pool's collections are held by its head node, and no connection to it is open",
        }),
      );
    this.#listen(connection);
    const id = nextId++;
    const answer = new Promise<WireValue>((resolve, reject) => {
      this.#waiting.set(id, { owner, connection, resolve, reject });
    });
    connection.send({ t: "coll", id, owner, op: request.map(exactIntegers) });
    return {
      answer,
      cancel: (reason) => {
        const waiting = this.#waiting.get(id);
        if (!waiting) return;
        this.#waiting.delete(id);
        if (connection.isOpen) connection.send({ t: "coll_cancel", id, owner });
        waiting.reject(new CancelledError({ message: reason }));
      },
    };
  }

  /**
   * The pool is going away (or a one-off ask was answered): every pending operation is rejected
   * with `reason`; no new one starts, and the connections are no longer listened to.
   */
  close(reason: string): void {
    this.#closed = reason;
    for (const [id, waiting] of this.#waiting) {
      this.#waiting.delete(id);
      waiting.reject(new CancelledError({ message: reason }));
    }
    for (const stop of this.#stops.splice(0)) stop();
  }

  #listen(connection: HeadConnection): void {
    if (this.#listening.has(connection)) return;
    this.#listening.add(connection);
    const off = connection.onMessage((message) => {
      if (message.t === "coll_answer") this.#answer(message);
    });
    this.#stops.push(off);
    void connection.closed.then(() => {
      off();
      for (const [id, waiting] of this.#waiting) {
        if (waiting.connection !== connection) continue;
        this.#waiting.delete(id);
        waiting.reject(
          new CancelledError({
            message: "the connection to the head node, which holds the collections, was lost",
          }),
        );
      }
    });
  }

  #answer(message: CollectionAnswerMessage): void {
    const waiting = this.#waiting.get(message.id);
    if (!waiting) return;
    this.#waiting.delete(message.id);
    if (message.ok) waiting.resolve((message.value ?? null) as WireValue);
    else if (message.type === "CancelledError")
      waiting.reject(new CancelledError({ message: message.message ?? "cancelled" }));
    else waiting.reject(new CollectionOpError(message.message ?? "refused", message.type ?? "RuntimeError"));
  }
}

/**
 * `value` with every integral number past 2^53 made the bigint it exactly is: JSON would write
 * `2 ** 60` as `1152921504606847000`, an integer Python reads as another value, while the double is
 * exactly 2^60 (equal, as a key, to Python's `2**60` and `2.0**60`).
 */
function exactIntegers(value: WireValue): WireValue {
  if (typeof value === "number")
    return Number.isInteger(value) && !Number.isSafeInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(exactIntegers);
  if (value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype)
    return Object.fromEntries(
      Object.entries(value as Record<string, WireValue>).map(([key, item]) => [key, exactIntegers(item)]),
    );
  return value;
}

function rejected(error: Error): Pending {
  const answer = Promise.reject(error);
  answer.catch(() => undefined);
  return { answer, cancel: () => undefined };
}

/** Tells each open connection (other nodes) where the head serves the collections, and its epoch. */
export function tellAuthority(
  address: CollectionsAddress,
  connections: Iterable<{ readonly isOpen: boolean; send(message: AuthorityMessage): void } | undefined>,
): void {
  for (const connection of connections)
    if (connection?.isOpen)
      connection.send({ t: "authority", addr: address.addr, port: address.port, epoch: address.epoch ?? 0 });
}
