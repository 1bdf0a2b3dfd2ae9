/**
 * Pools that heal, on the Local provider with real worker processes and real faults: a worker
 * SIGKILLed mid-task, a task that kills its own worker, a stream interrupted after it yielded, a
 * broadcast issued while a node is being replaced, and a replacement that cannot come.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/healing_tasks.py", import.meta.url));
const image = { includes: [tasks] };

type Work = { key: string; node: number; pid: number };
const work = sky.python<[string, number, string?], Work>("healing_tasks:work");
const whoami = sky.python<[], { node: number; pid: number; total_nodes: number }>("healing_tasks:whoami");
const slowCount = sky.python.stream<[number, number, string?], number>("healing_tasks:slow_count");
const dieOnce = sky.python<[string], number>("healing_tasks:die_once");
const dieAlways = sky.python<[], never>("healing_tasks:die_always");

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-healing-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
  console.log(
    `fault suite (Local): ${tally.faults} faults injected, ${tally.retried} tasks retried, ${tally.lost} results lost, ${tally.duplicates} duplicates delivered`,
  );
});

/** The suite's counts, printed at the end: faults injected, retries, results lost and delivered twice. */
const tally = { faults: 0, retried: 0, lost: 0, duplicates: 0 };

/** `sky.compute`, with the pool's retries and results counted into the tally. */
async function compute(input: sky.ComputeInput, options?: sky.ComputeOptions): Promise<sky.Pool> {
  const pool = await sky.compute(input, options);
  const completions = new Map<string, number>();
  pool.on("task.failed", (event) => {
    if (event.willRetry) tally.retried += 1;
  });
  pool.on("task.completed", (event) => {
    const seen = (completions.get(event.taskId) ?? 0) + 1;
    completions.set(event.taskId, seen);
    if (seen === 2) tally.duplicates += 1;
  });
  return pool;
}

/** Injects a fault: a signal to a worker process. */
function fault(pid: number, signal: "SIGKILL" | "SIGSTOP"): void {
  tally.faults += 1;
  process.kill(pid, signal);
}

