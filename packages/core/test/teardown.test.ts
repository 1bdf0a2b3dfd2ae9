/**
 * Every way a pool's start can end leaves nothing running: what was provisioned before the start
 * was given up is terminated, and the provider's resources are torn down (a cloud bills for both).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Plugin } from "../src/contract.js";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));

/**
 * The real Local provider, but it has room for one instance only: a second `provision` call waits
 * until it is aborted (`"waits"`: a cloud whose capacity is slow to come) or fails at once, to be
 * asked again after `provisionRetryDelay` (`"refuses"`). Records what it made.
 */
function oneAtATime(second: "waits" | "refuses") {
  const local = sky.Local();
  type LocalCluster = Awaited<ReturnType<typeof local.prepare>>;
  const made: { cluster?: LocalCluster; instances: string[]; waiting: boolean } = {
    instances: [],
    waiting: false,
  };
  const provider: sky.Provider = {
    ...local,
    name: "one-at-a-time",
    async prepare(options) {
      made.cluster = await local.prepare(options as never);
      return made.cluster;
    },
    async provision(options) {
      if (made.instances.length === 0) {
        const instances = await local.provision({ ...options, count: 1 } as never);
        made.instances.push(...instances.map((instance) => instance.id));
        return instances;
      }
      made.waiting = true;
      if (second === "refuses")
        throw new sky.ProvisionError({ provider: "one-at-a-time", message: "no room", isRetryable: true });
      return await new Promise<never>((_, reject) => {
        options.signal.addEventListener("abort", () => reject(new Error("provisioning was aborted")), {
          once: true,
        });
      });
    },
  };
  return { local, provider, made };
}

describe("a start given up", () => {
  it.each([
    ["while a provision call waits", "waits"],
    ["between provision attempts", "refuses"],
  ] as const)(
    "%s terminates the instances provisioned so far and tears the cluster down",
    async (_, second) => {
      const { local, provider, made } = oneAtATime(second);
      const abort = new AbortController();
      const started = sky
        .compute(
          {
            provider,
            nodes: 2,
            image: { includes: [tasks] },
            // A wait between attempts longer than the test: a start given up must not sit it out.
            options: { console: false, logging: false, provisionRetryDelay: 3600 },
          },
          { signal: abort.signal, handleSignals: false },
        )
        .catch((caught: unknown) => caught);
      await expect.poll(() => made.waiting, { timeout: 60_000 }).toBe(true);
      abort.abort(new Error("the user gave up"));
      const error = await started;
      expect(sky.CancelledError.isInstance(error)).toBe(true);
      const cluster = made.cluster as NonNullable<typeof made.cluster>;
      const [instance] = made.instances;
      // The one instance made is gone, and so is the cluster's directory (Local's resources).
      expect(
        await local.getInstance({ cluster, id: instance as string, signal: AbortSignal.timeout(5000) }),
      ).toBe(null);
      expect(existsSync(cluster.specific.root)).toBe(false);
    },
    120_000,
  );
});

describe("a pool closed while its plugins' client hooks are entered", () => {
  it("exits the hooks it entered, and the start fails with why it closed", async () => {
    // The budget must run out while the hook is entered, after the pool is ready: on a loaded
    // machine a short budget can run out before (the start then fails before any hook), so a
    // longer one is tried then; the assertions hold on the first run that entered the hook.
    for (const budget of [0.5, 4, 30]) {
      const hooks: string[] = [];
      let exceeded: () => void = () => {};
      const budgetSpent = new Promise<void>((resolve) => {
        exceeded = resolve;
      });
      // Entered slowly: the pool's budget runs out meanwhile (a SIGINT would do the same).
      const slow = Plugin.create("slow-client-hook").withAroundClient(async () => {
        hooks.push("entered");
        await budgetSpent;
        return { [Symbol.asyncDispose]: async () => void hooks.push("exited") };
      });
      const error = await sky
        .compute(
          {
            // 1 USD a second: the budget is spent in `budget` seconds.
            provider: sky.Local({ hourlyPrice: 3600 }),
            plugins: [slow],
            options: { console: false, logging: false, budget },
          },
          { handleSignals: false, onEvent: (event) => event.type === "budget.exceeded" && exceeded() },
        )
        .catch((caught: unknown) => caught);
      expect(sky.BudgetExceededError.isInstance(error)).toBe(true);
      if (hooks.length === 0) continue; // spent before the pool was ready: no hook to exit
      expect(hooks).toEqual(["entered", "exited"]);
      return;
    }
    throw new Error("the budget ran out before the pool was ready, even at 30 s");
  }, 180_000);
});

describe("compute's signal once the pool is ready", () => {
  it("no longer stops the nodes still starting: they join, none is started twice", async () => {
    const local = sky.Local();
    let openGate: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    // Node 1 is slow to start: it is still starting when the pool is ready with node 0 (min 1).
    const provider: sky.Provider = {
      ...local,
      async launchWorker(options) {
        if (options.nodeId === 1) await gate;
        return local.launchWorker(options as never);
      },
    };
    const events: sky.SkywardEvent[] = [];
    const abort = new AbortController();
    await using pool = await sky.compute(
      {
        provider,
        nodes: sky.nodes({ desired: 2, min: 1 }),
        image: { includes: [tasks] },
        options: { console: false, logging: false },
      },
      { signal: abort.signal, handleSignals: false, onEvent: (event) => events.push(event) },
    );
    expect(pool.currentNodes()).toBe(1);
    // A timeout given for provisioning runs out after compute returned: nothing of the pool stops.
    abort.abort(new Error("the provisioning deadline"));
    openGate();
    await expect.poll(() => pool.currentNodes(), { timeout: 60_000 }).toBe(2);
    expect(events.filter((event) => event.type === "error").map((event) => event.message)).toEqual([]);
    expect(events.filter((event) => event.type === "node.provisioned")).toHaveLength(2);
  }, 120_000);
});
