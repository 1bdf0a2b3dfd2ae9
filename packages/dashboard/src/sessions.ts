/**
 * The pool's attached/detached sessions as this client knows them: whether `sky.attach` picked the
 * pool up (from which state file, detached and attached when), whether it has been detached since,
 * and the other pools detached in this user's Skyward home. Read through core's session API
 * (`detachedPools()`), which reads no secret; only ids, providers, times and counts are kept.
 */
import { type AttachedFrom, detachedPools } from "@skyward/core";
import type { DetachedPoolRow, SessionsPayload } from "./payloads.js";

/** How often, at most, the Skyward home's state files are read again. */
const REFRESH_INTERVAL_MS = 2_000;

/** The detached pools listed (newest first); the rest are counted. */
const LISTED_LIMIT = 50;

export class SessionsView {
  #attachedFrom: AttachedFrom | null = null;
  #detached: readonly DetachedPoolRow[] = [];
  #detachedCount = 0;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;
  #error: string | null = null;

  /** Set when `sky.attach` opened the pool. */
  attachedFrom(origin: AttachedFrom | undefined): void {
    this.#attachedFrom = origin ?? null;
  }

  /**
   * Reads the state files again unless they were read less than `maxAgeMs` ago (the stream's batches:
   * two seconds) or are being read; 0 (a request for `/api/pool`): a read that starts now.
   */
  refresh(maxAgeMs = REFRESH_INTERVAL_MS): Promise<void> {
    if (this.#reading) return maxAgeMs === 0 ? this.#reading.then(() => this.refresh(0)) : this.#reading;
    if (Date.now() - this.#readAt < maxAgeMs) return Promise.resolve();
    this.#reading = detachedPools()
      .then((pools) => {
        this.#detachedCount = pools.length;
        this.#detached = pools.slice(0, LISTED_LIMIT).map((pool) => ({
          id: pool.id,
          provider: pool.provider,
          instanceType: pool.instanceType,
          nodes: pool.nodes.length,
          alive: pool.nodes.filter((node) => node.alive === true).length,
          tasks: pool.tasks,
          detachedAt: pool.detachedAt,
          ttl: pool.ttl,
          hourlyRate: pool.hourlyRate,
        }));
        this.#error = null;
      })
      .catch((error: unknown) => {
        this.#error = `cannot read the detached pools: ${error instanceof Error ? error.message : String(error)}`;
      })
      .finally(() => {
        this.#readAt = Date.now();
        this.#reading = undefined;
      });
    return this.#reading;
  }

  /** What was read last, as seen from pool `poolId`. */
  payload(poolId: string): SessionsPayload {
    const own = this.#detached.find((pool) => pool.id === poolId);
    // Its own state file stays while it is attached; one written after the attach is a new detach.
    const detachedAgain =
      own !== undefined && (this.#attachedFrom === null || own.detachedAt > this.#attachedFrom.detachedAt);
    const others = this.#detached.filter((pool) => pool.id !== poolId);
    return {
      attachedFrom: this.#attachedFrom,
      detachedAt: detachedAgain ? own.detachedAt : null,
      detached: others,
      detachedCount: this.#detachedCount - (own === undefined ? 0 : 1),
      error: this.#error,
    };
  }
}
