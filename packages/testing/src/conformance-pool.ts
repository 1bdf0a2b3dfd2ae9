/**
 * The conformance suite's last part, when asked (`pool`): a real pool on the provider, every node's
 * worker started by its `launchWorker`, closed again leaving nothing behind.
 */
import { compute, type Provider, python } from "@skyward/core";
import type { Instance } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import type { ProviderConformanceOptions, ProviderConformancePool } from "./conformance-options.js";
import { recordingLaunches, workerEndpointProblems } from "./conformance-shapes.js";

/** What the pool test needs of the suite around it. */
export interface PoolConformanceContext {
  readonly options: ProviderConformanceOptions;
  /** The provider under test (created in the suite's beforeAll). */
  readonly provider: () => Provider;
  /** What the provider leaves behind (the suite's `leftovers` option, or nothing). */
  readonly leftovers: () => Promise<readonly unknown[]>;
  /** The provider's instances (`listInstances`, or none). */
  readonly listed: () => Promise<readonly Instance[]>;
}

/** Registers the `pool` block of the suite (skipped without `options.pool`). */
export function describePoolConformance(context: PoolConformanceContext): void {
  const { options, leftovers, listed } = context;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const provisionCount = options.provisionCount ?? 1;
  describe.skipIf(!options.pool)("pool", () => {
    it(
      "a pool on it answers on every node its launchWorker started, and closing it leaves nothing behind",
      async () => {
        const input: ProviderConformancePool = typeof options.pool === "object" ? options.pool : {};
        const { options: poolOptions, ...fields } = input;
        const before = await leftovers();
        const endpoints: unknown[] = [];
        const isHead = python<[], boolean>("skyward:is_head");
        let ids: string[] = [];
        {
          await using pool = await compute(
            {
              nodes: provisionCount,
              ...options.spec,
              ...fields,
              provider: recordingLaunches(context.provider(), endpoints),
              options: { console: false, ...poolOptions },
            },
            { handleSignals: false, signal: AbortSignal.timeout(timeoutMs) },
          );
          const nodes = pool.nodes();
          ids = nodes.map((node) => node.instanceId);
          expect(nodes.length).toBeGreaterThan(0);
          expect(nodes.filter((node) => !node.ready).map((node) => node.index)).toEqual([]);
          expect(new Set(ids).size, "each node has its own instance").toBe(nodes.length);
          expect(endpoints.length, "the pool starts every node with launchWorker").toBeGreaterThanOrEqual(
            nodes.length,
          );
          expect(endpoints.flatMap((endpoint) => workerEndpointProblems(endpoint))).toEqual([]);
          const heads = await pool.broadcast(isHead());
          expect(heads.length, "every node's worker answers").toBe(nodes.length);
          expect(heads.filter(Boolean).length, "exactly one worker is the head").toBe(1);
        }
        expect(await leftovers()).toEqual(before);
        const live = (await listed()).filter(
          (instance) => ids.includes(instance.id) && instance.status !== "terminated",
        );
        expect(live.map((instance) => `${instance.id} (${instance.status})`)).toEqual([]);
      },
      2 * timeoutMs,
    );
  });
}
