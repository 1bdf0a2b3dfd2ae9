/**
 * Elastic pools end to end on the Local provider (real worker processes): partial readiness,
 * autoscaling up on queued tasks and down on idleness, `resize`, scale to zero and back — and every
 * node let go of is a process that is really gone.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/elastic_tasks.py", import.meta.url));
const image = { includes: [tasks] };

type Where = { node: number; pid: number };
const nap = sky.python<[number], Where>("elastic_tasks:nap");
const where = sky.python<[], Where>("elastic_tasks:where");

/** Resolves when `predicate` holds, polling; fails the test after `ms`. */
async function until(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const fast = {
  console: false,
  reconcileTickInterval: 0.2,
  autoscaleCooldown: 0.5,
  autoscaleIdleTimeout: 1.5,
} as const;

describe("an elastic [1, 3] local pool", () => {
  it("grows to 3 under a queue of one-second tasks and, idle, shrinks back to 1", async () => {
    const scaling: sky.ScalingEvent[] = [];
    const destroyed: number[] = [];
    const errors: string[] = [];
    const lost: number[] = [];
    let most = 0;
    await using pool = await sky.compute(
      { nodes: [1, 3], image, options: fast },
      {
        onEvent: (event) => {
          if (event.type === "scaling") scaling.push(event);
          if (event.type === "node.destroyed") destroyed.push(event.node);
          if (event.type === "error") errors.push(event.message);
          // A node let go of on purpose is not lost (no retries, no replacement).
          if (event.type === "node.lost" || event.type === "node.replaced") lost.push(event.node);
        },
      },
    );
    pool.on("node.ready", () => {
      most = Math.max(most, pool.currentNodes());
    });
    expect(pool.currentNodes()).toBe(1);
    const results = await pool.map(
      nap,
      Array.from({ length: 12 }, () => [1] as [number]),
    );
    expect(most).toBe(3);
    expect(new Set(results.map((result) => result.node))).toEqual(new Set([0, 1, 2]));
    expect(scaling[0]).toMatchObject({ from: 1, to: 3, reason: expect.stringMatching(/queued/) });
    const pids = new Set(results.map((result) => result.pid));
    expect(pids.size).toBe(3);

    await until(() => pool.currentNodes() === 1 && destroyed.length === 2, 20_000, "the idle nodes to go");
    expect(scaling.at(-1)).toMatchObject({ to: 1, reason: expect.stringMatching(/idle/) });
    expect(destroyed.sort()).toEqual([1, 2]);
    expect(pool.nodes().map((node) => node.index)).toEqual([0]);
    const head = results.find((result) => result.node === 0) as Where;
    for (const pid of pids) expect(alive(pid)).toBe(pid === head.pid);
    // The survivor still runs tasks, and letting nodes go was no error.
    expect((await pool.run(where())).node).toBe(0);
    expect(errors).toEqual([]);
    expect(lost).toEqual([]);
    await pool.close();
    expect(alive(head.pid)).toBe(false);
  });
});

describe("closing an elastic pool while it grows", () => {
  it("terminates every instance it provisioned, the ones still starting included", async () => {
    const provisioned = new Set<string>();
    const destroyed = new Set<string>();
    const pool = await sky.compute(
      { nodes: [1, 4], image, options: { ...fast, autoscaleCooldown: 0 } },
      {
        onEvent: (event) => {
          if (event.type === "node.provisioned") provisioned.add(event.instanceId);
          if (event.type === "node.destroyed") destroyed.add(event.instanceId);
        },
      },
    );
    const running = pool.map(
      nap,
      Array.from({ length: 8 }, () => [5] as [number]),
    );
    running.catch(() => undefined);
    await until(() => provisioned.size === 4, 20_000, "the pool to start growing");
    await pool.close();
    await expect(running).rejects.toThrow(/cancelled|shutting down/);
    expect(destroyed).toEqual(provisioned);
  });
});

describe("broadcast on an elastic pool", () => {
  /** The real Local provider, whose worker launches for node 1 wait for `gate`, and the first `failures` fail. */
  function slowNodeOne(gate: Promise<void>, failures: number): sky.ProviderV1<sky.LocalCluster> {
    const local = sky.Local();
    let failed = 0;
    return {
      ...local,
      async launchWorker(options) {
        if (options.nodeId === 1) {
          await gate;
          if (failed < failures) {
            failed += 1;
            throw new Error("node 1 cannot start yet (test)");
          }
        }
        return local.launchWorker(options);
      },
    };
  }

  it("covers a node still starting: its part waits for it, and every node answers once", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    await using pool = await sky.compute({
      provider: slowNodeOne(gate, 0),
      nodes: sky.nodes({ desired: 2, min: 1 }),
      image,
      options: fast,
    });
    // Ready at min: node 1 is still starting.
    expect(pool.currentNodes()).toBe(1);
    expect(pool.nodes().map((node) => [node.index, node.ready])).toEqual([
      [0, true],
      [1, false],
    ]);
    expect(pool.workerCount()).toBe(2);
    let done = false;
    const everyNode = pool.broadcast(where()).finally(() => {
      done = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(done).toBe(false);
    open();
    const results = await everyNode;
    expect(results.map((result) => result.node)).toEqual([0, 1]);
    expect(results.places.map((place) => place.rank)).toEqual([0, 1]);
    expect(pool.currentNodes()).toBe(2);
  });

  it("waits through a failed start for the node the reconcile loop starts in its place", async () => {
    const errors: string[] = [];
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    await using pool = await sky.compute(
      {
        provider: slowNodeOne(gate, 1),
        nodes: sky.nodes({ desired: 2, min: 1 }),
        image,
        options: fast,
      },
      { onEvent: (event) => event.type === "error" && errors.push(event.message) },
    );
    expect(pool.nodes().map((node) => node.index)).toEqual([0, 1]);
    const everyNode = pool.broadcast(where());
    open(); // node 1's first start fails now; the reconcile loop starts another under index 1
    const results = await everyNode;
    expect(errors.some((message) => /node 1 failed to start/.test(message))).toBe(true);
    expect(results.map((result) => result.node)).toEqual([0, 1]);
    expect(pool.currentNodes()).toBe(2);
    expect((await pool.broadcast(where())).map((result) => result.node)).toEqual([0, 1]);
  });
});

describe("a lost node of an elastic pool whose replacement fails", () => {
  it("is let go of, and the reconcile loop starts another under its index", async () => {
    const local = sky.Local();
    let provisions = 0;
    // The real Local provider; its second provisioning (the replacement) finds no capacity.
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        if (provisions === 2)
          throw new sky.ProvisionError({ provider: "local", message: "no capacity left (test)" });
        return local.provision(options);
      },
    };
    const errors: string[] = [];
    await using pool = await sky.compute(
      {
        provider,
        nodes: sky.nodes({ desired: 2, min: 1, max: 2 }),
        image,
        options: { ...fast, autoscaleIdleTimeout: 600, maxProvisionAttempts: 1 },
      },
      { onEvent: (event) => event.type === "error" && errors.push(event.message) },
    );
    await until(() => pool.currentNodes() === 2, 20_000, "both nodes");
    const before = await pool.broadcast(where());
    process.kill(before[1]?.pid ?? 0, "SIGKILL");
    await until(
      () => errors.some((message) => /could not replace node 1/.test(message)),
      20_000,
      "the replacement to fail",
    );
    // Issued while node 1 is gone: its part waits for the node started in its place.
    const after = await pool.broadcast(where());
    expect(after.map((result) => result.node)).toEqual([0, 1]);
    expect(after[0]?.pid).toBe(before[0]?.pid);
    expect(after[1]?.pid).not.toBe(before[1]?.pid);
    expect(provisions).toBeGreaterThanOrEqual(3);
    expect(pool.currentNodes()).toBe(2);
  });
});

