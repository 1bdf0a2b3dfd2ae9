/**
 * How many tasks a node is given at once when `worker.buffer` is `"auto"` (the default): its
 * concurrency, plus as many prefetched tasks as it works through in a short time budget. Short tasks
 * keep a deep pipeline on every node (the round trip is hidden); long tasks are held back in the
 * pool's queue until a slot frees, so they spread evenly over the nodes and nodes that join later get
 * their share — the idea of Dask's worker saturation. Durations are learnt per function (as Dask
 * learns them per task prefix) from the results; a function not seen yet is held back like a long one.
 */

/**
 * The work one node may have queued behind its running tasks, in milliseconds: several round trips,
 * so that a loaded client (whose results arrive late and in bursts) still keeps the pipeline full.
 */
export const PREFETCH_BUDGET_MS = 50;
/** Prefetched tasks per worker slot at most (the tuned `buffer: 64` of the benchmarks). */
export const MAX_PREFETCH_PER_SLOT = 64;
/** Weight of the newest sample in the moving average of a function's duration. */
const SMOOTHING = 0.2;
/** Functions remembered at most; past that the oldest estimates are forgotten. */
const MAX_FUNCTIONS = 1024;

/** The pool's estimates of how long each function's task holds a worker slot. */
export class AdaptiveSchedule {
  readonly #estimates = new Map<string, number>();

  /** Milliseconds a task of `ref` holds a slot (smoothed), or undefined before its first result. */
  estimateMs(ref: string): number | undefined {
    return this.#estimates.get(ref);
  }

  /** Whether `ref`'s tasks are known to be too long to prefetch beyond a node's concurrency. */
  isLong(ref: string): boolean {
    const estimate = this.#estimates.get(ref);
    return estimate !== undefined && estimate >= PREFETCH_BUDGET_MS;
  }

  /** Tasks a node of `concurrency` slots may have in flight when the next task to place is `ref`'s. */
  limit(concurrency: number, ref: string): number {
    const estimate = this.#estimates.get(ref);
    if (estimate === undefined) return concurrency;
    const extra = Math.floor((PREFETCH_BUDGET_MS * concurrency) / Math.max(estimate, 1e-3));
    return concurrency + Math.min(extra, MAX_PREFETCH_PER_SLOT * concurrency);
  }

  /**
   * A task of `ref` sent at `sentAt` finished at `now` on a node of `concurrency` slots with
   * `inFlight` tasks on it (itself included), whose previous result came at `lastDone`. With more in
   * flight than the node runs at once the task waited on the worker, so its time from send to result
   * overstates it: the gap since the node's previous result, times the concurrency, measures it then.
   */
  observe(
    ref: string,
    sentAt: number,
    now: number,
    inFlight: number,
    concurrency: number,
    lastDone: number,
  ): void {
    const sinceSent = now - sentAt;
    const sample = inFlight > concurrency ? Math.min(sinceSent, concurrency * (now - lastDone)) : sinceSent;
    const previous = this.#estimates.get(ref);
    // One late result (a pause of the client, a burst) moves the estimate at most twofold; a function
    // that really is slower gets there in a few results.
    const bounded = previous === undefined ? sample : Math.min(sample, 2 * previous + 1);
    if (previous === undefined && this.#estimates.size >= MAX_FUNCTIONS) {
      const oldest = this.#estimates.keys().next();
      if (!oldest.done) this.#estimates.delete(oldest.value);
    }
    this.#estimates.set(ref, previous === undefined ? sample : previous + SMOOTHING * (bounded - previous));
  }
}
