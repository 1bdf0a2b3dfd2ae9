/**
 * Paces requests by a provider's documented rate limits: per key, at most `burst` requests within any
 * window of `burst × minIntervalMs` (a sliding window, so "100 a minute" allows a burst of 100 and
 * "one per 2 s" spaces them 2 s apart), counted from when requests really went, and none at all while
 * the key is held back after a 429. Waits queue up in call order; a wait gives up when its signal aborts.
 */
/** A per-endpoint rate limit: the `rateLimit` of a provider HTTP request. */
export interface ProviderRateLimit {
  /** Requests sharing this key share the limit (`"PUT /asks"`). */
  readonly key: string;
  /** The least time between two requests of the key, ms (with `burst`, the average). */
  readonly minIntervalMs: number;
  /** How long the API refuses the key after a request came too early, ms. */
  readonly penaltyMs: number;
  /**
   * How many requests of the key may go at once within any window of `burst × minIntervalMs`: an API
   * allowing "100 requests a minute" is `{ minIntervalMs: 600, burst: 100 }`. Default 1 (strict spacing).
   */
  readonly burst?: number;
}

/** Paces the requests of one client. */
export interface RequestPacer {
  /** Waits until a request of the limit's key may go, and counts it as gone. */
  take(limit: ProviderRateLimit, signal: AbortSignal): Promise<void>;
  /** Lets nothing of the limit's key go for `ms` from now (a 429's penalty or `Retry-After`). */
  holdBack(limit: ProviderRateLimit, ms: number): void;
}

interface KeyState {
  /** When the last `burst` requests of the key went, ms since the epoch, oldest first. */
  sent: number[];
  /** Nothing goes before this time. */
  heldUntil: number;
  /** Settles when the last caller in line has gone (or given up): callers go in call order. */
  line: Promise<void>;
}

/** A pacer with no request sent yet; `now` and `sleep` are the clock (tests give a virtual one). */
export function createRequestPacer(
  now: () => number = Date.now,
  sleep: (ms: number, signal: AbortSignal) => Promise<void> = abortableSleep,
): RequestPacer {
  const states = new Map<string, KeyState>();
  const stateOf = (key: string): KeyState => {
    let state = states.get(key);
    if (!state) {
      state = { sent: [], heldUntil: 0, line: Promise.resolve() };
      states.set(key, state);
    }
    return state;
  };
  return {
    async take(limit, signal) {
      const state = stateOf(limit.key);
      const burst = Math.max(1, Math.floor(limit.burst ?? 1));
      const window = burst * limit.minIntervalMs;
      // Each caller waits for the one before it to go, then spaces itself from when that one really
      // went (not from when it was booked: a timer that fires late must not squeeze the next one in
      // sooner), and looks again after sleeping in case a 429 held the key back meanwhile.
      const before = state.line;
      let done!: () => void;
      const mine = new Promise<void>((resolve) => {
        done = resolve;
      });
      state.line = before.then(() => mine);
      try {
        await untilSettledOrAborted(before, signal);
        for (;;) {
          const current = now();
          const oldest =
            state.sent.length >= burst ? (state.sent[state.sent.length - burst] as number) : -Infinity;
          const at = Math.max(current, state.heldUntil, oldest + window);
          if (at <= current) break;
          await sleep(at - current, signal);
        }
        state.sent.push(now());
        if (state.sent.length > burst) state.sent.splice(0, state.sent.length - burst);
      } finally {
        done();
      }
    },
    holdBack(limit, ms) {
      const state = stateOf(limit.key);
      state.heldUntil = Math.max(state.heldUntil, now() + ms);
    },
  };
}

/** Resolves when `promise` settles; rejects with the signal's reason when it aborts first. */
function untilSettledOrAborted(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
    );
  });
}

/** Resolves after `ms`; rejects with the signal's reason when it aborts first. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
