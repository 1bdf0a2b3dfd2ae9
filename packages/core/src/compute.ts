/**
 * `sky.compute(…)`, the entry point of pools: it resolves the request (a named pool read from
 * `skyward.toml` here, and nowhere below; the local paths it names checked here too), supplies `Local()` as the provider of specs that name
 * none and the state file as where a detached pool is recorded, and opens the pool.
 */
import { loadConfig, resolveNamedPool } from "./config/config-file.js";
import { checkLocalInputs } from "./config/local-files.js";
import { Local } from "./local/local-provider.js";
import type { SkywardEvent } from "./observe/events.js";
import { checkAbortSignal } from "./pool/abort-signal.js";
import { openPool } from "./pool/create-pool.js";
import { openWithDashboard } from "./pool/dashboard-option.js";
import type { Pool } from "./pool/pool.js";
import { checkHandleSignals } from "./pool/signals.js";
import { stateFileDetach } from "./session/detach.js";
import {
  type ComputeInput,
  type NamedComputeInput,
  type ResolvedCompute,
  validateComputeInput,
} from "./spec/compute-input.js";

/** Options of {@link compute} itself (the pool's own options go in the input's `options`). */
export interface ComputeOptions {
  /**
   * Aborts provisioning; whatever was started is torn down. Once `compute` has returned the pool, it
   * no longer applies (nodes beyond `min` still starting go on; close the pool to stop them).
   */
  readonly signal?: AbortSignal;
  /** Receives every event from the start, including provisioning and bootstrap progress. */
  readonly onEvent?: (event: SkywardEvent) => void;
  /**
   * Whether the pool installs SIGINT/SIGTERM handlers that tear it down and then end the process as
   * the signal means. A second signal while the pool closes does not cut the close short (its
   * instances would bill on): it prints how long the close may still take (at most
   * `shutdownTimeout`). Default true; set false when the application handles signals itself (a
   * server with its own shutdown), and close the pool there.
   */
  readonly handleSignals?: boolean;
}

/** The `[pools.NAME]` entry of `skyward.toml` (over `~/.skyward/defaults.toml`), its provider created. */
async function loadNamedPool(named: NamedComputeInput) {
  const config = await loadConfig(named.config ?? {});
  return resolveNamedPool(named.name, config, named.config?.cwd);
}

/**
 * Validates a `sky.compute` request before anything else happens: the form, every spec, the options,
 * (for the named form) the configuration files and the provider packages they name, and the local
 * paths the specs name (`image.includes`, plugins' worker modules: see `checkLocalInputs`).
 */
export async function resolveComputeInput(input: ComputeInput): Promise<ResolvedCompute> {
  const resolved = await validateComputeInput(input, loadNamedPool);
  await checkLocalInputs(
    resolved.specs.map((spec, index) => ({ spec, path: resolved.specPaths[index] ?? "" })),
  );
  return resolved;
}

/**
 * Provisions a pool and returns it once ready (its minimum node count up). Use it with `await using`
 * (or call `close()`): the pool is torn down when it goes out of scope, on an exception, and on
 * SIGINT/SIGTERM.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 *
 * const info = sky.python<[], { node: number }>("tasks:info");
 * await using pool = await sky.compute({ nodes: 4 });
 * const results = await pool.broadcast(info());
 * ```
 */
export async function compute(input: ComputeInput, options: ComputeOptions = {}): Promise<Pool> {
  const resolved = await resolveComputeInput(input);
  checkHandleSignals(options.handleSignals);
  checkAbortSignal(options.signal);
  const request = {
    specs: resolved.specs,
    options: resolved.options,
    defaultProvider: () => Local(),
    detach: stateFileDetach,
    handleSignals: options.handleSignals,
    signal: options.signal,
  };
  // Served from before provisioning, so the page (and the link on the console) shows it too.
  return openWithDashboard(resolved.options.dashboard, options.onEvent, (wiring) =>
    openPool({ ...request, ...wiring }),
  );
}

/** Runs `body` with a pool and tears the pool down afterwards, whatever happens. */
export async function withCompute<T>(
  input: ComputeInput,
  body: (pool: Pool) => Promise<T>,
  options: Pick<ComputeOptions, "signal" | "handleSignals" | "onEvent"> = {},
): Promise<T> {
  const pool = await compute(input, options);
  try {
    return await body(pool);
  } finally {
    await pool.close();
  }
}
