/**
 * A map's stop: the waits of a `map` (for its iterable's next item, for room in the queue) end when
 * the map fails, not when what they wait for comes. One wait at a time holds one listener, removed
 * when that wait ends, so a long map retains nothing per item.
 */

/** What a wait gives when the map stopped first. */
export const STOPPED = Symbol("stopped");

export class MapStop {
  #stopped = false;
  #wake: (() => void) | undefined;

  /** Whether {@link stop} was called. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Ends the wait under way, if any, and every later one at once, with {@link STOPPED}. */
  stop(): void {
    this.#stopped = true;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /**
   * `promise`'s value, or {@link STOPPED} once the map stops before it settles. One wait at a time:
   * a `map` waits for one thing at once. A rejection of `promise` after the stop is handled here.
   */
  until<T>(promise: Promise<T>): Promise<T | typeof STOPPED> {
    if (this.#stopped) {
      promise.catch(() => undefined);
      return Promise.resolve(STOPPED);
    }
    return new Promise<T | typeof STOPPED>((resolve, reject) => {
      const wake = () => resolve(STOPPED);
      this.#wake = wake;
      const done = () => {
        if (this.#wake === wake) this.#wake = undefined;
      };
      promise.then(
        (value) => {
          done();
          resolve(value);
        },
        (error: unknown) => {
          done();
          reject(error);
        },
      );
    });
  }
}