describe("pool.resize", () => {
  it("grows a fixed pool and shrinks it again, terminating the nodes it lets go", async () => {
    const scaling: sky.ScalingEvent[] = [];
    await using pool = await sky.compute({ nodes: 1, image, options: fast });
    pool.on("scaling", (event) => scaling.push(event));
    await pool.resize(3);
    expect(pool.currentNodes()).toBe(3);
    expect(pool.nodes().map((node) => node.index)).toEqual([0, 1, 2]);
    const spread = await Promise.all([0, 1, 2].map((node) => pool.run(where(), { target: node })));
    expect(spread.map((entry) => entry.node)).toEqual([0, 1, 2]);
    // A fixed pool stays fixed at its new size: idle for longer than the idle timeout, nothing goes.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(pool.currentNodes()).toBe(3);

    await pool.resize(1);
    expect(pool.currentNodes()).toBe(1);
    expect(pool.nodes().map((node) => node.index)).toEqual([0]);
    expect(alive(spread[0]?.pid as number)).toBe(true);
    expect(alive(spread[1]?.pid as number)).toBe(false);
    expect(alive(spread[2]?.pid as number)).toBe(false);
    expect(scaling.map((event) => [event.from, event.to, event.reason])).toEqual([
      [1, 3, "resize()"],
      [3, 1, "resize()"],
    ]);
  });

  it("reaches an explicit target before the idle rule counts, on a pool idle for a while", async () => {
    const scaling: sky.ScalingEvent[] = [];
    await using pool = await sky.compute(
      { nodes: [1, 3], image, options: { ...fast, autoscaleIdleTimeout: 1 } },
      { onEvent: (event) => event.type === "scaling" && scaling.push(event) },
    );
    // Idle for three idle timeouts: the node that is there counts as long idle.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await pool.resize(3);
    expect(pool.currentNodes()).toBe(3);
    expect(pool.nodes().filter((node) => node.ready)).toHaveLength(3);
    expect(scaling.map((event) => [event.from, event.to, event.reason])).toEqual([[1, 3, "resize()"]]);
    // Then idleness counts again, from when the target was reached: back to 1, not at once.
    await until(() => pool.currentNodes() === 1, 20_000, "the pool to shrink back to 1");
    expect(scaling.slice(1).every((event) => /idle for 1 s/.test(event.reason))).toBe(true);
  });

  it("refuses a size outside an elastic pool's bounds, and a fixed pool of zero", async () => {
    await using elastic = await sky.compute({ nodes: [1, 2], image, options: fast });
    await expect(elastic.resize(3)).rejects.toThrow(/nodes: expected a node count from 1 to 2/);
    await expect(elastic.resize({ desired: 3, min: 4 })).rejects.toThrow(/nodes\.min: must be <= desired/);
    expect(elastic.currentNodes()).toBe(1);
    await using fixed = await sky.compute({ nodes: 1, image, options: fast });
    await expect(fixed.resize(0)).rejects.toThrow(/nodes: expected a node count as a whole number >= 1/);
    // A count given as a string (read from a command line, say): the field and what it takes, named.
    await expect(fixed.resize("2" as unknown as number)).rejects.toThrow(
      'nodes: expected a node count (a whole number) or sky.nodes({ desired, min, max }), received "2"',
    );
    // Aborting stops the waiting, not the resize: the pool still gets to its new size.
    const controller = new AbortController();
    const waiting = fixed.resize(2, { signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toThrow(/resize was aborted/);
    await until(() => fixed.currentNodes() === 2, 20_000, "the second node");
  });
});

describe("min: 0", () => {
  it("scales an idle pool to zero and a new task starts a node again", async () => {
    const scaling: sky.ScalingEvent[] = [];
    await using pool = await sky.compute(
      { nodes: sky.nodes({ desired: 1, min: 0, max: 2 }), image, options: fast },
      { onEvent: (event) => event.type === "scaling" && scaling.push(event) },
    );
    expect(pool.currentNodes()).toBe(1);
    const first = await pool.run(where());
    await until(() => pool.nodes().length === 0, 20_000, "the pool to scale to zero");
    expect(pool.currentNodes()).toBe(0);
    await until(() => !alive(first.pid), 10_000, "the last worker to exit");
    expect(scaling.at(-1)).toMatchObject({ from: 1, to: 0 });

    const again = await pool.run(where());
    expect(again.pid).not.toBe(first.pid);
    expect(alive(again.pid)).toBe(true);
    expect(pool.currentNodes()).toBe(1);
    expect(scaling.at(-1)).toMatchObject({ from: 0, to: 1, reason: expect.stringMatching(/no node is up/) });
    await pool.close();
    expect(alive(again.pid)).toBe(false);
  });
  it("keeps the head while another node is busy, and lets it go last", async () => {
    const destroyed: number[] = [];
    await using pool = await sky.compute(
      {
        nodes: sky.nodes({ desired: 2, min: 0, max: 2 }),
        image,
        options: { ...fast, autoscaleIdleTimeout: 0.5 },
      },
      { onEvent: (event) => event.type === "node.destroyed" && destroyed.push(event.node) },
    );
    // Ready at one node (min 0 still waits for one); node 1 joins right after.
    await until(() => pool.currentNodes() === 2, 20_000, "node 1 to join");
    const busy = pool.run(nap(3), { target: 1 });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // The head has been idle for four idle timeouts, but node 1 is still working: the head stays.
    expect(pool.nodes().map((node) => node.index)).toEqual([0, 1]);
    expect(destroyed).toEqual([]);
    expect((await busy).node).toBe(1);
    await until(() => destroyed.length === 2, 20_000, "the pool to scale to zero");
    expect(destroyed).toEqual([1, 0]);
    expect(pool.nodes()).toEqual([]);
  });
});

describe('the default schedule (worker.buffer "auto")', () => {
  // One long task among short ones of the same function, on 2 nodes: the node running the long one
  // should not sit on a pile of prefetched work while the other node idles.
  const durations: [number][] = [[2], ...Array.from({ length: 10 }, () => [0.1] as [number])];

  it("holds long tasks back: the node busy with a long one takes at most one more", async () => {
    await using pool = await sky.compute({ nodes: 2, image, options: { console: false } });
    // Many short calls of another function first: their deep prefetch must not carry over.
    await pool.map(
      where,
      Array.from({ length: 400 }, () => [] as []),
    );
    const results = await pool.map(nap, durations);
    const busy = results[0]?.node as number;
    const onBusy = results.filter((result) => result.node === busy).length;
    expect(onBusy).toBeLessThanOrEqual(2);
    expect(results.length - onBusy).toBeGreaterThanOrEqual(9);
  });

  it("where a fixed buffer piles tasks onto the busy node (what the default avoids)", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image,
      options: { console: false, worker: { buffer: 64 } },
    });
    const results = await pool.map(nap, durations);
    const busy = results[0]?.node as number;
    expect(results.filter((result) => result.node === busy).length).toBe(6);
  });
});
