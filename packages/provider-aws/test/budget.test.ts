/**
 * A pool on AWS (moto) whose instance is a test-bed host, with a fixture price, reaches its budget:
 * the warning first, then its running task fails with a `BudgetExceededError`, it takes no more tasks,
 * and it is torn down with nothing left at moto. The price is the provider's `onDemandPrices` setting
 * for every type of the built-in table ($360 an hour: ten cents a second), so whichever type is the
 * cheapest match, the pool pays that, and `pool.cost()` reads it back from the instance's price tag.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, type Testbed, testbedSshHost } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, BUILT_IN_ON_DEMAND_PRICES } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const tasks = fileURLToPath(new URL("./fixtures/aws_tasks.py", import.meta.url));
const add = sky.python<[a: number, b: number], number>("aws_tasks:add");
const sleep = sky.python<[seconds: number], number>("aws_tasks:sleep");
const PRICE = 360;

describe.skipIf(skipReason !== undefined)("a pool on AWS (moto) that reaches its budget", () => {
  const suite = useMotoSuite("skyward-aws-budget-");
  let bed: Testbed;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 1 });
  }, 180_000);

  afterAll(async () => {
    await bed?.teardown();
  });

  it("warns, fails its task with a BudgetExceededError and is torn down, leaving nothing at moto", async () => {
    const host = bed.hosts[0];
    if (!host) throw new Error("no test-bed host");
    const provider = AWS({
      endpoint: suite.moto.endpoint,
      onDemandPrices: Object.fromEntries(Object.keys(BUILT_IN_ON_DEMAND_PRICES).map((type) => [type, PRICE])),
      sshAddress: () => ({ ...testbedSshHost(host), privateIp: host.host, selfDestruct: "true" }),
    });
    const events: sky.SkywardEvent[] = [];
    // $12 at ten cents a second: two minutes after provisioning, whatever the bootstrap took of them.
    const pool = await sky.compute(
      {
        provider,
        nodes: 1,
        vcpus: 2,
        memoryGb: 4,
        architecture: "x86_64",
        allocation: "on-demand",
        ttl: 0,
        image: { includes: [tasks], metrics: null },
        options: { console: false, bootstrapTimeout: 240, budget: { max: 12, warnAt: 1 } },
      },
      { onEvent: (event) => events.push(event) },
    );
    try {
      expect(await pool.run(add(2, 3))).toBe(5);
      const cost = pool.cost();
      expect(cost.hourlyRate).toBe(PRICE);
      expect(cost.nodes.map((node) => node.hourlyPrice)).toEqual([PRICE]);
      expect(cost.total).toBeGreaterThan(0);
      expect((await motoInventory(suite.moto.endpoint)).liveInstances).toHaveLength(1);

      const failure = await pool.run(sleep(600)).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(sky.BudgetExceededError.isInstance(failure), String(failure)).toBe(true);
      expect((failure as sky.BudgetExceededError).total).toBeGreaterThanOrEqual(12);
      await expect(pool.run(add(1, 1))).rejects.toSatisfy((error) =>
        sky.BudgetExceededError.isInstance(error),
      );

      const deadline = Date.now() + 120_000;
      while (pool.state !== "destroyed" && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 200));
      expect(pool.state).toBe("destroyed");
      const types = events.map((event) => event.type);
      expect(types.indexOf("budget.warning")).toBeGreaterThan(-1);
      expect(types.indexOf("budget.exceeded")).toBeGreaterThan(types.indexOf("budget.warning"));
      expect(types.slice(types.indexOf("budget.exceeded"))).toContain("node.destroyed");
      expect(types.at(-1)).toBe("pool.destroyed");
      expect(pool.cost().hourlyRate).toBe(0);
    } finally {
      await pool.close();
    }
    // Terminated and torn down: no instance, security group, key pair or volume left.
    expect(await motoInventory(suite.moto.endpoint)).toEqual({
      liveInstances: [],
      securityGroups: [],
      keyPairs: [],
      skywardVolumes: [],
    });
  }, 400_000);
});
