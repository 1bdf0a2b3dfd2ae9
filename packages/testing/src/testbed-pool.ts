/**
 * What the whole-pool tests of a provider share: test-bed hosts standing in for the cloud's machines
 * (handed out by its fake API), a scratch Skyward home, the tasks they run (`fixtures/pool_tasks.py`),
 * and the scenario of an interruptible node reclaimed mid-task — the cloud gives no notice, the pool
 * reads the instance as gone on its reconcile tick, replaces it and runs the interrupted tasks again.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as sky from "@skyward/core";
import { afterAll, beforeAll, expect } from "vitest";
import { createPypiProxy, type PypiProxy } from "./pypi-proxy.js";
import { type ScratchSkywardHome, useScratchSkywardHome } from "./skyward-home.js";
import {
  createTestbed,
  type Testbed,
  type TestbedHost,
  type TestbedSshHostInput,
  testbedSshHost,
} from "./testbed.js";
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
 * `work` (journals its start to a file, then sleeps), `whoami` (node and process) and `environment`
 * (a variable of the task's environment, and its process).
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
  environment: sky.python<[name: string], { value: string | null; pid: number }>("pool_tasks:environment"),
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

/** Returns once `condition` holds; throws "timed out waiting for `what`" after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  if (!(await eventually(condition, timeoutMs))) throw new Error(`timed out waiting for ${what}`);
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

/** `value`, which a suite fixture's `beforeAll` sets; reading it earlier is a mistake in the test. */
function startedValue<T>(fixture: string, value: T | undefined, what: string): T {
  if (value === undefined)
    throw new Error(`${fixture}: ${what} is there only once the suite's beforeAll ran`);
  return value;
}

/** What {@link useFakeApi} gives the tests of its suite once its `beforeAll` ran. */
export interface FakeApiFixture<Fake> {
  /** The fake API. */
  readonly fake: Fake;
  /** A scratch directory for the provider's SSH keys. */
  readonly keysDirectory: string;
  /** The test bed whose hosts the fake hands out (with `hosts` only). */
  readonly bed: Testbed;
}

/**
 * A fake provider API for the tests of the enclosing suite (registered as its `beforeAll` and
 * `afterAll`): with `hosts`, a test bed of that many hosts is made first and `start` gets its hosts to
 * hand out as the instances it creates; a scratch keys directory (named with `prefix`) comes with it.
 * After the suite, the fake is stopped, the bed torn down and the directory removed.
 */
export function useFakeApi<Fake extends AsyncDisposable>(options: {
  start: (hosts?: readonly TestbedHost[]) => Promise<Fake>;
  prefix: string;
  hosts?: number;
}): FakeApiFixture<Fake> {
  let fake: Fake | undefined;
  let keysDirectory: string | undefined;
  let bed: Testbed | undefined;
  beforeAll(async () => {
    if (options.hosts !== undefined) bed = await createTestbed({ hosts: options.hosts });
    fake = await options.start(bed?.hosts);
    keysDirectory = await mkdtemp(join(tmpdir(), options.prefix));
  }, 120_000);
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
    await bed?.teardown();
    if (keysDirectory) await rm(keysDirectory, { recursive: true, force: true });
  });
  const started = <T>(value: T | undefined, what: string) => startedValue("useFakeApi", value, what);
  return {
    get fake() {
      return started(fake, "the fake");
    },
    get keysDirectory() {
      return started(keysDirectory, "the keys directory");
    },
    get bed() {
      return started(bed, "the test bed (with `hosts`)");
    },
  };
}

/** The test-bed host at `address` (a fake's instance stands on it); throws naming the address when none is. */
export function testbedHostAt(hosts: readonly TestbedHost[], address: string): TestbedHost {
  const host = hosts.find((candidate) => candidate.host === address);
  if (!host) throw new Error(`no test-bed host at ${address}`);
  return host;
}

/**
 * Where a provider's `sshAddress` test seam reaches the instance at `address` when the fake API
 * authorises the pool's own key pair on the test-bed host it lends: the host's address, port, root
 * directory and host key, and a self-destruct that does nothing. No user and no key, so the pool logs
 * in as the provider's `sshUser` with the key `prepare` made (unlike {@link testbedStandIn}).
 */
