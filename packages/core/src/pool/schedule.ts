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
/**
 * Tasks per node at most on the way to cover the round trip to a far worker (beyond the prefetch
 * budget's): the bandwidth-delay product of a slow link, bounded so that a pool of many short tasks
 * does not hold the whole input in flight (their arguments and results are in memory meanwhile).
 */
export const MAX_LINK_PREFETCH_PER_NODE = 2048;
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

  /**
   * Tasks a node of `concurrency` slots, `roundTripMs` away, may have in flight when the next task to
   * place is `ref`'s: its slots, the prefetch budget's worth, and as many as it works through in one
   * round trip (so the node is never idle waiting for the client's next task).
   */
  limit(concurrency: number, ref: string, roundTripMs = 0): number {
    const estimate = this.#estimates.get(ref);
    if (estimate === undefined) return concurrency;
    const perMs = concurrency / Math.max(estimate, 1e-3);
    const prefetch = Math.min(Math.floor(PREFETCH_BUDGET_MS * perMs), MAX_PREFETCH_PER_SLOT * concurrency);
    const link = Math.min(Math.floor(roundTripMs * perMs), MAX_LINK_PREFETCH_PER_NODE);
    return concurrency + prefetch + link;
  }

  /**
   * A task of `ref` sent at `sentAt` finished at `now` on a node of `concurrency` slots with
   * `inFlight` tasks on it (itself included), whose previous result came at `lastDone`. With more in
   * flight than the node runs at once the task waited on the worker, so its time from send to result
   * overstates it: the gap since the node's previous result, times the concurrency, measures it then.
   * The node's round trip is taken off the time from send to result: a far worker's tasks are not
   * longer for being far. A task that waited behind others and got its slot at `begunAt` (later than
   * `sentAt`) is measured from then, even when it ends with no other task left on the node: the last
   * task of a burst otherwise counts its whole wait, and the next burst starts with a window sized
   * for tasks many times longer than they are.
   */
  observe(
    ref: string,
    sentAt: number,
    now: number,
    inFlight: number,
    concurrency: number,
    lastDone: number,
    roundTripMs = 0,
    begunAt = sentAt,
  ): void {
    const sinceSent = Math.max(0, now - sentAt - roundTripMs);
    let sample = sinceSent;
    if (inFlight > concurrency) sample = Math.min(sinceSent, concurrency * (now - lastDone));
    else if (begunAt > sentAt) sample = Math.min(sinceSent, now - begunAt);
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
