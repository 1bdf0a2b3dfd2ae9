/**
 * Plugin worker modules and nested dispatch, end to end on the Local provider.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { extendImage, Plugin } from "../src/contract.js";
import * as sky from "../src/index.js";

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const image = { includes: [fixture("plugin_tasks.py")] };
const trace = sky.python<[], string[]>("plugin_tasks:trace");
const fanOut = sky.python<[number], { capacity: number; results: [number, number][] }>(
  "plugin_tasks:fan_out",
);

const recording = (name: string, module: string) =>
  Plugin.create(name).withWorker({
    module,
    path: fixture(`plugins/${module}.py`),
    config: { tag: name },
  });

describe("plugin worker modules", () => {
  it("are shipped and imported; around_app runs once per worker before decorate, first plugin outermost", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image,
      plugins: [recording("a", "order_plugin_a"), recording("b", "order_plugin_b")],
      options: { console: false },
    });
    const traces = await pool.broadcast(trace());
    expect(traces).toEqual([
      ["a>", "b>", "a@0;b@0;", "<b", "<a"],
      ["a>", "b>", "a@1;b@1;", "<b", "<a"],
    ]);
    // Once per worker: a second task sees the same single entry per plugin.
    expect(await pool.run(trace(), { target: 0 })).toEqual(["a>", "b>", "a@0;b@0;", "<b", "<a"]);
  });

  it("fail tasks with an error naming the plugin and its hook", async () => {
    await using pool = await sky.compute({
      nodes: 1,
      image,
      plugins: [
        Plugin.create("fragile").withWorker({
          module: "failing_plugin",
          path: fixture("plugins/failing_plugin.py"),
          config: {},
        }),
      ],
      options: { console: false },
    });
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const error = await pool.run(trace()).catch((caught: unknown) => caught);
      expect(sky.RemoteTaskError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(
        /plugin "fragile" around_app failed: RuntimeError: cannot initialise the framework/,
      );
    }
  });

  it("that cannot be imported stop the pool from starting, with the plugin named", async () => {
    await expect(
      sky.compute({
        nodes: 1,
        image,
        plugins: [Plugin.create("missing").withWorker({ module: "no_such_plugin_module", config: {} })],
        options: { console: false },
      }),
    ).rejects.toSatisfy(
      (error) => sky.BootstrapError.isInstance(error) && /plugin "missing"/.test((error as Error).message),
    );
  });
});

describe("plugin bootstrap ops on the Local provider", () => {
  const readText = sky.python<[string], string>("plugin_tasks:read_text");

  it("run once before the workers start, in their working directory, with SKYWARD_ROOT and the image's env", async () => {
    const writer = Plugin.create("writer").withBootstrap(() => [
      'printf "%s\\n" "$SKY_OP_VALUE" >> from-op.txt',
      'printf "%s\\n" "$SKYWARD_ROOT" > root.txt && stat -c %a "$SKYWARD_ROOT/env.sh" > env-mode.txt',
    ]);
    await using pool = await sky.compute({
      nodes: 2,
      image: { ...image, env: { SKY_OP_VALUE: "written by a bootstrap op" } },
      plugins: [writer],
      options: { console: false },
    });
    // Once for the machine, not once per node: the file has one line.
    expect(await pool.broadcast(readText("from-op.txt"))).toEqual([
      "written by a bootstrap op\n",
      "written by a bootstrap op\n",
    ]);
    const root = (await pool.run(readText("root.txt"))).trim();
    expect(root).toMatch(/\/skyward-pool-[^/]+$/);
    expect(await pool.run(readText(`${root}/bootstrap.log`))).toContain('plugin "writer" op 2 of 2');
    expect(await pool.run(readText("env-mode.txt"))).toBe("600\n");
  });

  it("that fail stop the pool from starting, naming the plugin, with the op's output and no secret", async () => {
    const events: string[] = [];
    const secret = "hunter2-in-the-op-text";
    const failing = Plugin.create("breaks").withBootstrap(() => [
      `true ${secret}`,
      `: ${secret}; echo "the op could not find its tool" >&2; exit 7`,
    ]);
    const error = await sky
      .compute(
        {
          nodes: 1,
          image: { ...image, env: { SKY_SECRET_VALUE: "hunter3-in-the-env" } },
          plugins: [failing],
          options: { console: false },
        },
        { onEvent: (event) => events.push(JSON.stringify(event)) },
      )
      .catch((caught: unknown) => caught);
    expect(sky.BootstrapError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/plugin "breaks": bootstrap op 2 of 2 failed \(exit 7\)/);
    expect(message).toContain("the op could not find its tool");
    expect((error as sky.BootstrapError).phase).toBe("plugins");
    for (const text of [message, ...events]) {
      expect(text).not.toContain("hunter2");
      expect(text).not.toContain("hunter3");
    }
    expect(events.some((event) => event.includes('"phase":"plugins"'))).toBe(true);
  });
});

describe("workers per node", () => {
  it("follow a plugin that asks for several (MIG: one per GPU instance)", async () => {
    const partitioned = Object.create(Plugin.create("partitions"), {
      workersPerNode: { value: () => 2, enumerable: true },
    }) as Plugin;
    await using pool = await sky.compute({
      nodes: 1,
      image,
      plugins: [partitioned],
      options: { console: false },
    });
    const workerSlot = sky.python<[number], [number, number, number]>("plugin_tasks:worker_slot");
    // Two at once: the node has a slot per worker, and each reports its own worker index.
    const slots = await pool.gather(workerSlot(0.5), workerSlot(0.5));
    expect(slots.map(([worker]) => worker).sort()).toEqual([0, 1]);
    expect(slots.every(([, perNode, total]) => perNode === 2 && total === 2)).toBe(true);
  });
});

describe("workers per node, typed", () => {
  const workerSlot = sky.python<[number], [number, number, number]>("plugin_tasks:worker_slot");

  it("follow the plugin that sets them with withWorkersPerNode, the hook given the cluster", async () => {
    const seen: string[] = [];
    const partitioned = Plugin.create("partitions").withWorkersPerNode(({ cluster }) => {
      seen.push(cluster.provider);
      return 3;
    });
    await using pool = await sky.compute({
      nodes: 1,
      image,
      plugins: [partitioned],
      options: { console: false },
    });
    const slots = await pool.gather(workerSlot(0.5), workerSlot(0.5), workerSlot(0.5));
    expect(slots.map(([worker]) => worker).sort()).toEqual([0, 1, 2]);
    expect(slots.every(([, perNode, total]) => perNode === 3 && total === 3)).toBe(true);
    expect(seen).toEqual(["local"]);
  });

  it("are refused from two plugins, naming both, before any provider is called", async () => {
    let prepared = false;
    const local = sky.Local();
    const watched = {
      ...local,
      prepare: (...args: Parameters<typeof local.prepare>) => {
        prepared = true;
        return local.prepare(...args);
      },
    };
    const error = await sky
      .compute({
        provider: watched,
        image,
        plugins: [
          Plugin.create("mig").withWorkersPerNode(() => 2),
          Plugin.create("slicer").withWorkersPerNode(() => 4),
        ],
        options: { console: false },
      })
      .catch((caught: unknown) => caught);
    expect(sky.ConfigurationError.isInstance(error)).toBe(true);
    expect((error as sky.ConfigurationError).issues).toEqual([
      {
        path: "plugins[1]",
        message:
          'plugins "mig" and "slicer" both set workersPerNode; at most one plugin of a pool may decide how many workers a node runs',
      },
    ]);
    expect(prepared).toBe(false);
  });
});

describe("nested dispatch", () => {
  it("runs a task's subtasks across every node, without starving them at concurrency 1", async () => {
    await using pool = await sky.compute({ nodes: 2, image, options: { console: false } });
    const { capacity, results } = await pool.run(fanOut(20));
    expect(capacity).toBe(2);
    expect(results.map(([i]) => i)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(new Set(results.map(([, node]) => node))).toEqual(new Set([0, 1]));
  });
});

describe("a plugin's bootstrapTimeout (extendImage in an image transform)", () => {
  // A plugin that gives the bootstrap `seconds`, and a bootstrap op that takes 4 s.
  const impatient = (seconds: number) =>
    Plugin.create("impatient")
      .withImageTransform(({ image }) => extendImage(image, { bootstrapTimeout: seconds }))
      .withBootstrap(() => ["sleep 4"]);

  it("is the deadline the bootstrap runs under: a slow bootstrap fails within it", async () => {
    const error = await sky
      .compute({ nodes: 1, image, plugins: [impatient(1)], options: { console: false } })
      .catch((caught: unknown) => caught);
    expect(sky.BootstrapError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/did not finish within 1 s/);
  });

  it("is the pool's bootstrapTimeout, unless options.bootstrapTimeout is given, which wins", async () => {
    {
      const raising = Plugin.create("patient").withImageTransform(({ image }) =>
        extendImage(image, { bootstrapTimeout: 45 }),
      );
      // What providers read at provision (AWS's, GCP's boot watchdogs): the cluster's spec.
      const local = sky.Local();
      const provisioned: number[] = [];
      const recording = Object.assign(Object.create(local), {
        provision: (request: Parameters<typeof local.provision>[0]) => {
          provisioned.push(request.cluster.spec.bootstrapTimeout);
          return local.provision(request);
        },
      }) as typeof local;
      await using pool = await sky.compute({
        provider: recording,
        nodes: 1,
        image,
        plugins: [raising],
        options: { console: false },
      });
      expect(pool.spec.bootstrapTimeout).toBe(45);
      expect(provisioned).toEqual([45]);
    }
    // Explicit: the 1 s of the plugin is overridden, so the 4 s op finishes.
    await using pool = await sky.compute({
      nodes: 1,
      image,
      plugins: [impatient(1)],
      options: { console: false, bootstrapTimeout: 60 },
    });
    expect(pool.spec.bootstrapTimeout).toBe(60);
    expect(await pool.run(trace())).toEqual(expect.any(Array));
  });
});
