/**
 * How many tasks a node is given at once when `worker.buffer` is `"auto"` (the default): its
 * concurrency, plus as many prefetched tasks as it works through in a short time budget. Short tasks
 * keep a deep pipeline on every node (the round trip is hidden); long tasks are held back in the
 * pool's queue until a slot frees, so they spread evenly over the nodes and nodes that join later get
 * their share — the idea of Dask's worker saturation, measured per node from the results.
 */

/** The time one node may have queued behind its running tasks, in milliseconds. */
export const PREFETCH_BUDGET_MS = 20;
/** Prefetched tasks per worker slot at most (the tuned `buffer: 64` of the benchmarks). */
export const MAX_PREFETCH_PER_SLOT = 64;
/** Weight of the newest sample in the moving average of a task's duration. */
const SMOOTHING = 0.2;

/** One node's estimate of how long a task keeps one of its slots, and the slot count it implies. */
export class AdaptiveSlots {
  readonly #concurrency: number;
  /** Milliseconds a task holds a slot, smoothed; undefined before the first result. */
  #estimate: number | undefined;
  #lastDone = 0;
  /** Tasks the node may have in flight now. */
  limit: number;

  constructor(concurrency: number) {
    this.#concurrency = concurrency;
    this.limit = concurrency;
  }

  /** The current estimate (ms per task per slot), for tests and display. */
  get estimateMs(): number | undefined {
    return this.#estimate;
  }

  /**
   * A task finished on the node at `now` after being sent at `sentAt`, with `inFlight` tasks on the
   * node (itself included). When more were in flight than the node runs at once, the task waited on
   * the worker, so its time from send to result overstates it: the gap since the previous result,
   * times the concurrency, is the better measure then.
   */
  observe(sentAt: number, now: number, inFlight: number): void {
    const concurrency = this.#concurrency;
    const sinceSent = now - sentAt;
    const sample =
      inFlight > concurrency ? Math.min(sinceSent, concurrency * (now - this.#lastDone)) : sinceSent;
    this.#lastDone = now;
    const estimate =
      this.#estimate === undefined ? sample : this.#estimate + SMOOTHING * (sample - this.#estimate);
    this.#estimate = estimate;
    const extra = Math.floor((PREFETCH_BUDGET_MS * concurrency) / Math.max(estimate, 1e-3));
    this.limit = concurrency + Math.min(extra, MAX_PREFETCH_PER_SLOT * concurrency);
  }
}
