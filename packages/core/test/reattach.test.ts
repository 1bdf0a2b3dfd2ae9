// Detach and reattach across processes: a client starts a Local pool and six tasks, detaches the
// pool and is killed with SIGKILL; this process attaches, gets every task's outcome exactly once
// (three finished while nobody was attached, three finished after), runs more tasks, closes — and
// nothing is left running or on disk.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { extendImage, Plugin } from "../src/contract.js";
import * as sky from "../src/index.js";
import { alive, cleanUpDetached, until } from "./fixtures/processes.js";

const child = fileURLToPath(new URL("./fixtures/detach-child.ts", import.meta.url));
const submitChild = fileURLToPath(new URL("./fixtures/submit-detach-child.ts", import.meta.url));
const tasks = fileURLToPath(new URL("./fixtures/detach_tasks.py", import.meta.url));
const doubleIt = sky.python<[x: number], number>("detach_tasks:double");

describe("detach and attach", () => {
  it("comes back with its healing, autoscaling and health-check settings", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-attach-settings-"));
    const healthChecker = { check: "detach_tasks:healthy", interval: 20, timeout: 5, failures: 2 };
    const settings = {
      livenessTimeout: 45,
      retryOnInterruption: 1,
      autoscaleCooldown: 4,
      autoscaleIdleTimeout: 90,
      reconcileTickInterval: 2,
    };
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      image: { includes: [tasks] },
      options: { console: false, healthChecker, ...settings },
    });
    const id = await pool.detach();
    await using again = await sky.attach(id, { options: { console: false } });
    expect(again.options).toMatchObject({ ...settings, healthChecker });
    expect(await again.run(doubleIt(21))).toBe(42);
  }, 60_000);

  it("keeps an elastic pool's node bounds: attached with a provider it grows and shrinks within them, without one it says why it cannot grow", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-attach-bounds-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: [1, 2],
      image: { includes: [tasks] },
      options: { console: false, autoscaleIdleTimeout: 600 },
    });
    expect(pool.nodes()).toHaveLength(1);
    const id = await pool.detach();
    {
      // Without a provider to start nodes with, the pool stays at its size and says why.
      await using fixed = await sky.attach(id, { options: { console: false } });
      const refused = await fixed.resize(2).catch((error: unknown) => error);
      expect(sky.ConfigurationError.isInstance(refused)).toBe(true);
      expect((refused as Error).message).toMatch(/attach\(id, \{ provider \}\)/);
      expect(fixed.nodes()).toHaveLength(1);
      await fixed.detach();
    }
    await using again = await sky.attach(id, {
      provider: sky.Local({ workRoot }),
      options: { console: false },
    });
    await again.resize(2);
    expect(again.nodes().filter((node) => node.ready)).toHaveLength(2);
    // The new node runs the pool's image (its includes): the task module is there.
    expect(await again.broadcast(doubleIt(4))).toEqual([8, 8]);
    const refused = await again.resize(3).catch((error: unknown) => error);
    expect(sky.ConfigurationError.isInstance(refused)).toBe(true);
    await again.resize(1);
    expect(again.nodes()).toHaveLength(1);
  }, 120_000);

  it("starts a node with the plugins passed again, and refuses others, naming both lists", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-attach-plugins-"));
    const environment = sky.python<[name: string], string | null>("detach_tasks:environment");
    // Plugins are code: the attaching caller passes the same ones again (their transform here).
    const marking = () =>
      Plugin.create("marking").withImageTransform(({ image }) =>
        extendImage(image, { env: { MARKED: "yes" } }),
      );
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: [1, 2],
      image: { includes: [tasks] },
      plugins: [marking()],
      options: { console: false, autoscaleIdleTimeout: 600 },
    });
    const id = await pool.detach();
    const other = await sky
      .attach(id, { provider: sky.Local({ workRoot }), plugins: [marking(), Plugin.create("extra")] })
      .catch((error: unknown) => error);
    expect(sky.ConfigurationError.isInstance(other)).toBe(true);
    expect((other as Error).message).toContain(
      `plugins: expected the plugins pool ${id} was started with, in order (marking), received marking, extra`,
    );
    {
      await using fixed = await sky.attach(id, {
        provider: sky.Local({ workRoot }),
        options: { console: false },
      });
      const refused = await fixed.resize(2).catch((error: unknown) => error);
      expect(sky.ConfigurationError.isInstance(refused)).toBe(true);
      expect((refused as Error).message).toMatch(
        /has plugins \(marking\).*attach\(id, \{ provider, plugins \}\)/,
      );
      await fixed.detach();
    }
    await using again = await sky.attach(id, {
      provider: sky.Local({ workRoot }),
      plugins: [marking()],
      options: { console: false },
    });
    await again.resize(2);
    expect(await again.broadcast(environment("MARKED"))).toEqual(["yes", "yes"]);
  }, 120_000);

  it("lets a client detach with a submitted task nobody looked at, and the task's outcome comes to attach", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-submit-detach-"));
    const client = spawn(process.execPath, [submitChild, workRoot], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    client.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    client.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => client.once("exit", resolve));
    expect(stderr).not.toMatch(/Unhandled|TaskDetachedError|CancelledError/);
    expect(code).toBe(0);
    const [first, second] = stdout.trim().split("\n");
    expect(second).toBe("still here");
    const { id, task } = JSON.parse(first as string) as { id: string; task: string };
    await using again = await sky.attach(id, { options: { console: false } });
    const outcomes = await again.collected();
    expect(outcomes.map((outcome) => [outcome.taskId, outcome.ok ? outcome.value : outcome.message])).toEqual(
      [[task, "unwatched"]],
    );
  }, 60_000);

  it("hands every result of a SIGKILLed client's detached pool to the next process, once, and carries on", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-reattach-"));
    const client = spawn(process.execPath, [child, workRoot], { stdio: ["ignore", "pipe", "inherit"] });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: client.stdout }).once("line", resolve);
      client.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
    });
    const { id, outcomes, pids } = JSON.parse(line) as { id: string; outcomes: string[]; pids: number[] };
    // Its own callers were let go of when it detached: told their tasks go on, detached.
    expect(outcomes).toEqual(Array(6).fill("TaskDetachedError"));
    client.kill("SIGKILL");
    await new Promise((resolve) => client.once("exit", resolve));
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid)).toBe(true);

    // The state file: the owner's only, and no token in clear (the token is 48 hex digits).
    const stateFile = join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`);
    expect(statSync(stateFile).mode & 0o777).toBe(0o600);
    const state = readFileSync(stateFile, "utf8");
    expect(state).not.toMatch(/[0-9a-f]{48}/);
    const [root] = readdirSync(workRoot);
    expect(root).toBeDefined();

    // The short tasks finish while nobody is attached.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const events: sky.SkywardEvent[] = [];
    const pool = await sky.attach(id, { options: { console: false } });
    pool.on("*", (event) => events.push(event));
    expect(pool.id).toBe(id);
    const collected = await pool.collected();
    expect(collected.map((entry) => (entry.ok ? entry.value : entry.errorType)).sort()).toEqual([
      "a",
      "b",
      "c",
      "x",
      "y",
      "z",
    ]);
    expect(new Set(collected.map((entry) => entry.taskId)).size).toBe(6);
    expect(collected.every((entry) => entry.name === "detach_tasks:slow")).toBe(true);

    // Carries on: the same workers run more tasks.
    const double = sky.python<[x: number], number>("detach_tasks:double");
    expect(await pool.map(double, [[1], [2], [3], [4]])).toEqual([2, 4, 6, 8]);
    const nodes = await pool.broadcast(sky.python<[], number>("os:getpid")());
    expect([...nodes].sort()).toEqual([...pids].sort());

    await pool.close();
    for (const pid of pids) expect(await until(() => !alive(pid), 10_000)).toBe(true);
    expect(existsSync(stateFile)).toBe(false);
    expect(readdirSync(workRoot)).toEqual([]);
    await expect(sky.attach(id)).rejects.toThrow(/no detached pool/);
    await expect(pool.detach()).rejects.toThrow(/already closed or detached/);
    expect(events.some((event) => event.type === "pool.destroyed")).toBe(true);
  }, 120_000);

  it("a session owns several pools: detached together, attached in another session, closed together", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-session-"));
    const first = sky.session();
    const a = await first.compute({
      provider: sky.Local({ workRoot }),
      nodes: 1,
      options: { console: false },
    });
    const b = await first.compute({
      provider: sky.Local({ workRoot }),
      nodes: 2,
      options: { console: false },
    });
    expect(first.pools).toEqual([a, b]);
    const pid = sky.python<[], number>("os:getpid");
    const pids = [...(await a.broadcast(pid())), ...(await b.broadcast(pid()))];
    const ids = await first.detach();
    expect(ids).toEqual([a.id, b.id]);
    expect(first.pools).toEqual([]);
    expect((await sky.detachedPools()).map((pool) => pool.id)).toEqual(expect.arrayContaining(ids));
    for (const worker of pids) expect(alive(worker)).toBe(true);
    {
      await using second = sky.session();
      const again = await Promise.all(ids.map((id) => second.attach(id, { options: { console: false } })));
      expect(await again[0]?.collected()).toEqual([]);
      expect(await again[1]?.broadcast(pid())).toEqual(pids.slice(1));
      expect(second.pools.map((pool) => pool.id).sort()).toEqual([...ids].sort());
    }
    // Out of scope: both pools closed, their workers stopped, nothing left on disk.
    for (const worker of pids) expect(await until(() => !alive(worker), 10_000)).toBe(true);
    expect(readdirSync(workRoot)).toEqual([]);
    expect((await sky.detachedPools()).map((pool) => pool.id)).not.toEqual(expect.arrayContaining([ids[0]]));
  }, 120_000);

  it("a detached pool nobody comes back for stops at its TTL, and attach then says so and cleans up", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-ttl-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: 2,
      ttl: 1,
      options: { console: false },
    });
    const pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
    const id = await pool.detach();
    for (const pid of pids) expect(await until(() => !alive(pid), 15_000)).toBe(true);
    expect(
      (await sky.detachedPools()).find((entry) => entry.id === id)?.nodes.map((node) => node.alive),
    ).toEqual([false, false]);
    await expect(sky.attach(id)).rejects.toThrow(/workers are gone \(nodes 0, 1\): their TTL ran out/);
    expect((await sky.detachedPools()).some((entry) => entry.id === id)).toBe(false);
    expect(readdirSync(workRoot)).toEqual([]);
  }, 60_000);

  it("refuses to attach a Local pool with one worker dead, naming it, and keeps its state for the live one", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-part-gone-"));
    let left: { pids: number[]; id?: string; workRoot: string } = { pids: [], workRoot };
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 2,
        options: { console: false },
      });
      const pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
      left = { pids, workRoot };
      const id = await pool.detach();
      left.id = id;
      process.kill(pids[1] as number, "SIGKILL");
      expect(await until(() => !alive(pids[1] as number), 15_000)).toBe(true);
      await expect(sky.attach(id)).rejects.toThrow(
        /cannot be attached with nodes missing: the worker of node 1 is gone \(stopped or killed\) while node 0 still runs; its state is kept/,
      );
      // Node 0's worker and everything it holds are still reachable through the state: nothing went.
      expect(
        (await sky.detachedPools()).find((entry) => entry.id === id)?.nodes.map((node) => node.alive),
      ).toEqual([true, false]);
      expect(alive(pids[0] as number)).toBe(true);
      expect(readdirSync(workRoot)).toHaveLength(1);
    } finally {
      cleanUpDetached(left);
    }
  }, 60_000);

  it("refuses to detach a pool whose provider cannot reach its workers again, and the pool carries on", async () => {
    // Local's machinery under another name, without reconnectWorker: a third-party provider's case.
    const provider = { ...sky.Local(), name: "acme" };
    expect("reconnectWorker" in provider).toBe(false);
    await using pool = await sky.compute({ provider, options: { console: false } });
    await expect(pool.detach()).rejects.toThrow(
      /runs on "acme", which cannot reach a detached pool's workers again \(the provider has no reconnectWorker\)/,
    );
    expect(await pool.run(sky.python<[number, number], number>("operator:add")(2, 3))).toBe(5);
    expect((await sky.detachedPools()).some((entry) => entry.id === pool.id)).toBe(false);
  });

  it("refuses to attach a pool that does not exist, or by a path", async () => {
    await expect(sky.attach("nosuchpool")).rejects.toThrow(/no detached pool "nosuchpool"/);
    await expect(sky.attach("../etc")).rejects.toThrow(/not a pool id/);
  });

  it("an attached pool runs with the workers' own settings: concurrency, buffer, metrics", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-attach-settings-"));
    const tasks = fileURLToPath(new URL("./fixtures/detach_collection_tasks.py", import.meta.url));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: 1,
      image: { includes: [tasks], metrics: [sky.metrics.Memory({ interval: 0.2 })] },
      options: { console: false, worker: { concurrency: 3, buffer: 0 } },
    });
    const pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
    const id = await pool.detach();
    try {
      // Refused, not ignored: the running workers' settings cannot change on attach.
      const options = { console: false, worker: { concurrency: 1 }, cluster: false } as never;
      await expect(sky.attach(id, { options })).rejects.toThrow(
        /options\.worker: the workers keep the settings[\s\S]*options\.cluster: distributed collections stay/,
      );
      await using again = await sky.attach(id, { options: { console: false } });
      // The worker's metrics go on as the image set them (memory only, every 0.2 s), not the defaults.
      const names = new Set<string>();
      let samples = 0;
      const off = again.on("metric", (event) => {
        names.add(event.name);
        samples += 1;
      });
      // Three tasks meet at a barrier of three on the one node: only with its 3 slots (buffer 0).
      const meet = sky.python<[string, number], string>("detach_collection_tasks:meet");
      const met = await Promise.all([0, 1, 2].map(() => again.run(meet("b", 3))));
      expect(met).toEqual(["met", "met", "met"]);
      expect(await until(() => samples >= 8, 20_000)).toBe(true);
      off();
      expect([...names]).toEqual(["memory"]);
      expect(await again.broadcast(sky.python<[], number>("os:getpid")())).toEqual(pids);
    } finally {
      cleanUpDetached({ pids, id, workRoot });
    }
  }, 120_000);
});