export function testbedAddressAt(
  hosts: readonly TestbedHost[],
  address: string,
): Pick<TestbedHost, "host" | "port" | "root" | "hostKeyFingerprint"> & { selfDestruct: string } {
  const host = testbedHostAt(hosts, address);
  return {
    host: host.host,
    port: host.port,
    root: host.root,
    hostKeyFingerprint: host.hostKeyFingerprint,
    selfDestruct: "true",
  };
}

/**
 * What a provider's `sshAddress` test seam returns for the instance at `address`: the test-bed host
 * there ({@link testbedSshHost}), and a self-destruct that never touches this machine — with `marker`,
 * it touches `<marker>-<host index>` (so a test sees each worker ran it), else it does nothing.
 */
export function testbedStandIn(
  hosts: readonly TestbedHost[],
  address: string,
  marker?: string,
): TestbedSshHostInput & { selfDestruct: string } {
  const host = testbedHostAt(hosts, address);
  return {
    ...testbedSshHost(host),
    selfDestruct: marker ? `touch '${marker}-${hosts.indexOf(host)}'` : "true",
  };
}

/** What {@link useTestbedAndHome} gives the tests of its suite once its `beforeAll` ran. */
export interface TestbedAndHomeFixture {
  readonly bed: Testbed;
  readonly home: ScratchSkywardHome;
}

/**
 * A test bed of `hosts` hosts and a scratch Skyward home (named with `homePrefix`) for the tests of the
 * enclosing suite (its `beforeAll` and `afterAll`), made in that order. After the suite: the bed torn
 * down, the home restored.
 */
export function useTestbedAndHome(options: { hosts: number; homePrefix: string }): TestbedAndHomeFixture {
  let bed: Testbed | undefined;
  let home: ScratchSkywardHome | undefined;
  beforeAll(async () => {
    bed = await createTestbed({ hosts: options.hosts });
    home = await useScratchSkywardHome(options.homePrefix);
  }, 120_000);
  afterAll(async () => {
    await bed?.teardown();
    await home?.restore();
  });
  const started = <T>(value: T | undefined, what: string) => startedValue("useTestbedAndHome", value, what);
  return {
    get bed() {
      return started(bed, "the test bed");
    },
    get home() {
      return started(home, "the scratch Skyward home");
    },
  };
}

/** What {@link useTestbedSshPool} gives the tests of its suite once its `beforeAll` ran. */
export interface TestbedSshPoolFixture {
  /** The pool on the bed's hosts. */
  readonly pool: sky.Pool;
  readonly bed: Testbed;
  /** The PyPI proxy the hosts install through (`proxy.env` in the pool's image). */
  readonly proxy: PypiProxy;
}

/**
 * A pool on the SSH hosts of a test bed for the tests of the enclosing suite (its `beforeAll` and
 * `afterAll`), as the plugins' end-to-end suites make one: a scratch Skyward home (named with
 * `homePrefix`), a test bed of `hosts` hosts, a PyPI proxy they reach, then the pool `compute` describes
 * for them. After the suite: the pool closed, the proxy stopped, the bed torn down, the home restored.
 */
export function useTestbedSshPool(options: {
  homePrefix: string;
  hosts: number;
  compute: (context: { bed: Testbed; proxy: PypiProxy }) => sky.ComputeInput;
}): TestbedSshPoolFixture {
  let home: ScratchSkywardHome | undefined;
  let bed: Testbed | undefined;
  let proxy: PypiProxy | undefined;
  let pool: sky.Pool | undefined;
  beforeAll(async () => {
    home = await useScratchSkywardHome(options.homePrefix);
    bed = await createTestbed({ hosts: options.hosts });
    proxy = await createPypiProxy({ testbed: bed });
    pool = await sky.compute(options.compute({ bed, proxy }));
  });
  afterAll(async () => {
    await pool?.close();
    await proxy?.close();
    await bed?.teardown();
    await home?.restore();
  });
  const started = <T>(value: T | undefined, what: string) => startedValue("useTestbedSshPool", value, what);
  return {
    get pool() {
      return started(pool, "the pool");
    },
    get bed() {
      return started(bed, "the test bed");
    },
    get proxy() {
      return started(proxy, "the PyPI proxy");
    },
  };
}

