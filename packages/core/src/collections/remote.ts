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
import { CLIENT_OWNER, CollectionOpError, type Owner, type Pending } from "./operation.js";

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
  #closed: string | undefined;

  /** `head`: the connection to node 0 now (undefined while there is none). */
  constructor(head: () => HeadConnection | undefined) {
    this.#head = head;
  }

  /** Sends `request` (`[kind, name, op, …args]`) for `owner`; the answer settles the pending. */
  apply(owner: Owner, request: readonly WireValue[]): Pending {
    if (this.#closed !== undefined) return rejected(new CancelledError({ message: this.#closed }));
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

/** What a node answers to `$replica`: the epoch and seq of the copy it holds. */
interface CopyHeld {
  readonly epoch: number;
  readonly seq: number;
}

function isCopyHeld(value: unknown): value is CopyHeld {
  const copy = value as Partial<CopyHeld> | null;
  return typeof copy?.epoch === "number" && typeof copy.seq === "number";
}

/** One request to a node, on a listener of its own let go once answered (a pool loses many nodes). */
function askNode(connection: HeadConnection, request: WireValue[]): Promise<WireValue> {
  const ask = new RemoteCollections(() => connection);
  return ask.apply(CLIENT_OWNER, request).answer.finally(() => ask.close("answered"));
}

/**
 * The node that held the collections (`lost`, in epoch `epoch`) is gone from the client's view —
 * it may still run, cut off from the client only. Every other open node is fenced at `epoch + 1`
 * and asked how new its copy is (`["$replica", epoch + 1]`): from then on it refuses the lost
 * holder's copies, so that holder acknowledges nothing more, and the copies compared hold every
 * write it acknowledged. The newest (by epoch, then seq) is promoted in `epoch + 1` (`$promote`),
 * and answers where it serves them now. Undefined when no node holds a copy (a pool of one, or the
 * replica was lost too).
 */
export async function failOver(
  nodes: readonly { readonly index: number; readonly connection?: HeadConnection | undefined }[],
  lost: number,
  epoch = 0,
): Promise<{ node: number; address: CollectionsAddress } | undefined> {
  const next = epoch + 1;
  const candidates = nodes.filter((node) => node.index !== lost && node.connection?.isOpen);
  const copies = await Promise.all(
    candidates.map(async (node) => {
      const copy = await askNode(node.connection as HeadConnection, ["$replica", next]).catch(() => null);
      return isCopyHeld(copy) ? [{ node, copy }] : [];
    }),
  );
  const newest = copies.flat().sort((a, b) => b.copy.epoch - a.copy.epoch || b.copy.seq - a.copy.seq)[0];
  if (!newest) return undefined;
  const address = (await askNode(newest.node.connection as HeadConnection, ["$promote", lost, next]).catch(
    () => undefined,
  )) as CollectionsAddress | undefined;
  return address ? { node: newest.node.index, address: { epoch: next, ...address } } : undefined;
}

/**
 * The client's verdict that `node` is gone, told to the holder of the collections (`$lost`): if
 * that node held the copy, the holder answers alone from then on (until another node has the copy)
 * instead of holding every write for it.
 */
export function tellNodeLost(holder: HeadConnection | undefined, node: number): void {
  if (holder?.isOpen) void askNode(holder, ["$lost", node]).catch(() => undefined);
}
