/**
 * The provider conformance suite: one vitest `describe` block that checks a provider against the
 * `v1` contract of `@skyward/core` — methods that each take one options object, well-formed offers
 * that respect the query, a read-only `offers`, and the whole lifecycle `prepare` → `provision` →
 * `getInstance` → `terminate` → `teardown` leaving nothing behind; for a provider that has it,
 * `cleanup` removing what pools without instances left; and, when asked, a real pool whose workers
 * `launchWorker` started. Every provider package runs it, the built-ins included.
 */
import {
  type PoolSpec,
  type Provider,
  options as resolvePoolOptions,
  spec as resolveSpec,
} from "@skyward/core";
import {
  type Cluster,
  clusterFromInstance,
  type Instance,
  type Offer,
  type OfferQuery,
  offerPrice,
  offerQuery,
  type ProviderCallOptions,
  resolvePoolSpec,
  whyNotProvider,
} from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { ProviderConformanceOptions } from "./conformance-options.js";
import { describePoolConformance } from "./conformance-pool.js";
import {
  CONTRACT_METHODS,
  clusterProblems,
  instanceProblems,
  offerProblems,
  offerQueryProblems,
  sleep,
} from "./conformance-shapes.js";

export type {
  ProviderConformanceOptions,
  ProviderConformancePool,
  ProviderConformanceSupport,
} from "./conformance-options.js";
export {
  instanceProblems,
  offerProblems,
  offerQueryProblems,
  workerEndpointProblems,
} from "./conformance-shapes.js";

/**
 * Registers a vitest `describe` block, `provider conformance: <name>`, that checks a provider against
 * the `v1` contract. Call it at the top level of a test file (or inside a `describe`, e.g. one skipped
 * when the test environment is missing):
 *
 * ```ts
 * import { AWS } from "@skyward/provider-aws";
 * import { runProviderConformance } from "@skyward/testing";
 *
 * declare const moto: { url: string }; // a moto server, started in your beforeAll
 * declare function listSkywardResources(endpoint: string): Promise<unknown[]>;
 * runProviderConformance({
 *   name: "aws (moto)",
 *   create: () => AWS({ region: "us-east-1", endpoint: moto.url }),
 *   leftovers: () => listSkywardResources(moto.url),
 *   supports: { accelerator: "T4" },
 * });
 * ```
 *
 * The lifecycle tests run in order and share one cluster; whatever a failing test leaves is
 * terminated and torn down in `afterAll`, before `cleanup`. With `pool`, a real pool is started last,
 * so every node's worker comes from `launchWorker`, and closed again.
 */