/** What {@link expectDetachAttach} is given. */
export interface DetachAttachScenario {
  /** The file {@link poolTasks}`.work` journals its starts to. */
  readonly journal: string;
  /**
   * A NEW provider object each call, as another process would make it: the pool is attached through
   * it (twice), so its credentials and key files are read again rather than kept from the first.
   */
  provider(): sky.Provider;
  /** Strings the pool's state file must not hold (API keys, tokens): no private key may be there either. */
  readonly secrets: readonly string[];
  /** What the fake still holds of the pool once it closed (instances not ended, rules, keys): expected empty. */
  leftovers(): unknown[] | Promise<unknown[]>;
  /**
   * The pool's fields besides its provider (accelerator, allocation, region…): it is one node, TTL
   * 60 s, its image including {@link poolTasks}`.file`, console off, bootstrap timeout 240 s, unless set here.
   */
  readonly spec?: Omit<sky.FlatComputeInput, "provider">;
}

/**
 * The scenario of a pool detached while a task runs and attached again, on a one-node pool on
 * `provider()` (see {@link DetachAttachScenario.spec}): a `work` task is
 * running when the pool is detached (its promise ends with a `TaskDetachedError`); the state file
 * holds no secret and no private key; attached through a new provider object, the task's result is
 * collected once and the node is the same worker process; detached again and attached once more,
 * nothing is collected twice and the worker still answers; closed, the fake holds nothing of it.
 * Returns the pool's id.
 */
export async function expectDetachAttach(scenario: DetachAttachScenario): Promise<string> {
  const pool = await sky.compute({
    provider: scenario.provider(),
    nodes: 1,
    ttl: 60,
    image: { includes: [poolTasks.file] },
    ...scenario.spec,
    options: { console: false, bootstrapTimeout: 240, ...scenario.spec?.options },
  });
  const [before] = await pool.broadcast(poolTasks.whoami());
  const pending = pool.run(poolTasks.work("detached", 1.5, scenario.journal)).then(
    (value) => value.key,
    (error: Error) => error.name,
  );
  expect(
    await eventually(
      async () => (await poolTaskRuns(scenario.journal)).some((run) => run.key === "detached"),
      30_000,
    ),
  ).toBe(true);
  const id = await pool.detach();
  expect(await pending).toBe("TaskDetachedError");
  const home = process.env.SKYWARD_HOME;
  if (!home) throw new Error("expectDetachAttach: SKYWARD_HOME is not set (use a scratch Skyward home)");
  const state = await readFile(join(home, "pools", `${id}.json`), "utf8");
  for (const secret of scenario.secrets) expect(state).not.toContain(secret);
  expect(state).not.toMatch(/PRIVATE KEY|privateKey/);
  {
    await using again = await sky.attach(id, { provider: scenario.provider(), options: { console: false } });
    const [outcome, ...others] = await again.collected();
    expect(others).toEqual([]);
    expect(outcome).toMatchObject({ ok: true, value: { key: "detached", pid: before?.pid } });
    expect(await again.broadcast(poolTasks.whoami())).toEqual([before]);
    // Detached again (as `skyward attach` without --close does), and attached once more.
    expect(await again.detach()).toBe(id);
  }
  {
    await using third = await sky.attach(id, { provider: scenario.provider(), options: { console: false } });
    expect(await third.collected()).toEqual([]);
    expect(await third.broadcast(poolTasks.whoami())).toEqual([before]);
  }
  // The task ran once: attaching collected its result, it did not start it again.
  expect((await poolTaskRuns(scenario.journal)).filter((run) => run.key === "detached")).toHaveLength(1);
  expect(await scenario.leftovers()).toEqual([]);
  return id;
}