async function journal(path: string): Promise<{ key: string; node: number; pid: number }[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

/** Resolves once the journal shows `count` starts of tasks matching `filter`. */
async function started(path: string, count: number, filter: (key: string) => boolean = () => true) {
  for (;;) {
    const entries = (await journal(path)).filter((entry) => filter(entry.key));
    if (entries.length >= count) return entries;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function nextEvent<T extends sky.SkywardEventType>(pool: sky.Pool, type: T): Promise<sky.EventOf<T>> {
  return new Promise((resolve) => {
    const off = pool.on(type, (event) => {
      off();
      resolve(event);
    });
  });
}

describe("a worker SIGKILLed mid-task", () => {
  it("runs its tasks again elsewhere, delivers each result once, and replaces the node", async () => {
    await using pool = await compute({
      nodes: 2,
      image,
      options: { console: false, worker: { concurrency: 2 } },
    });
    const path = join(scratch, "sigkill.jsonl");
    const victim = await pool.run(whoami(), { target: 1 });
    const errors: string[] = [];
    pool.on("error", (event) => errors.push(event.message));
    const retried: string[] = [];
    pool.on("task.failed", (event) => {
      if (event.willRetry) retried.push(event.taskId);
    });
    const deliveries = new Map<string, number>();
    const keys = Array.from({ length: 8 }, (_, index) => `k${index}`);
    const results = Promise.all(
      keys.map((key) =>
        pool.run(work(key, 1.5, path)).then((result) => {
          deliveries.set(key, (deliveries.get(key) ?? 0) + 1);
          return result;
        }),
      ),
    );
    // Every slot is busy (2 nodes x 2): kill node 1's worker there and then.
    await started(path, 4);
    const replaced = nextEvent(pool, "node.replaced");
    fault(victim.pid, "SIGKILL");
    const done = await results.catch((error: unknown) => {
      tally.lost += keys.filter((key) => !deliveries.has(key)).length;
      throw error;
    });
    expect(done.map((result) => result.key)).toEqual(keys);
    expect([...deliveries.values()].every((count) => count === 1)).toBe(true);
    // The tasks that were running on the killed worker ran again, each exactly once more.
    const starts = await journal(path);
    const onVictim = starts.filter((entry) => entry.pid === victim.pid).map((entry) => entry.key);
    expect(onVictim.length).toBeGreaterThan(0);
    expect(new Set(retried).size).toBe(onVictim.length);
    for (const key of onVictim) expect(starts.filter((entry) => entry.key === key)).toHaveLength(2);
    for (const result of done) expect(result.pid).not.toBe(victim.pid);
    const event = await replaced;
    expect(event.node).toBe(1);
    expect(pool.currentNodes()).toBe(2);
    const after = await pool.broadcast(whoami());
    expect(after.map((entry) => entry.node)).toEqual([0, 1]);
    expect(after[1]?.pid).not.toBe(victim.pid);
    expect(alive(victim.pid)).toBe(false);
    // Killed from outside (not by the pool): its exit is reported, with the signal that ended it.
    expect(errors).toContain("the worker process exited (SIGKILL)");
  }, 120_000);

  it("fails a task that opted out of retries with a TaskInterruptedError", async () => {
    await using pool = await compute({ nodes: 1, image, options: { console: false } });
    const path = join(scratch, "opt-out.jsonl");
    const victim = await pool.run(whoami());
    const once = pool.run(work("once", 30, path).withRetry(false));
    await started(path, 1);
    fault(victim.pid, "SIGKILL");
    const error = await once.catch((caught: unknown) => caught);
    expect(sky.TaskInterruptedError.isInstance(error)).toBe(true);
    if (!sky.TaskInterruptedError.isInstance(error)) return;
    expect(error.reason).toBe("retry-disabled");
    expect(error.attempts).toBe(1);
    expect(error.node).toBe(0);
    // Still a WorkerDiedError, for code written before retries.
    expect(sky.WorkerDiedError.isInstance(error)).toBe(true);
    expect((await journal(path)).filter((entry) => entry.key === "once")).toHaveLength(1);
    // The pool heals all the same, and the next task runs on the replacement.
    expect((await pool.run(whoami())).pid).not.toBe(victim.pid);
  }, 120_000);

  it("counts retries per task: a task that kills every worker it runs on fails after them", async () => {
    await using pool = await compute({ nodes: 1, image, options: { console: false } });
    const marker = join(scratch, "die-once");
    // Dies on its first run, succeeds on the replacement.
    const pid = await pool.run(dieOnce(marker));
    expect(pid).toBe((await pool.run(whoami())).pid);
    const error = await pool.run(dieAlways().withRetry({ retries: 1 })).catch((caught: unknown) => caught);
    expect(sky.TaskInterruptedError.isInstance(error)).toBe(true);
    if (!sky.TaskInterruptedError.isInstance(error)) return;
    expect(error.reason).toBe("retries-exhausted");
    expect(error.attempts).toBe(2);
    await expect(pool.run(whoami())).resolves.toMatchObject({ node: 0 });
  }, 120_000);
});

describe("an interrupted stream", () => {
  it("is not restarted silently once it yielded, and restarts when the caller opted in", async () => {
    await using pool = await compute({ nodes: 1, image, options: { console: false } });
    const path = join(scratch, "stream.jsonl");
    let victim = await pool.run(whoami());
    const seen: number[] = [];
    const consume = async (stream: AsyncIterable<number>, killAfter: number, pid: number) => {
      for await (const item of stream) {
        seen.push(item);
        if (seen.length === killAfter) fault(pid, "SIGKILL");
      }
    };
    const error = await consume(pool.run(slowCount(6, 0.2, path)), 2, victim.pid).catch(
      (caught: unknown) => caught,
    );
    expect(sky.TaskInterruptedError.isInstance(error) && error.reason === "stream-started").toBe(true);
    expect(seen).toEqual([0, 1]);

    // Opted in: it starts over on the replacement and the items already delivered are skipped.
    victim = await pool.run(whoami());
    seen.length = 0;
    await consume(pool.run(slowCount(6, 0.2, path).withRetry({ restartStream: true })), 3, victim.pid);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5]);
    expect((await journal(path)).length).toBe(3);
  }, 120_000);
});

describe("broadcast while a node is being replaced", () => {
  it("waits for the replacement, which keeps the rank", async () => {
    await using pool = await compute({ nodes: 2, image, options: { console: false } });
    const before = await pool.broadcast(whoami());
    const lost = nextEvent(pool, "node.lost");
    fault(before[1]?.pid ?? 0, "SIGKILL");
    await lost;
    const after = await pool.broadcast(whoami());
    expect(after.map((entry) => entry.node)).toEqual([0, 1]);
    expect(after[0]?.pid).toBe(before[0]?.pid);
    expect(after[1]?.pid).not.toBe(before[1]?.pid);
    expect(after.every((entry) => entry.total_nodes === 2)).toBe(true);
  }, 120_000);

  it("tries again after a replacement failed, with a backoff, and comes back to its size", async () => {
    const local = sky.Local();
    let provisions = 0;
    // The real Local provider, whose second provisioning (the first replacement) finds no capacity.
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        if (provisions === 2)
          throw new sky.ProvisionError({ provider: "local", message: "no capacity left (test)" });
        return local.provision(options);
      },
    };
    await using pool = await compute({
      provider,
      nodes: 2,
      image,
      options: { console: false, maxProvisionAttempts: 1, reconcileTickInterval: 1 },
    });
    const before = await pool.broadcast(whoami());
    const errors: string[] = [];
    pool.on("error", (event) => errors.push(event.message));
    const replaced: sky.NodeReplacedEvent[] = [];
    pool.on("node.replaced", (event) => replaced.push(event));
    const lost = nextEvent(pool, "node.lost");
    fault(before[1]?.pid ?? 0, "SIGKILL");
    const { instanceId: lostInstance } = await lost;
    // Issued while node 1 is being replaced: its part waits through the failed replacement for the
    // next attempt, which keeps the rank.
    const after = await pool.broadcast(whoami());
    expect(after.map((entry) => entry.node)).toEqual([0, 1]);
    expect(after[1]?.pid).not.toBe(before[1]?.pid);
    expect(provisions).toBe(3);
    // The node the reconcile loop started is the lost one's replacement: said once, naming both.
    expect(replaced).toHaveLength(1);
    expect(replaced[0]).toMatchObject({ node: 1, previousInstanceId: lostInstance });
    expect(replaced[0]?.instanceId).not.toBe(lostInstance);
    // The user was told of the failed attempt, and that the node is being started again.
    expect(errors).toContainEqual(
      expect.stringMatching(
        /^could not replace node 1 \(lost: .*\): No capacity.*; the pool starts another in its place/s,
      ),
    );
    expect(pool.currentNodes()).toBe(2);
  }, 120_000);
});