export function runProviderConformance(options: ProviderConformanceOptions): void {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const provisionCount = options.provisionCount ?? 1;
  const supports = options.supports ?? {};
  const unknownId = options.unknownInstanceId ?? "skyward-conformance-unknown";
  /** The options every provider call gets: a deadline. */
  const callOptions = (): ProviderCallOptions => ({ signal: AbortSignal.timeout(timeoutMs) });

  describe(`provider conformance: ${options.name}`, () => {
    let provider: Provider;
    let poolSpec: PoolSpec;
    let query: OfferQuery;
    let offer: Offer | undefined;
    let cluster: Cluster | undefined;
    let instances: readonly Instance[] = [];
    let tornDown = false;
    /** Makes the pool ids of this run's clusters unique (`conf0…` for the lifecycle's). */
    const suffix = Math.random().toString(16).slice(2, 8);
    /** Clusters the cleanup check prepared; torn down in afterAll if the check fails half way. */
    const orphans: Cluster[] = [];

    const requireCluster = (): Cluster => {
      if (!cluster) throw new Error("prepare did not return a cluster (see the prepare test)");
      return cluster;
    };
    const requireInstances = (): readonly Instance[] => {
      if (instances.length === 0) throw new Error("provision returned no instances (see the provision test)");
      return instances;
    };
    const leftovers = async (): Promise<readonly unknown[]> => (options.leftovers ? options.leftovers() : []);
    const listed = async (): Promise<readonly Instance[]> =>
      provider.listInstances ? provider.listInstances(callOptions()) : [];
    const offersFor = async (wanted: OfferQuery): Promise<readonly Offer[]> => {
      const offers = await provider.offers({ ...callOptions(), query: wanted });
      expect(Array.isArray(offers), "offers must resolve to an array").toBe(true);
      expect(offers.flatMap((entry) => offerProblems(entry, provider.name))).toEqual([]);
      expect(offers.flatMap((entry) => offerQueryProblems(entry, wanted))).toEqual([]);
      return offers;
    };

    beforeAll(async () => {
      provider = await options.create();
      // A provider that is not one fails the first test, with the reason, rather than the whole suite.
      const valid = whyNotProvider(provider) === undefined;
      poolSpec = resolvePoolSpec(
        resolveSpec({ ...options.spec, ...(valid ? { provider } : {}) }),
        resolvePoolOptions({}),
      );
      query = offerQuery(poolSpec);
    }, timeoutMs);

    afterAll(async () => {
      try {
        if (cluster && !tornDown) {
          const ids = instances.map((instance) => instance.id);
          await provider.terminate({ ...callOptions(), cluster, ids }).catch(() => undefined);
          await provider.teardown({ ...callOptions(), cluster }).catch(() => undefined);
        }
        for (const orphan of orphans)
          await provider.teardown({ ...callOptions(), cluster: orphan }).catch(() => undefined);
      } finally {
        await options.cleanup?.();
      }
    }, timeoutMs);

    it("is a v1 provider with a short lower-case name and typed capabilities", () => {
      expect(whyNotProvider(provider)).toBeUndefined();
      expect(provider.name).toMatch(/^[a-z0-9][a-z0-9-]*$/);
      const { spot, maxInstances } = provider.capabilities;
      expect(typeof spot).toBe("boolean");
      if (maxInstances !== undefined) expect(Number.isInteger(maxInstances) && maxInstances > 0).toBe(true);
    });

    it("every method takes one options object, launchWorker included", () => {
      expect(
        typeof provider.launchWorker,
        "launchWorker is required: the pool starts every node with it",
      ).toBe("function");
      const positional = CONTRACT_METHODS.flatMap((method) => {
        const value: unknown = provider[method];
        return typeof value === "function" && value.length > 1
          ? [`${method} declares ${value.length} parameters`]
          : [];
      });
      expect(positional, "each v1 method takes a single options object, not positional arguments").toEqual(
        [],
      );
    });

    it(
      "offers for the spec are well formed and satisfy the query",
      async () => {
        const offers = await offersFor(query);
        if (supports.lifecycle !== false)
          expect(offers.length, "the lifecycle tests need at least one offer for the spec").toBeGreaterThan(
            0,
          );
      },
      timeoutMs,
    );

    it(
      "an accelerator query returns only offers with that accelerator",
      async () => {
        const name = supports.accelerator ?? "A100";
        const offers = await offersFor({ ...query, accelerator: { name, count: 1 } });
        if (supports.accelerator !== undefined)
          expect(offers.length, `supports.accelerator says ${name} is offered`).toBeGreaterThan(0);
      },
      timeoutMs,
    );

    it(
      'allocation "spot" returns only offers with a spot price, "on-demand" only offers with an on-demand price',
      async () => {
        const spot = await offersFor({ ...query, allocation: "spot" });
        if (!provider.capabilities.spot) expect(spot, "capabilities.spot is false").toEqual([]);
        await offersFor({ ...query, allocation: "on-demand" });
      },
      timeoutMs,
    );

    it(
      "maxHourlyCost is honoured",
      async (context) => {
        const { maxHourlyCost: _, ...uncappedQuery } = query;
        let base: OfferQuery = uncappedQuery;
        let offers = await offersFor(base);
        if (offers.length === 0 && supports.accelerator !== undefined) {
          base = { ...uncappedQuery, accelerator: { name: supports.accelerator, count: 1 } };
          offers = await offersFor(base);
        }
        const prices = offers
          .map((entry) => offerPrice(entry, base.allocation))
          .filter((price): price is number => price !== null)
          .sort((a, b) => a - b);
        if (prices.length === 0) return context.skip("no priced offers to cap");
        const cap = Math.max(prices[Math.floor((prices.length - 1) / 2)] as number, 0.01);
        const capped = await offersFor({ ...base, maxHourlyCost: cap });
        // offersFor already failed the test for any offer above the cap; the cheapest must stay.
        expect(
          capped.length,
          `offers at or under $${cap}/h exist, so the capped query must find some`,
        ).toBeGreaterThan(0);
      },
      timeoutMs,
    );

    it(
      "offers creates nothing",
      async (context) => {
        if (!options.leftovers && !provider.listInstances)
          return context.skip("neither leftovers nor listInstances can tell what exists");
        const before = await leftovers();
        const listedBefore = (await listed()).map((instance) => instance.id).sort();
        await provider.offers({ ...callOptions(), query });
        await provider.offers({
          ...callOptions(),
          query: { ...query, accelerator: { name: supports.accelerator ?? "A100", count: 1 } },
        });
        await provider.offers({ ...callOptions(), query: { ...query, allocation: "spot" } });
        expect(await leftovers()).toEqual(before);
        expect((await listed()).map((instance) => instance.id).sort()).toEqual(listedBefore);
      },
      timeoutMs,
    );

    describe.skipIf(supports.lifecycle === false)("lifecycle", () => {
      it(
        "prepare returns a cluster with the contract's fields",
        async () => {
          // The offer checks are the offer tests' job; here any priced offer will do.
          const offers = await provider.offers({ ...callOptions(), query });
          const priced = offers
            .map((entry) => ({ entry, price: offerPrice(entry, query.allocation) }))
            .filter((candidate): candidate is { entry: Offer; price: number } => candidate.price !== null)
            .sort((a, b) => a.price - b.price);
          offer = priced[0]?.entry;
          if (!offer) throw new Error("no priced offer for the spec to prepare a cluster for");
          const spec = options.prepareSpec ? await options.prepareSpec(poolSpec) : poolSpec;
          const prepared = await provider.prepare({
            ...callOptions(),
            spec,
            offer,
            poolId: `conf0${suffix}`,
          });
          cluster = prepared;
          expect(clusterProblems(prepared, provider.name, offer)).toEqual([]);
        },
        timeoutMs,
      );

      it(
        `provision returns up to ${provisionCount} instance(s) tagged with the cluster`,
        async () => {
          const current = requireCluster();
          const { maxInstances } = provider.capabilities;
          if (maxInstances !== undefined) expect(provisionCount).toBeLessThanOrEqual(maxInstances);
          const created = await provider.provision({
            ...callOptions(),
            cluster: current,
            count: provisionCount,
          });
          instances = created;
          expect(Array.isArray(created)).toBe(true);
          expect(created.length).toBeGreaterThanOrEqual(1);
          expect(created.length).toBeLessThanOrEqual(provisionCount);
          expect(created.flatMap((instance) => instanceProblems(instance, current))).toEqual([]);
          expect(new Set(created.map((instance) => instance.id)).size, "instance ids must be unique").toBe(
            created.length,
          );
          for (const instance of created) {
            expect(instance.status).not.toBe("terminated");
            expect(instance.offerId).toBe(current.offer.id);
            if (instance.spot)
              expect(provider.capabilities.spot, "a spot instance needs capabilities.spot").toBe(true);
          }
        },
        timeoutMs,
      );

      it(
        "getInstance finds every provisioned instance",
        async () => {
          const current = requireCluster();
          for (const instance of requireInstances()) {
            const found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            expect(found, `getInstance(${JSON.stringify(instance.id)})`).not.toBeNull();
            expect(found?.id).toBe(instance.id);
            expect(found?.status).not.toBe("terminated");
            expect(instanceProblems(found, current)).toEqual([]);
          }
        },
        timeoutMs,
      );

      it("selfDestruct returns a shell operation, synchronously", () => {
        const current = requireCluster();
        for (const instance of requireInstances()) {
          const op = provider.selfDestruct({ cluster: current, instance });
          expect(typeof op, "selfDestruct must return a string, not a promise").toBe("string");
          if (supports.selfDestruct !== false) {
            expect(
              op.trim(),
              "a provider with machines to end must say how (supports.selfDestruct)",
            ).not.toBe("");
          }
        }
      });

      it(
        "listInstances (when the provider has it) lists them, and terminate works with the cluster rebuilt from their tags",
        async (context) => {
          if (!provider.listInstances) return context.skip("the provider has no listInstances");
          const current = requireCluster();
          const ids = requireInstances().map((instance) => instance.id);
          const all = await provider.listInstances(callOptions());
          const mine = all.filter((instance) => ids.includes(instance.id));
          expect(mine.map((instance) => instance.id).sort()).toEqual([...ids].sort());
          expect(mine.flatMap((instance) => instanceProblems(instance, current))).toEqual([]);
          // What `skyward down` does: it has no cluster object, only what listInstances returned.
          const first = mine[0] as Instance;
          await provider.terminate({
            ...callOptions(),
            cluster: clusterFromInstance(provider.name, first),
            ids: [first.id],
          });
          const after = await provider.getInstance({ ...callOptions(), cluster: current, id: first.id });
          expect(
            after === null || after.status === "terminated" || after.status === "stopping",
            `after terminate with the rebuilt cluster, ${first.id} is ${after?.status}`,
          ).toBe(true);
        },
        timeoutMs,
      );

      it(
        "terminate is idempotent: twice, with unknown ids, with no ids",
        async () => {
          const current = requireCluster();
          const ids = requireInstances().map((instance) => instance.id);
          await provider.terminate({ ...callOptions(), cluster: current, ids });
          await provider.terminate({ ...callOptions(), cluster: current, ids });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [unknownId] });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [...ids, unknownId] });
          await provider.terminate({ ...callOptions(), cluster: current, ids: [] });
        },
        timeoutMs,
      );

      it(
        "after terminate, getInstance returns null or a terminated instance",
        async () => {
          const current = requireCluster();
          const deadline = Date.now() + timeoutMs / 2;
          for (const instance of requireInstances()) {
            let found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            while (found !== null && found.status !== "terminated" && Date.now() < deadline) {
              await sleep(250);
              found = await provider.getInstance({ ...callOptions(), cluster: current, id: instance.id });
            }
            expect(
              found === null ? "null" : found.status,
              `getInstance(${JSON.stringify(instance.id)})`,
            ).toMatch(/^(null|terminated)$/);
          }
          expect(
            await provider.getInstance({ ...callOptions(), cluster: current, id: unknownId }),
          ).toBeNull();
        },
        timeoutMs,
      );

      it(
        "teardown (twice) leaves nothing behind",
        async () => {
          const current = requireCluster();
          await provider.teardown({ ...callOptions(), cluster: current });
          await provider.teardown({ ...callOptions(), cluster: current });
          tornDown = true;
          expect(await leftovers()).toEqual([]);
          const ids = instances.map((instance) => instance.id);
          const live = (await listed()).filter(
            (instance) => ids.includes(instance.id) && instance.status !== "terminated",
          );
          expect(live.map((instance) => `${instance.id} (${instance.status})`)).toEqual([]);
        },
        timeoutMs,
      );

      it(
        "cleanup (when the provider has it) removes what prepare made for pools without instances, one pool at a time, with no cluster object",
        async (context) => {
          if (!provider.cleanup) return context.skip("the provider has no cleanup");
          const chosen = offer;
          if (!chosen) throw new Error("prepare did not run (see the prepare test)");
          const spec = options.prepareSpec ? await options.prepareSpec(poolSpec) : poolSpec;
          // What earlier checks left (a leak they already reported) is not this check's to judge.
          const before = await leftovers();
          // Two pools whose clients died right after prepare: each left what it shares, no instance.
          const first = await provider.prepare({
            ...callOptions(),
            spec,
            offer: chosen,
            poolId: `conf1${suffix}`,
          });
          orphans.push(first);
          const second = await provider.prepare({
            ...callOptions(),
            spec,
            offer: chosen,
            poolId: `conf2${suffix}`,
          });
          orphans.push(second);
          const both = await leftovers();

          const result = await provider.cleanup({ ...callOptions(), pools: [first.poolId] });
          expect(Array.isArray(result.removed) && Array.isArray(result.left)).toBe(true);
          expect(result.left, "a pool without instances keeps nothing").toEqual([]);
          for (const resource of result.removed) {
            expect(resource.poolId).toBe(first.poolId);
            expect(typeof resource.kind === "string" && resource.kind !== "").toBe(true);
            expect(typeof resource.id === "string" && resource.id !== "").toBe(true);
          }
          if (options.leftovers) {
            const afterFirst = await leftovers();
            // Only the named pool's resources went: the other pool's are all still there.
            expect(afterFirst.length).toBeLessThan(both.length);
            expect(both).toEqual(expect.arrayContaining([...afterFirst]));
          }
          expect(await provider.cleanup({ ...callOptions(), pools: [first.poolId] })).toEqual({
            removed: [],
            left: [],
          });
          await provider.cleanup({ ...callOptions(), pools: [second.poolId] });
          expect(await leftovers()).toEqual(before);
          orphans.length = 0;
        },
        timeoutMs,
      );
    });

    describePoolConformance({ options, provider: () => provider, leftovers, listed });
  });
}
