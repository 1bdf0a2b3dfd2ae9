/**
 * What the whole-pool tests of a provider share: test-bed hosts standing in for the cloud's machines
 * (handed out by its fake API), a scratch Skyward home, the tasks they run (`fixtures/pool_tasks.py`),
 * and the scenario of an interruptible node reclaimed mid-task — the cloud gives no notice, the pool
 * reads the instance as gone on its reconcile tick, replaces it and runs the interrupted tasks again.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as sky from "@skyward/core";
import { expect } from "vitest";
import { type ScratchSkywardHome, useScratchSkywardHome } from "./skyward-home.js";
import { createTestbed, type Testbed } from "./testbed.js";
import { type TestbedHostPool, testbedHostPool } from "./testbed-host-pool.js";

/** A start of {@link poolTasks}`.work`, as it journals it and returns it. */
export interface PoolTaskRun {
  readonly key: string;
  readonly node: number;
  readonly pid: number;
}

const packageRoot = dirname(createRequire(import.meta.url).resolve("@skyward/testing/package.json"));

/**
 * The tasks of whole-pool tests, from `fixtures/pool_tasks.py` (a pool includes {@link poolTasks}`.file`
 * in its image): `info` (node, node count, head address, peers' addresses, working directory), `add`,
 * `work` (journals its start to a file, then sleeps) and `whoami` (node and process).
 */
export const poolTasks = {
  file: join(packageRoot, "src", "fixtures", "pool_tasks.py"),
  info: sky.python<
    [],
    { node: number; total_nodes: number; head_addr: string; peers: string[]; cwd: string }
  >("pool_tasks:info"),
  add: sky.python<[a: number, b: number], number>("pool_tasks:add"),
  work: sky.python<[key: string, seconds: number, journal: string], PoolTaskRun>("pool_tasks:work"),
  whoami: sky.python<[], { node: number; pid: number }>("pool_tasks:whoami"),
};

/** The starts {@link poolTasks}`.work` journalled to `journal` so far. */
export async function poolTaskRuns(journal: string): Promise<PoolTaskRun[]> {
  return (await readFile(journal, "utf8").catch(() => ""))
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as PoolTaskRun);
}

/** Whether `condition` holds within `timeoutMs` (polled every 100 ms). */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

/** A test bed whose hosts stand in for a cloud's machines, and a scratch Skyward home. */
export interface TestbedMachines<Owner> extends AsyncDisposable {
  readonly bed: Testbed;
  readonly home: ScratchSkywardHome;
  /** The bed's hosts, for the fake API to hand out to the instances it creates. */
  readonly hosts: TestbedHostPool<Owner>;
}

/**
 * Starts a test bed of `hosts` hosts and a scratch Skyward home (its directory named with
 * `homePrefix`); disposing it gives the hosts back, tears the bed down and removes the home.
 */
export async function startTestbedMachines<Owner>(options: {
  hosts: number;
  homePrefix: string;
}): Promise<TestbedMachines<Owner>> {
  const home = await useScratchSkywardHome(options.homePrefix);
  const bed = await createTestbed({ hosts: options.hosts });
  const hosts = await testbedHostPool<Owner>(bed.hosts);
  return {
    bed,
    home,
    hosts,
    async [Symbol.asyncDispose]() {
      await hosts.releaseAll();
      await bed.teardown();
      await home[Symbol.asyncDispose]();
    },
  };
}

/** What {@link expectPreemptedNodeReplaced} is given. */
export interface PreemptionScenario {
  /** The file {@link poolTasks}`.work` journals its starts to. */
  readonly journal: string;
  /** Task keys are `${keyPrefix}-0` … `${keyPrefix}-3`. */
  readonly keyPrefix: string;
  /** Takes node 1's machine away as the cloud does (the fake's instance state), given its instance id. */
  preempt(instanceId: string): void | Promise<void>;
}

/**
 * The scenario of an interruptible node reclaimed mid-task without notice, on a pool of two nodes
 * (worker concurrency 2, reconcile tick 1 s) whose image includes {@link poolTasks}`.file`: node 1's two
 * slots are busy with `work` when `preempt` takes its machine away. It expects the pool to read node 1
 * as preempted on the reconcile tick (`node.preempted`, `node.lost`, `node.replaced`, the reason "the
 * provider reports its instance … terminated"), to run the two interrupted tasks once more and report
 * every result once, and to be back at two nodes with a new instance for node 1. Returns the instance
 * ids of node 1 before and after.
 */
export async function expectPreemptedNodeReplaced(
  pool: sky.Pool,
  scenario: PreemptionScenario,
): Promise<{ victim: string; replacement: string }> {
  const events: sky.SkywardEvent[] = [];
  for (const type of ["node.preempted", "node.lost", "node.replaced"] as const)
    pool.on(type, (event) => events.push(event));
  const completions = new Map<string, number>();
  pool.on("task.completed", (event) => {
    completions.set(event.taskId, (completions.get(event.taskId) ?? 0) + 1);
  });
  const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => {
    const off = pool.on("node.replaced", (event) => {
      off();
      resolve(event);
    });
  });
  const { pid } = await pool.run(poolTasks.whoami(), { target: 1 });
  const victim = pool.nodes()[1]?.instanceId ?? "";
  const keys = Array.from({ length: 4 }, (_, index) => `${scenario.keyPrefix}-${index}`);
  const results = Promise.all(keys.map((key) => pool.run(poolTasks.work(key, 3, scenario.journal))));
  // Node 1's two slots are busy: then its machine is taken away.
  expect(
    await eventually(
      async () => (await poolTaskRuns(scenario.journal)).filter((entry) => entry.pid === pid).length >= 2,
      60_000,
    ),
  ).toBe(true);
  await scenario.preempt(victim);
  const done = await results;
  expect(done.map((result) => result.key)).toEqual(keys);
  // The two interrupted tasks ran again, on the replacement or on node 0; every result came once.
  const runs = await poolTaskRuns(scenario.journal);
  expect(runs.filter((entry) => entry.pid === pid)).toHaveLength(2);
  expect(runs).toHaveLength(6);
  expect(await replaced).toMatchObject({ node: 1, previousInstanceId: victim });
  // Late duplicates would come after the batch: give them a moment.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect([...completions.values()].every((count) => count === 1)).toBe(true);
  expect(completions.size).toBe(1 + keys.length);
  const reason = `the provider reports its instance ${victim} terminated`;
  expect(events.map((entry) => [entry.type, "node" in entry ? entry.node : undefined])).toEqual([
    ["node.preempted", 1],
    ["node.lost", 1],
    ["node.replaced", 1],
  ]);
  expect(events[0]).toMatchObject({ type: "node.preempted", instanceId: victim, reason });
  expect(events[1]).toMatchObject({ type: "node.lost", instanceId: victim, reason });
  // Back to size, node 1 on a new instance.
  expect(pool.currentNodes()).toBe(2);
  expect((await pool.broadcast(poolTasks.whoami())).map((entry) => entry.node)).toEqual([0, 1]);
  const replacement = pool.nodes()[1]?.instanceId ?? "";
  expect(replacement).not.toBe(victim);
  return { victim, replacement };
}