describe("a replacement that does not come in time", () => {
  it("fails the broadcast's part for that node after provisionTimeout, naming it", async () => {
    const local = sky.Local();
    let provisions = 0;
    // The real Local provider, whose replacement never arrives (provisioning hangs until aborted).
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        if (provisions === 1) return local.provision(options);
        return new Promise((_, reject) => {
          options.signal.addEventListener("abort", () => reject(options.signal.reason), { once: true });
        });
      },
    };
    await using pool = await compute({
      provider,
      nodes: 2,
      image,
      options: { console: false, provisionTimeout: 2 },
    });
    const before = await pool.broadcast(whoami());
    const lost = nextEvent(pool, "node.lost");
    fault(before[1]?.pid ?? 0, "SIGKILL");
    await lost;
    const error = await pool.broadcast(whoami()).catch((caught: unknown) => caught);
    expect(sky.NodeUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/needs node 1, which was lost and did not come back within 2 s/);
    expect((error as sky.NodeUnavailableError).node).toBe(1);
    expect((await pool.run(whoami())).node).toBe(0);
  }, 120_000);
});

describe("a stopped worker (SIGSTOP)", () => {
  it("is declared lost at the liveness timeout; its task runs again and nothing stays behind", async () => {
    await using pool = await compute({
      nodes: 2,
      image,
      options: { console: false, livenessTimeout: 2 },
    });
    const path = join(scratch, "sigstop.jsonl");
    const errors: string[] = [];
    pool.on("error", (event) => errors.push(event.message));
    const victim = await pool.run(whoami(), { target: 1 });
    const lost = nextEvent(pool, "node.lost");
    const replaced = nextEvent(pool, "node.replaced");
    const results = Promise.all([pool.run(work("a", 1, path)), pool.run(work("b", 1, path))]);
    await started(path, 2);
    fault(victim.pid, "SIGSTOP");
    try {
      const event = await lost;
      expect(event.node).toBe(1);
      // Declared by the configured deadline (2 s), not the default 30 s.
      expect(event.reason).toMatch(/sent nothing for \d+ ms \(limit 2000 ms\)/);
      const done = await results;
      expect(done.map((result) => result.key)).toEqual(["a", "b"]);
      expect(done.every((result) => result.pid !== victim.pid)).toBe(true);
      await replaced;
      expect(pool.currentNodes()).toBe(2);
      // The stopped process was terminated with its instance, not left frozen.
      for (let waited = 0; alive(victim.pid) && waited < 100; waited += 1)
        await new Promise((resolve) => setTimeout(resolve, 100));
      expect(alive(victim.pid)).toBe(false);
      // The pool ended that worker itself, replacing its node: no error says it "exited".
      expect(errors.filter((message) => /exited/.test(message))).toEqual([]);
    } finally {
      if (alive(victim.pid)) process.kill(victim.pid, "SIGKILL");
    }
  }, 120_000);
});

