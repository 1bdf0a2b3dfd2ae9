/**
 * SIGINT/SIGTERM: pools made with `handleSignals` left on are closed, then the signal is raised again
 * so that the process ends as it means. A signal repeated while they close is answered with a line on
 * stderr, and the close goes on (within the pools' `shutdownTimeout`).
 */

import { ConfigurationError } from "../errors/errors.js";

/** Refuses a `handleSignals` (of `compute` or `attach`) that is not a boolean, naming it. */
export function checkHandleSignals(handleSignals: unknown): void {
  if (handleSignals === undefined || typeof handleSignals === "boolean") return;
  throw new ConfigurationError({
    issues: [
      { path: "handleSignals", message: `expected a boolean, received ${JSON.stringify(handleSignals)}` },
    ],
  });
}

/** What a signal needs of a pool: to close it, and how long closing may take. */
export interface SignalClosable {
  close(): Promise<void>;
  readonly spec: { readonly shutdownTimeoutSeconds: number };
}

/** Pools torn down on SIGINT/SIGTERM. */
const livePools = new Set<SignalClosable>();
let signalHandlersInstalled = false;

/** When the close the first signal started must end (`performance.now()`); undefined when none runs. */
let closingUntil: number | undefined;

function onSignal(signal: NodeJS.Signals): void {
  // A second Ctrl-C while closing must not end the process: what the pools made would run on (and
  // bill) until their workers' TTL. The close carries on, bounded by its deadline.
  if (closingUntil !== undefined) {
    const seconds = Math.max(0, Math.ceil((closingUntil - performance.now()) / 1000));
    process.stderr.write(
      `skyward: still closing: terminating the pools' instances so that nothing is left billing; this ends within ${seconds} s\n`,
    );
    return;
  }
  const pools = [...livePools];
  const closing = pools.map((pool) => pool.close().catch(() => undefined));
  const deadline = Math.max(...pools.map((pool) => pool.spec.shutdownTimeoutSeconds), 10) * 1000;
  closingUntil = performance.now() + deadline;
  const end = (): void => {
    clearTimeout(timer);
    closingUntil = undefined;
    removeSignalHandlers();
    // Re-raise, now that no handler is installed, so the process ends as the signal means.
    process.kill(process.pid, signal);
  };
  const timer = setTimeout(end, deadline);
  timer.unref();
  void Promise.all(closing).then(end);
}

function installSignalHandlers(): void {
  if (signalHandlersInstalled) return;
  signalHandlersInstalled = true;
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

function removeSignalHandlers(): void {
  if (!signalHandlersInstalled) return;
  signalHandlersInstalled = false;
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
}

/** Closes `pool` on SIGINT/SIGTERM from now on. */
export function closeOnSignals(pool: SignalClosable): void {
  livePools.add(pool);
  installSignalHandlers();
}

/** `pool` is closed: signals no longer concern it (the handlers go with the last pool). */
export function forgetOnSignals(pool: SignalClosable): void {
  livePools.delete(pool);
  if (livePools.size === 0) removeSignalHandlers();
}
