/**
 * `sky.session()`: several pools with one lifetime. Pools made (or attached) through a session are
 * closed together when it closes (`await using`), or detached together.
 */

import { type ComputeOptions, compute } from "./compute.js";
import type { Pool } from "./pool/pool.js";
import { type AttachedPool, type AttachOptions, attach } from "./session/attach.js";
import type { ComputeInput } from "./spec/compute-input.js";

/** Pools with one lifetime; see {@link session}. */
export interface Session extends AsyncDisposable {
  /** Provisions a pool (as `sky.compute`) owned by the session. */
  compute(input: ComputeInput, options?: ComputeOptions): Promise<Pool>;
  /** Picks a detached pool up (as `sky.attach`), owned by the session from then on. */
  attach(id: string, options?: AttachOptions): Promise<AttachedPool>;
  /** The session's pools still open, in the order they were made. */
  readonly pools: readonly Pool[];
  /** Detaches every pool of the session (see `pool.detach()`); returns their ids. */
  detach(): Promise<string[]>;
  /** Closes every pool of the session, all at once; idempotent. */
  close(): Promise<void>;
}

/**
 * A session: pools with one lifetime.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * await using session = sky.session();
 * const cpu = await session.compute({ nodes: 2 });
 * const more = await session.compute({ nodes: 1 });
 * // both closed when `session` goes out of scope
 * ```
 */
export function session(): Session {
  const pools: Pool[] = [];
  let closing: Promise<void> | undefined;
  const own = <P extends Pool>(pool: P): P => {
    if (closing) {
      void pool.close();
      throw new Error("the session is closed");
    }
    pools.push(pool);
    return pool;
  };
  const forget = (pool: Pool) => {
    const index = pools.indexOf(pool);
    if (index >= 0) pools.splice(index, 1);
  };
  // A pool closed on its own (by the user, or by its budget) is no longer the session's.
  const dropClosed = () => {
    for (const pool of [...pools]) if (!isOpen(pool)) forget(pool);
  };
  const close = () => {
    closing ??= Promise.all(pools.splice(0).map((pool) => pool.close())).then(() => undefined);
    return closing;
  };
  return {
    get pools() {
      dropClosed();
      return [...pools];
    },
    async compute(input, options) {
      if (closing) throw new Error("the session is closed");
      return own(await compute(input, options));
    },
    async attach(id, options) {
      if (closing) throw new Error("the session is closed");
      return own(await attach(id, options));
    },
    async detach() {
      dropClosed();
      const ids: string[] = [];
      for (const pool of [...pools]) {
        ids.push(await pool.detach());
        forget(pool);
      }
      return ids;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Whether `pool` is still open: not closing nor closed (nor detached). */
function isOpen(pool: Pool): boolean {
  return pool.state !== "shutting_down" && pool.state !== "destroyed";
}
