/**
 * SIGINT/SIGTERM: pools made with `handleSignals` left on are closed, then the signal is raised again
 * so that the process ends as it means.
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

function onSignal(signal: NodeJS.Signals): void {
  removeSignalHandlers();
  const pools = [...livePools];
  const closing = pools.map((pool) => pool.close().catch(() => undefined));
  const deadline = Math.max(...pools.map((pool) => pool.spec.shutdownTimeoutSeconds), 10) * 1000;
  const timer = setTimeout(() => process.kill(process.pid, signal), deadline);
  timer.unref();
  void Promise.all(closing).then(() => {
    clearTimeout(timer);
    // Re-raise, now that no handler is installed, so the process ends as the signal means.
    process.kill(process.pid, signal);
  });
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
