/**
 * Paces requests by a provider's documented rate limits: per key, at most `burst` requests within any
 * window of `burst × minIntervalMs` (a sliding window, so "100 a minute" allows a burst of 100 and
 * "one per 2 s" spaces them 2 s apart), and none at all while the key is held back after a 429.
 * Waits queue up in call order; a wait gives up when its signal aborts.
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
  /** When the last `burst` requests went (or are booked to go), ms since the epoch, oldest first. */
  sent: number[];
  /** Nothing goes before this time. */
  heldUntil: number;
}

/** A pacer with no request sent yet. */
export function createRequestPacer(now: () => number = Date.now): RequestPacer {
  const states = new Map<string, KeyState>();
  const stateOf = (key: string): KeyState => {
    let state = states.get(key);
    if (!state) {
      state = { sent: [], heldUntil: 0 };
      states.set(key, state);
    }
    return state;
  };
  return {
    async take(limit, signal) {
      const state = stateOf(limit.key);
      const burst = Math.max(1, Math.floor(limit.burst ?? 1));
      const window = burst * limit.minIntervalMs;
      const current = now();
      // Booked synchronously, so concurrent callers get consecutive slots.
      const oldest =
        state.sent.length >= burst ? (state.sent[state.sent.length - burst] as number) : -Infinity;
      const at = Math.max(current, state.heldUntil, oldest + window);
      state.sent.push(at);
      if (state.sent.length > burst) state.sent.splice(0, state.sent.length - burst);
      if (at > current) await abortableSleep(at - current, signal);
    },
    holdBack(limit, ms) {
      const state = stateOf(limit.key);
      state.heldUntil = Math.max(state.heldUntil, now() + ms);
    },
  };
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
