/** The options of the provider conformance suite ({@link runProviderConformance}). */
import type { FlatComputeInput, PoolSpec, Provider, SpecInput } from "@skyward/core";

/** What a provider under test can do in its test environment; every field is optional. */
export interface ProviderConformanceSupport {
  /**
   * Whether `prepare`, `provision`, `terminate` and `teardown` are exercised. Default true; set false
   * only when the test environment cannot create instances at all (the offer checks still run).
   */
  lifecycle?: boolean;
  /**
   * A canonical accelerator name (`"A100"`) the provider offers in the test environment: a query for it
   * must then return at least one offer. Without it the suite asks for `"A100"` and checks only that
   * whatever comes back matches.
   */
  accelerator?: string;
  /**
   * Whether the provider has a machine to end, so that `selfDestruct` must return a non-empty shell
   * operation. Default true; false for providers like `Local` whose workers simply exit.
   */
  selfDestruct?: boolean;
}

/**
 * The pool {@link ProviderConformanceOptions.pool} asks for: `sky.compute` input fields (without
 * `provider`) laid over the suite's `spec` — `nodes` (default: `provisionCount`), `image`, `ttl`,
 * and pool `options` such as `bootstrapTimeout` or `sshTimeout` (`console` is off unless set).
 */
export type ProviderConformancePool = Omit<FlatComputeInput, "provider">;

/** Options of {@link runProviderConformance}. */
export interface ProviderConformanceOptions {
  /** Names the `describe` block: `provider conformance: <name>`. */
  name: string;
  /**
   * Creates the provider under test. Called once, in the suite's `beforeAll` — after the caller's own
   * `beforeAll` hooks, so a server (moto, msw) started there is up.
   */
  create: () => Provider | Promise<Provider>;
  /**
   * The spec (without `provider`) whose offers are checked and whose cheapest offer the lifecycle
   * provisions. Default `{}`: one CPU node, `allocation: "spot-if-available"`.
   */
  spec?: Omit<SpecInput, "provider">;
  /** What the provider can do in this test environment. */
  supports?: ProviderConformanceSupport;
  /** Adjusts the resolved pool spec handed to `prepare` (worker settings, timeouts…). */
  prepareSpec?: (spec: PoolSpec) => PoolSpec | Promise<PoolSpec>;
  /**
   * Describes what Skyward has left at the provider (instances, security groups, key pairs, … — found
   * e.g. by querying moto for Skyward's tags): one entry per resource, anything printable. Must not
   * change across `offers`, and must be empty after `teardown`. Without it only `listInstances` (when
   * the provider has it) is consulted.
   */
  leftovers?: () => readonly unknown[] | Promise<readonly unknown[]>;
  /** Runs last, after the suite's own best-effort teardown (close a server, remove a directory). */
  cleanup?: () => void | Promise<void>;
  /** How many instances the lifecycle asks `provision` for. Default 1. */
  provisionCount?: number;
  /**
   * An instance id the provider has never issued, in its own format (moto rejects malformed EC2 ids
   * differently from unknown ones). Default `"skyward-conformance-unknown"`.
   */
  unknownInstanceId?: string;
  /**
   * Also start a real pool on the provider (`sky.compute`), so every node's worker is started by
   * `launchWorker`, and check that each worker answers a task and that closing the pool leaves
   * `leftovers()` as it found them. Off by default: it needs nodes that can run the worker (Python
   * 3.10 or newer, and whatever the image installs). `true` uses the suite's `spec`; an object adds
   * to it (see {@link ProviderConformancePool}).
   */
  pool?: boolean | ProviderConformancePool;
  /**
   * Deadline of each provider call and of each test, milliseconds. Default 120000. The pool test
   * (`pool`) gets twice as long: starting the pool may take up to this deadline, closing it as much.
   */
  timeoutMs?: number;
}