describe("a health checker", () => {
  const checkerImage = (directory: string) => ({ ...image, env: { SKYWARD_TEST_HEALTH_DIR: directory } });

  it("gates each node's readiness on its first success", async () => {
    const directory = await mkdtemp(join(scratch, "health-"));
    const events: sky.SkywardEvent[] = [];
    await using pool = await compute(
      {
        nodes: 2,
        image: checkerImage(directory),
        options: {
          console: false,
          healthChecker: {
            check: sky.python("healing_tasks:warming_up"),
            interval: 0.3,
            timeout: 5,
            failures: 3,
          },
        },
      },
      { onEvent: (event) => events.push(event) },
    );
    expect(pool.currentNodes()).toBe(2);
    // Each node passed only on its third check, before it was ready.
    const checks = (await readdir(directory)).filter((name) => name.startsWith("checks-"));
    expect(checks).toHaveLength(2);
    for (const name of checks)
      expect((await readFile(join(directory, name), "utf8")).length).toBeGreaterThanOrEqual(3);
    for (const node of [0, 1]) {
      const health = events.findIndex(
        (event) => event.type === "bootstrap.phase" && event.node === node && event.phase === "health",
      );
      const ready = events.findIndex((event) => event.type === "node.ready" && event.node === node);
      expect(health).toBeGreaterThanOrEqual(0);
      expect(health).toBeLessThan(ready);
    }
  }, 120_000);

  it("replaces a node whose checks fail in a row; its tasks run again", async () => {
    const directory = await mkdtemp(join(scratch, "health-"));
    await using pool = await compute({
      nodes: 2,
      image: checkerImage(directory),
      options: {
        console: false,
        healthChecker: { check: "healing_tasks:node_health", interval: 0.3, timeout: 5, failures: 2 },
      },
    });
    const path = join(scratch, "health-work.jsonl");
    const before = await pool.broadcast(whoami());
    const lost = nextEvent(pool, "node.lost");
    const replaced = nextEvent(pool, "node.replaced");
    const running = pool.run(work("during", 3, path), { target: 1 });
    await started(path, 1);
    await writeFile(join(directory, "sick-1"), "");
    const event = await lost;
    expect(event.node).toBe(1);
    expect(event.reason).toMatch(/health check failed 2 times in a row: node 1 is marked sick/);
    // Well again, so that the replacement passes its first check.
    await rm(join(directory, "sick-1"));
    await replaced;
    const result = await running;
    expect(result.node).toBe(1);
    expect(result.pid).not.toBe(before[1]?.pid);
    expect((await journal(path)).filter((entry) => entry.key === "during")).toHaveLength(2);
    expect(alive(before[1]?.pid ?? 0)).toBe(false);
  }, 120_000);

  it("waits its interval after a check that raised, and fails a node that never passes", async () => {
    const directory = await mkdtemp(join(scratch, "health-"));
    const error = await sky
      .compute({
        nodes: 1,
        image: checkerImage(directory),
        options: {
          console: false,
          healthChecker: { check: "healing_tasks:raising_health", interval: 0.5, timeout: 5, failures: 3 },
        },
      })
      .catch((caught: unknown) => caught);
    expect(sky.BootstrapError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /failed its health check 3 times in a row: healing_tasks:raising_health raised RuntimeError: the check itself broke/,
    );
    const times = (await readFile(join(directory, "raised"), "utf8")).trim().split("\n").map(Number);
    expect(times).toHaveLength(3);
    for (let index = 1; index < times.length; index += 1)
      expect((times[index] as number) - (times[index - 1] as number)).toBeGreaterThanOrEqual(0.45);
  }, 120_000);
});
