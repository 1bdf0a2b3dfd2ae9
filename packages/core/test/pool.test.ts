/**
 * End to end on the Local provider: real worker processes, real sockets, the real Python runtime.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import * as sky from "../src/index.js";
import { ITEMS_PER_TURN } from "../src/pool/dispatch-verbs.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const image = { includes: [tasks] };

const add = sky.python<[number, number], number>("pool_tasks:add");
const info = sky.python<
  [],
  { node: number; total_nodes: number; is_head: boolean; pid: number; peers: string[] }
>("pool_tasks:info");
const echo = sky.python<[unknown], unknown>("pool_tasks:echo");
const greet = sky.python<[string, string?], string>("pool_tasks:greet");
const boom = sky.python<[string], never>("pool_tasks:boom");
const sleep = sky.python<[number], number>("pool_tasks:sleep");
const count = sky.python.stream<[number], number>("pool_tasks:count");
const failMidway = sky.python.stream<[number], number>("pool_tasks:fail_midway");
const shout = sky.python<[string], string>("pool_tasks:shout");
const unterminated = sky.python<[string], string>("pool_tasks:unterminated");
const unsendable = sky.python<[], unknown>("pool_tasks:unsendable");
const die = sky.python<[], never>("pool_tasks:die");
const pid = sky.python<[], number>("pool_tasks:pid");
const env = sky.python<[string], string | null>("pool_tasks:env");
const doubleBytes = sky.python<[Uint8Array], Uint8Array>("pool_tasks:double_bytes");
const myShard = sky.python<[number, boolean?, boolean?], number[]>("pool_tasks:my_shard");
const alignedShard = sky.python<[number], [number[], string[]]>("pool_tasks:aligned_shard");
const headOnlyPrint = sky.python<[string], number>("pool_tasks:head_only_print");
const silentPrint = sky.python<[string], string>("pool_tasks:silent_print");
const streamedSum = sky.python<[AsyncIterable<number> | Iterator<number>], { total: number; seen: number }>(
  "pool_tasks:streamed_sum",
);
const take = sky.python<[AsyncIterable<number>, number], number[]>("pool_tasks:take");

describe("a 3-node local pool (thread executor)", () => {
  let pool: sky.Pool;
  const logs: sky.LogEvent[] = [];

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 3,
      image: { ...image, env: { SKYWARD_TEST_VALUE: "from the image" } },
      options: { console: false, worker: { concurrency: 2 } },
    });
    pool.on("log", (event) => logs.push(event));
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("is ready with every node, each a process with its own node id", async () => {
    expect(pool.state).toBe("ready");
    expect(pool.currentNodes()).toBe(3);
    const infos = await pool.broadcast(info());
    expect(infos.map((entry) => entry.node)).toEqual([0, 1, 2]);
    expect(new Set(infos.map((entry) => entry.pid)).size).toBe(3);
    expect(infos.filter((entry) => entry.is_head)).toHaveLength(1);
    expect(infos.every((entry) => entry.total_nodes === 3 && entry.peers.length === 3)).toBe(true);
  });

  it("runs one call round-robin, and on the node a target names", async () => {
    expect(await pool.run(add(2, 3))).toBe(5);
    const nodes = await Promise.all(Array.from({ length: 6 }, () => pool.run(info())));
    expect(new Set(nodes.map((entry) => entry.node))).toEqual(new Set([0, 1, 2]));
    expect((await pool.run(info(), { target: "head" })).node).toBe(0);
    expect((await pool.run(info(), { target: 2 })).node).toBe(2);
    await expect(pool.run(info(), { target: 7 })).rejects.toThrow(/target/);
  });

  it("passes keyword arguments", async () => {
    expect(await pool.run(greet("ada"))).toBe("hello ada!");
    expect(await pool.run(greet("ada", sky.kwargs({ punctuation: "?", greeting: "hi" })))).toBe("hi ada?");
    expect(await pool.run(greet("ada").withKwargs({ greeting: "hey" }))).toBe("hey ada!");
  });

  it("gathers a typed tuple and streams results ordered and unordered", async () => {
    const [sum, greeting] = await pool.gather(add(1, 2), greet("bo"));
    expect(sum).toBe(3);
    expect(greeting).toBe("hello bo!");
    const ordered: number[] = [];
    for await (const value of pool.stream([sleep(0.3), sleep(0.01), sleep(0.1)])) ordered.push(value);
    expect(ordered).toEqual([0.3, 0.01, 0.1]);
    const unordered: number[] = [];
    for await (const value of pool.stream([sleep(0.4), sleep(0.01), sleep(0.2)], { ordered: false }))
      unordered.push(value);
    expect(unordered).toEqual([0.01, 0.2, 0.4]);
  });

  it("maps in input order, reading an async iterable lazily; items may end in kwargs", async () => {
    const items = Array.from({ length: 500 }, (_, i) => [i, i] as [number, number]);
    expect(await pool.map(add, items)).toEqual(items.map(([a, b]) => a + b));
    async function* generated() {
      for (let i = 0; i < 50; i += 1) yield [i, 1] as [number, number];
    }
    expect(await pool.map(add, generated())).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    // Items take add's parameter tuple, so literals need no annotation and may end in kwargs.
    expect(await pool.map(add, [[1, 2], [3, sky.kwargs({ b: 4 })], [sky.kwargs({ a: 5, b: 6 })]])).toEqual([
      3, 7, 11,
    ]);
  });

  it("cancels the calls it sent when its items fail, as when a call fails", async () => {
    const cancelled: string[] = [];
    const queued: string[] = [];
    const offCancelled = pool.on("task.cancelled", (event) => cancelled.push(event.taskId));
    const offQueued = pool.on("task.queued", (event) => queued.push(event.taskId));
    async function* failing() {
      yield [30] as [number];
      yield [30] as [number];
      throw new Error("the data loader broke");
    }
    await expect(pool.map(sleep, failing())).rejects.toThrow("the data loader broke");
    // Both calls sent are cancelled, not left to run on (and hold the nodes) for 30 s.
    await expect.poll(() => [...cancelled].sort(), { timeout: 20_000 }).toEqual([...queued].sort());
    offCancelled();
    offQueued();
    expect(queued).toHaveLength(2);
  });

  it("streams in order past a later call's failure: it surfaces at its place, and unhandled nowhere", async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    try {
      const items: number[] = [];
      await expect(
        (async () => {
          // The failure comes back while the first call still runs: nothing awaits it yet.
          for await (const item of pool.stream([sleep(1), boom("late")])) items.push(item as number);
        })(),
      ).rejects.toSatisfy((error) => sky.RemoteTaskError.isInstance(error) && /late/.test(error.message));
      expect(items).toEqual([1]);
      // An unhandled rejection ends a Node process (its default): the caller's, here.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", record);
    }
  });

  it("submits without waiting and returns a handle with an id", async () => {
    const handle = pool.submit(add(40, 2));
    expect(handle.id).toMatch(/^t\d+$/);
    expect(await handle.result).toBe(42);
  });

  it("streams a generator's items back, and its failure mid-stream", async () => {
    const items: number[] = [];
    for await (const item of pool.run(count(5))) items.push(item);
    expect(items).toEqual([0, 1, 2, 3, 4]);
    const partial: number[] = [];
    await expect(
      (async () => {
        for await (const item of pool.run(failMidway(5))) partial.push(item);
      })(),
    ).rejects.toSatisfy(
      (error) => sky.RemoteTaskError.isInstance(error) && error.exceptionType === "RuntimeError",
    );
    expect(partial).toEqual([0, 1]);
  });

  it("streams an async iterable argument into the task, lazily", async () => {
    let produced = 0;
    async function* numbers() {
      for (let i = 1; i <= 100; i += 1) {
        produced += 1;
        yield i;
      }
    }
    expect(await pool.run(streamedSum(numbers()))).toEqual({ total: 5050, seen: 100 });
    produced = 0;
    async function* endless() {
      for (let i = 0; ; i += 1) {
        produced += 1;
        yield i;
      }
    }
    expect(await pool.run(take(endless(), 3))).toEqual([0, 1, 2]);
    // It read ahead by at most one credit window, never the whole (endless) stream.
    expect(produced).toBeLessThan(100);
    expect(await pool.run(streamedSum([1, 2, 3].values()))).toEqual({ total: 6, seen: 3 });
  });

  it("carries bytes both ways and validates results with a schema", async () => {
    const data = new Uint8Array([0, 1, 2, 255]);
    expect(Array.from(await pool.run(doubleBytes(data)))).toEqual([0, 1, 2, 255, 0, 1, 2, 255]);
    expect(await pool.run(echo({ nested: [1, "two", null, true] }))).toEqual({
      nested: [1, "two", null, true],
    });
    const typed = sky.python<[number, number], number>("pool_tasks:add", { result: z.number().int() });
    expect(await pool.run(typed(1, 2))).toBe(3);
    const wrong = sky.python<[number, number], string>("pool_tasks:add", { result: z.string() });
    await expect(pool.run(wrong(1, 2))).rejects.toSatisfy((error) =>
      sky.SerializationError.isInstance(error),
    );
  });

  it("applies the image's env", async () => {
    expect(await pool.run(env("SKYWARD_TEST_VALUE"))).toBe("from the image");
  });

  it("reports a remote exception with its type, message, traceback and node", async () => {
    const error = await pool.run(boom("bad value")).catch((caught: unknown) => caught);
    expect(sky.RemoteTaskError.isInstance(error)).toBe(true);
    if (!sky.RemoteTaskError.isInstance(error)) return;
    expect(error.exceptionType).toBe("ValueError");
    expect(error.exceptionMessage).toBe("bad value");
    expect(error.remoteTraceback).toContain("raise ValueError(message)");
    expect([0, 1, 2]).toContain(error.node);
  });

  it("gives each failure its own error, and stays usable afterwards", async () => {
    const missingModule = sky.python<[], never>("no_such_module:fn");
    const missingFunction = sky.python<[], never>("pool_tasks:no_such_function");
    await expect(pool.run(missingModule())).rejects.toSatisfy((error) =>
      sky.FunctionNotFoundError.isInstance(error),
    );
    await expect(pool.run(missingFunction())).rejects.toSatisfy(
      (error) =>
        sky.FunctionNotFoundError.isInstance(error) && /no_such_function/.test((error as Error).message),
    );
    await expect(pool.run(unsendable())).rejects.toSatisfy(
      (error) =>
        sky.SerializationError.isInstance(error) &&
        error.side === "worker" &&
        /lock/.test((error as Error).message),
    );
    await expect(pool.run(echo(new Map([[1, 2]])))).rejects.toSatisfy(
      (error) => sky.SerializationError.isInstance(error) && error.side === "client",
    );
    await expect(pool.run(sleep(5).withTimeout(0.3))).rejects.toSatisfy((error) =>
      sky.TaskTimeoutError.isInstance(error),
    );
    expect(await pool.run(add(1, 1))).toBe(2);
  });

  it("cancels with an AbortSignal and with a handle", async () => {
    const controller = new AbortController();
    const running = pool.run(sleep(5), { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await expect(running).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    const handle = pool.submit(sleep(5));
    handle.cancel();
    await expect(handle.result).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    expect(await pool.run(add(2, 2))).toBe(4);
  });

  it("runs nothing for a signal already aborted, a streaming run included", async () => {
    const started: string[] = [];
    const off = pool.on("task.started", (event) => started.push(event.taskId));
    const aborted = AbortSignal.abort(new Error("the user gave up"));
    await expect(pool.run(add(1, 1), { signal: aborted })).rejects.toSatisfy((error) =>
      sky.CancelledError.isInstance(error),
    );
    const items: number[] = [];
    await expect(
      (async () => {
        for await (const item of pool.run(count(3), { signal: aborted })) items.push(item);
      })(),
    ).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    expect(items).toEqual([]);
    // Nothing reached a worker: a later task is the first to start.
    const after = pool.submit(add(2, 2));
    expect(await after.result).toBe(4);
    off();
    expect(started).toEqual([after.id]);
  });

  it("cancels a task by its id, running or queued, and says false for one that ended", async () => {
    const started = new Promise<void>((resolve) => {
      const off = pool.on("task.started", () => {
        off();
        resolve();
      });
    });
    const running = pool.submit(sleep(5), { target: 0 });
    await started;
    // Node 0's slots are taken by this one and the next few: the last waits in the queue.
    const queued = Array.from({ length: 8 }, () => pool.submit(sleep(5), { target: 0 }));
    const last = queued.at(-1) as sky.TaskHandle<unknown>;
    expect(pool.cancel(running.id)).toBe(true);
    expect(pool.cancel(last.id)).toBe(true);
    for (const handle of [running, last]) {
      await expect(handle.result).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    }
    expect(pool.cancel(running.id)).toBe(false);
    expect(pool.cancel("no-such-task")).toBe(false);
    for (const handle of queued.slice(0, -1)) handle.cancel();
    await Promise.allSettled(queued.map((handle) => handle.result));
    const done = pool.submit(add(1, 2));
    expect(await done.result).toBe(3);
    expect(pool.cancel(done.id)).toBe(false);
  });

  it("streams task output tagged with its node, and filters it on the worker", async () => {
    logs.length = 0;
    expect(await pool.run(shout("hey"), { target: 1 })).toBe("HEY");
    await pool.broadcast(headOnlyPrint("filtered"));
    await pool.broadcast(silentPrint("quiet"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(logs).toContainEqual(expect.objectContaining({ node: 1, stream: "stdout", line: "shouting hey" }));
    expect(logs).toContainEqual(expect.objectContaining({ node: 1, stream: "stderr", line: "warning hey" }));
    const filtered = logs.filter((event) => event.line.startsWith("filtered"));
    expect(filtered.map((event) => event.line)).toEqual(["filtered from node 0"]);
    expect(logs.some((event) => event.line.includes("quiet"))).toBe(false);
  });

  it("ends a task's last line without a line break with the task, never glued to the next task's output", async () => {
    logs.length = 0;
    const first = pool.submit(unterminated("last words"), { target: 2 });
    await first.result;
    const lines = () => logs.filter((event) => event.node === 2).map((event) => [event.taskId, event.line]);
    await expect.poll(lines, { timeout: 10_000 }).toContainEqual([first.id, "last words without a line end"]);
    const second = pool.submit(shout("next"), { target: 2 });
    await second.result;
    await expect.poll(lines, { timeout: 10_000 }).toContainEqual([second.id, "shouting next"]);
    expect(lines().filter(([, line]) => line?.includes("last words"))).toHaveLength(1);
  });

  it("shards data disjointly and completely across nodes, with aligned arrays", async () => {
    for (const [n, shuffle] of [
      [10, false],
      [11, true],
      [100, true],
    ] as const) {
      const parts = await pool.broadcast(myShard(n, shuffle));
      const all = parts.flat().sort((a, b) => a - b);
      expect(all).toEqual(Array.from({ length: n }, (_, i) => i));
    }
    const trimmed = await pool.broadcast(myShard(11, false, true));
    expect(new Set(trimmed.map((part) => part.length))).toEqual(new Set([3]));
    const aligned = await pool.broadcast(alignedShard(9));
    for (const [xs, ys] of aligned) expect(ys).toEqual(xs.map((x) => `y${x}`));
  });

  it("emits task events to subscribers", async () => {
    const seen: string[] = [];
    const off = pool.on("*", (event) => {
      if (event.type.startsWith("task.")) seen.push(event.type);
    });
    await pool.run(add(1, 2));
    off();
    expect(seen).toEqual(["task.queued", "task.started", "task.completed"]);
  });
});

describe("a map wider than one turn of the event loop", () => {
  it("sends its tasks in parts while it reads the items, so the first go out before the last are read", async () => {
    // A fixed buffer wider than the map: every item has a slot at once, nothing makes the map wait.
    await using wide = await sky.compute({
      nodes: 1,
      image,
      options: { console: false, worker: { buffer: 5_000 } },
    });
    let turn = 0;
    let ticking = true;
    const tick = (): void => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const readInTurn = new Map<number, number>();
    function* items(): Generator<[number, number]> {
      for (let index = 0; index < 2_000; index += 1) {
        readInTurn.set(turn, (readInTurn.get(turn) ?? 0) + 1);
        yield [index, 1];
      }
    }
    const results = await wide.map(add, items());
    ticking = false;
    expect(results).toEqual(Array.from({ length: 2_000 }, (_, index) => index + 1));
    expect(readInTurn.size).toBeGreaterThan(1);
    expect(Math.max(...readInTurn.values())).toBeLessThanOrEqual(ITEMS_PER_TURN);
  }, 60_000);
});

describe("executors and worker failures", () => {
  it("runs tasks in reused subprocesses with the process executor", async () => {
    await using pool = await sky.compute({
      nodes: 1,
      image,
      options: { console: false, worker: { executor: "process" } },
    });
    const pids = await Promise.all([pool.run(pid()), pool.run(pid())]);
    expect(pids[0]).toBe(pids[1]);
    await expect(pool.run(sleep(5).withTimeout(0.3))).rejects.toSatisfy((error) =>
      sky.TaskTimeoutError.isInstance(error),
    );
    const items: number[] = [];
    for await (const item of pool.run(count(3))) items.push(item);
    expect(items).toEqual([0, 1, 2]);
    await expect(pool.run(die())).rejects.toSatisfy((error) => sky.WorkerDiedError.isInstance(error));
    expect(await pool.run(add(3, 4))).toBe(7);
  }, 60_000);

  it("starts a fresh subprocess per task when reuseProcesses is off", async () => {
    await using pool = await sky.compute({
      nodes: 1,
      image,
      options: { console: false, worker: { executor: "process", reuseProcesses: false } },
    });
    const first = await pool.run(pid());
    const second = await pool.run(pid());
    expect(first).not.toBe(second);
  }, 60_000);

  it("refuses reuseProcesses: false where tasks run in threads (it would be ignored), before any worker starts", async () => {
    for (const executor of ["thread", "auto"] as const) {
      const error = await sky
        .compute({
          nodes: 1,
          image,
          options: { console: false, worker: { executor, reuseProcesses: false } },
        })
        .catch((caught: unknown) => caught);
      expect(sky.ConfigurationError.isInstance(error)).toBe(true);
      expect((error as sky.ConfigurationError).issues).toEqual([
        {
          path: "options.worker.reuseProcesses",
          message:
            'applies only to tasks run in subprocesses (executor: "process"); here tasks run in threads of the worker: remove it, or set executor: "process"',
        },
      ]);
    }
  }, 60_000);

  it("survives a worker that dies mid-task: the task fails clearly and the node is replaced", async () => {
    await using pool = await sky.compute({ nodes: 1, image, options: { console: false } });
    const before = await pool.run(pid());
    const replaced = new Promise((resolve) => pool.on("node.replaced", resolve));
    // Opted out of retries: it fails instead of killing the replacements too (test/healing.test.ts).
    await expect(pool.run(die().withRetry(false))).rejects.toSatisfy((error) =>
      sky.TaskInterruptedError.isInstance(error),
    );
    await replaced;
    const after = await pool.run(pid());
    expect(after).not.toBe(before);
  }, 60_000);
});

describe("pool lifecycle", () => {
  it("leaves no worker process behind after close", async () => {
    const pool = await sky.compute({ nodes: 2, image, options: { console: false } });
    const pids = (await pool.broadcast(info())).map((entry) => entry.pid);
    await pool.close();
    expect(pool.state).toBe("destroyed");
    for (const workerPid of pids) expect(() => process.kill(workerPid, 0)).toThrow(/ESRCH/);
    await expect(pool.run(add(1, 2))).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    // Every verb that returns a promise rejects it (a `.catch` on it sees the error), none throws.
    let gathered: Promise<unknown> | undefined;
    expect(() => {
      gathered = pool.gather(add(1, 2), add(3, 4));
    }).not.toThrow();
    await expect(gathered).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
  }, 60_000);

  it("tears down after an exception in withCompute", async () => {
    let pids: number[] = [];
    await expect(
      sky.withCompute({ nodes: 1, image, options: { console: false } }, async (pool) => {
        pids = (await pool.broadcast(info())).map((entry) => entry.pid);
        throw new Error("user code failed");
      }),
    ).rejects.toThrow("user code failed");
    expect(pids).toHaveLength(1);
    for (const workerPid of pids) expect(() => process.kill(workerPid, 0)).toThrow(/ESRCH/);
  }, 60_000);

  it("refuses bad input before starting anything", async () => {
    await expect(sky.compute({ nodes: 0 })).rejects.toSatisfy((error) =>
      sky.ConfigurationError.isInstance(error),
    );
  });

  it("explains when no offer matches", async () => {
    await expect(
      sky.compute({ accelerator: sky.accelerators.H100(), options: { console: false } }),
    ).rejects.toSatisfy(
      (error) =>
        sky.NoOffersError.isInstance(error) && /local: no offer for 1x H100/.test((error as Error).message),
    );
  });
});
