/**
 * Cost and budget end to end on the Local provider, given a fixture price (`Local({ hourlyPrice })`;
 * this machine is free otherwise): `pool.cost()` grows with time, the budget's warning comes first,
 * then the pool stops taking tasks, the running task fails with a `BudgetExceededError`, and the pool
 * tears down with no worker left; a lost node's instance stops costing at its terminate, its replacement
 * costs its own price.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const sleep = sky.python<[number], number>("pool_tasks:sleep");
const pid = sky.python<[], number>("pool_tasks:pid");

describe("a local pool with a price and a budget", () => {
  it("is free by default", async () => {
    await using pool = await sky.compute({ options: { console: false, budget: 0.01 } });
    const cost = pool.cost();
    expect(cost).toMatchObject({ currency: "USD", hourlyRate: 0, total: 0 });
    expect(cost.nodes.map((node) => node.hourlyPrice)).toEqual([0]);
  });

  it("refuses a bad price before anything starts", () => {
    expect(() => sky.Local({ hourlyPrice: -1 })).toThrow(
      /Local\.hourlyPrice: expected a price in USD per hour, >= 0/,
    );
  });

  it("counts the nodes a resize adds and stops counting those it removes", async () => {
    await using pool = await sky.compute({
      provider: sky.Local({ hourlyPrice: 1.5 }),
      nodes: sky.nodes({ desired: 1, min: 1, max: 3 }),
      image: { metrics: null },
      options: { console: false },
    });
    expect(pool.cost().hourlyRate).toBe(1.5);
    await pool.resize(3);
    const grown = pool.cost();
    expect(grown.hourlyRate).toBe(4.5);
    expect(grown.nodes.map((node) => node.node)).toEqual([0, 1, 2]);
    await pool.resize(1);
    expect(await until(() => pool.cost().hourlyRate === 1.5, 30_000)).toBe(true);
    const shrunk = pool.cost();
    expect(shrunk.nodes).toHaveLength(1);
    // What the stopped nodes cost stays in the total.
    expect(shrunk.total).toBeGreaterThan(shrunk.nodes[0]?.total ?? 0);
  }, 120_000);

  it("bills a replaced node's instance until its terminate, and the replacement at its own price", async () => {
    const local = sky.Local({ hourlyPrice: 1.5 });
    let provisions = 0;
    const unstartable = new Set<string>();
    // The real Local provider: its replacements are priced at 4 (another offer's price), and the
    // second replacement's instance cannot start (its worker refuses to launch).
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        const instances = await local.provision(options);
        if (provisions === 1) return instances;
        const priced = instances.map((instance) => ({ ...instance, hourlyPrice: 4 }));
        if (provisions === 3) for (const instance of priced) unstartable.add(instance.id);
        return priced;
      },
      async launchWorker(options) {
        if (unstartable.has(options.instance.id)) throw new Error("the worker cannot start (test)");
        return local.launchWorker(options);
      },
    };
    const events: sky.SkywardEvent[] = [];
    await using pool = await sky.compute(
      {
        provider,
        nodes: 2,
        image: { includes: [tasks], metrics: null },
        options: { console: false, maxProvisionAttempts: 1, reconcileTickInterval: 1 },
      },
      { onEvent: (event) => events.push(event) },
    );
    const instanceOf = (node: number) => pool.cost().nodes.find((entry) => entry.node === node)?.instanceId;
    const killNode1 = async (): Promise<void> => {
      const pids = await pool.broadcast(pid());
      process.kill(pids[1] ?? 0, "SIGKILL");
    };

    // A replacement that comes: the lost instance stops costing when it is terminated, the new one
    // costs its own price from its own node.provisioned.
    const first = instanceOf(1);
    const replaced = new Promise<sky.EventOf<"node.replaced">>((resolve) =>
      pool.on("node.replaced", resolve),
    );
    await killNode1();
    const replacement = await replaced;
    expect(replacement.previousInstanceId).toBe(first);
    const destroyed = events.findIndex(
      (event) => event.type === "node.destroyed" && event.instanceId === first,
    );
    const provisioned = events.findIndex(
      (event) => event.type === "node.provisioned" && event.instanceId === replacement.instanceId,
    );
    expect(destroyed).toBeGreaterThan(-1);
    expect(provisioned).toBeGreaterThan(destroyed);
    expect(events[provisioned]).toMatchObject({ node: 1, hourlyPrice: 4, provider: "local" });
    let cost = pool.cost();
    expect(cost.nodes.map((entry) => [entry.node, entry.instanceId, entry.hourlyPrice])).toEqual([
      [0, instanceOf(0), 1.5],
      [1, replacement.instanceId, 4],
    ]);
    expect(cost.hourlyRate).toBe(5.5);

    // A replacement that fails to start: the lost instance stops costing all the same (it was
    // terminated), and the node the reconcile loop starts in its place costs its own price.
    const second = replacement.instanceId;
    const lost = new Promise<void>((resolve) => pool.on("node.lost", () => resolve()));
    await killNode1();
    await lost;
    expect(
      await until(() => {
        const now = instanceOf(1);
        return now !== undefined && now !== second && !unstartable.has(now);
      }, 60_000),
    ).toBe(true);
    expect(events).toContainEqual(expect.objectContaining({ type: "node.destroyed", instanceId: second }));
    cost = pool.cost();
    expect(cost.nodes.map((entry) => entry.instanceId)).not.toContain(second);
    expect(cost.nodes.map((entry) => [entry.node, entry.hourlyPrice])).toEqual([
      [0, 1.5],
      [1, 4],
    ]);
    expect(provisions).toBe(4);
  }, 120_000);

  it("warns, then stops taking tasks, fails the running one and tears down at the budget", async () => {
    const events: sky.SkywardEvent[] = [];
    // $36 per hour is a cent a second: the warning 20 s after provisioning, the end at 40 s.
    const pool = await sky.compute(
      {
        provider: sky.Local({ hourlyPrice: 36 }),
        image: { includes: [tasks], metrics: null },
        options: { console: false, budget: { max: 0.4, warnAt: 0.2 } },
      },
      { onEvent: (event) => events.push(event) },
    );
    try {
      const worker = await pool.run(pid());
      const first = pool.cost();
      expect(first.hourlyRate).toBe(36);
      expect(first.nodes).toHaveLength(1);
      expect(first.nodes[0]?.hourlyPrice).toBe(36);
      expect(first.total).toBeGreaterThan(0);
      expect(first.total).toBeLessThan(0.4);

      const long = pool.run(sleep(600));
      const failure = await long.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(sky.BudgetExceededError.isInstance(failure), String(failure)).toBe(true);
      expect(sky.CancelledError.isInstance(failure)).toBe(true);
      const budgetError = failure as sky.BudgetExceededError;
      expect(budgetError.budget).toBe(0.4);
      expect(budgetError.total).toBeGreaterThanOrEqual(0.4);
      expect(budgetError.total).toBeLessThan(0.45);
      expect(budgetError.taskId).toMatch(/^t\d+$/);

      // No more tasks, with the same typed error.
      await expect(pool.run(pid())).rejects.toSatisfy((error) => sky.BudgetExceededError.isInstance(error));

      // The warning came first, then the end, then the teardown.
      const types = events.map((event) => event.type);
      const warning = types.indexOf("budget.warning");
      const exceeded = types.indexOf("budget.exceeded");
      expect(warning).toBeGreaterThan(-1);
      expect(exceeded).toBeGreaterThan(warning);
      expect(types.filter((type) => type === "budget.warning")).toHaveLength(1);
      const warned = events[warning] as sky.EventOf<"budget.warning">;
      expect(warned).toMatchObject({ budget: 0.4, warnAt: 0.2, hourlyRate: 36 });
      expect(warned.total).toBeGreaterThanOrEqual(0.2);
      expect(warned.total).toBeLessThan(0.25);

      expect(await until(() => pool.state === "destroyed", 30_000)).toBe(true);
      const after = events.map((event) => event.type).slice(exceeded);
      expect(after).toContain("node.destroyed");
      expect(after.at(-1)).toBe("pool.destroyed");
      expect(await until(() => !alive(worker), 10_000)).toBe(true);
      // The cost stopped with the pool.
      const final = pool.cost();
      expect(final.hourlyRate).toBe(0);
      expect(final.nodes).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(pool.cost().total).toBe(final.total);
    } finally {
      await pool.close();
    }
  }, 120_000);

  it("fails compute with a BudgetExceededError when the budget is spent while starting", async () => {
    const events: sky.SkywardEvent[] = [];
    const started = sky.compute(
      {
        nodes: 2,
        // $36,000 per hour: the 50 cents are spent 25 ms after provisioning, long before the workers are up.
        provider: sky.Local({ hourlyPrice: 36_000 }),
        options: { console: false, budget: 0.5 },
      },
      { onEvent: (event) => events.push(event) },
    );
    const failure = await started.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(sky.BudgetExceededError.isInstance(failure), String(failure)).toBe(true);
    const types = events.map((event) => event.type);
    expect(types).toContain("budget.exceeded");
    expect(types).not.toContain("pool.ready");
    expect(types.at(-1)).toBe("pool.destroyed");
  }, 60_000);
});
