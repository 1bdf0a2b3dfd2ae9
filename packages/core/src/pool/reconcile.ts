/**
 * The reconcile loop: one place that compares the pool's desired node count with the nodes it has
 * and acts — every `reconcileTickInterval`, and at once when poked (a task queued on a pool with
 * room to grow, `pool.resize`, a node gone). Steps never overlap: a poke during a step runs one more
 * step after it.
 */

/** What one step of the loop does; its errors are the caller's to report (the loop keeps going). */
export type ReconcileStep = () => Promise<void>;

/** Runs a {@link ReconcileStep} on a timer and on demand, one at a time, until stopped. */
export class Reconciler {
  readonly #step: ReconcileStep;
  readonly #onError: (error: unknown) => void;
  readonly #timer: ReturnType<typeof setInterval>;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(step: ReconcileStep, tickMs: number, onError: (error: unknown) => void) {
    this.#step = step;
    this.#onError = onError;
    this.#timer = setInterval(() => this.poke(), tickMs);
    this.#timer.unref();
  }

  /** Runs a step soon (after the current one, when one is running). Cheap to call often. */
  poke(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop();
  }

  async #loop(): Promise<void> {
    // Let the caller's synchronous work (a burst of submits) finish first: one step sees all of it.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      do {
        this.#again = false;
        if (this.#stopped) return;
        try {
          await this.#step();
        } catch (error) {
          this.#onError(error);
        }
      } while (this.#again);
    } finally {
      this.#running = undefined;
    }
  }

  /** Stops the timer; resolves once a step under way has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
  }
}
