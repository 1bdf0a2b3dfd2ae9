/**
 * What a pool costs includes instances that were created at the provider but never became a node,
 * and counts a node's instance from its creation: on the real Local provider with a fixture price,
 * whose growth instance never reaches "running" (a cloud's instance stuck starting) and is given up
 * at `provisionTimeout`. Billing starts at create on most clouds: the pool's total must include it,
 * or a budget can be overrun.
 */
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { until } from "./fixtures/processes.js";

const HOUR = 3_600_000;
const PRICE = 36; // USD per hour: a cent a second

describe("an instance created for the pool that never starts", () => {
  it("costs from its creation until it is terminated, in the pool's rate and total", async () => {
    const local = sky.Local({ hourlyPrice: PRICE });
    let provisions = 0;
    const stuck = new Set<string>();
    let createdAt = 0;
    let terminated = 0;
    // The real Local provider, except that the instances of later provisions stay "pending".
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        const instances = await local.provision(options);
        if (provisions === 1) return instances;
        for (const instance of instances) stuck.add(instance.id);
        createdAt ||= Date.now();
        return instances.map((instance) => ({ ...instance, status: "pending" as const }));
      },
      async getInstance(options) {
        const instance = await local.getInstance(options);
        return instance && stuck.has(instance.id) ? { ...instance, status: "pending" as const } : instance;
      },
      async terminate(options) {
        await local.terminate(options);
        terminated += options.ids.filter((id) => stuck.has(id)).length;
      },
    };
    const timeout = 4;
    await using pool = await sky.compute({
      provider,
      nodes: sky.nodes({ desired: 1, min: 1, max: 2 }),
      image: { metrics: null },
      options: { console: false, provisionTimeout: timeout, maxProvisionAttempts: 1 },
    });
    expect(pool.cost().hourlyRate).toBe(PRICE);
    const growing = pool.resize(2).catch((error: unknown) => error);
    // While it starts it bills: the pool's rate says so.
    expect(await until(() => stuck.size > 0, 60_000)).toBe(true);
    expect(pool.cost().hourlyRate).toBe(2 * PRICE);
    expect(await growing).toBeInstanceOf(Error);
    await pool.resize(1); // no other try
    expect(await until(() => terminated === stuck.size, 60_000)).toBe(true);
    const cost = pool.cost();
    expect(cost.nodes.map((node) => node.node)).toEqual([0]);
    // What no node accounts for is the given-up instance: at least the provisionTimeout it was
    // waited for (the wait began after its creation, its terminate came after the wait), at most
    // since the provider returned it.
    const unstarted = cost.total - cost.nodes.reduce((sum, node) => sum + node.total, 0);
    expect(unstarted).toBeGreaterThanOrEqual((stuck.size * PRICE * timeout * 1000) / HOUR);
    expect(unstarted).toBeLessThanOrEqual((stuck.size * PRICE * (Date.now() - createdAt)) / HOUR);
    expect(cost.hourlyRate).toBe(PRICE);
  }, 120_000);
});
