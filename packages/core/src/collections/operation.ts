/**
 * What the client's side of a distributed-collection operation is made of: who asks (an owner),
 * its pending answer, a refusal, and the error of a pool whose collections are off. The head node's
 * worker holds the collections and applies the operations (`python/skyward/collection_store.py`).
 */
import { ConfigurationError } from "../errors/errors.js";
import type { WireValue } from "../protocol/protocol.js";

/** Who asks: a task (by id) or the client itself. Locks are held by an owner. */
export type Owner = string;

/** The client's own owner id (locks taken with `pool.lock(…)` hold `client:<uuid>`). */
export const CLIENT_OWNER = "client";

/** A pending operation: its answer, and a way to give up on it (an abort). */
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

/** Throws the error that names `options.cluster` when the pool's collections are off. */
export function checkCollectionsEnabled(enabled: boolean): void {
  if (enabled) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "options.cluster",
        message:
          "distributed collections need the nodes to form a cluster: the pool was made with options.cluster: false (set it to true, the default, to use dict, set, counter, queue, barrier and lock)",
      },
    ],
  });
}
