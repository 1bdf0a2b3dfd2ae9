import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigurationError, type ConfigurationIssue, SkywardError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import type { Image } from "../spec/image.js";
import type { PoolSpec } from "../spec/spec.js";
import { LaunchCommand, type LaunchContext } from "./launch-command.js";
import {
  acceleratorsPerNode,
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  enterAroundClient,
  isPlugin,
  isWorkersPerAccelerator,
  normalizePlugin,
  Plugin,
  PluginError,
  type PluginV1,
  type PoolHandle,
  pluginSchema,
  resolveWorkerLayout,
  resolveWorkersPerNode,
  whyNotPlugin,
  workerModules,
  workersPerAccelerator,
} from "./plugin.js";
import type { Cluster, Offer } from "./provider.js";

const cluster: Cluster = {
  id: "cluster-1",
  provider: "fake",
  poolId: "pool-1",
  region: "local",
  spec: {} as PoolSpec,
  offer: {} as Offer,
  ssh: null,
  specific: { zone: "z1" },
};

const pool: PoolHandle = { id: "pool-1", spec: {} as PoolSpec, currentNodes: () => 2 };

const context: LaunchContext = {
  nodeId: 1,
  numNodes: 4,
  headAddr: "10.0.0.1",
  headPort: 29500,
  privateIp: "10.0.0.2",
  pythonBin: "/opt/venv/bin/python",
  venvDir: "/opt/venv",
  concurrency: 1,
  executor: "thread",
  workersPerNode: 1,
};

/** A stand-in image: the helpers only pass images along, so only `pip` matters here. */
const baseImage = Object.freeze({ pip: Object.freeze(["numpy"]) }) as unknown as Image;
const pipOf = (image: Image) => image.pip;
const withPip = (image: Image, pkg: string) => ({ ...image, pip: [...image.pip, pkg] }) as Image;

function issuesOf(run: () => unknown): readonly ConfigurationIssue[] {
  try {
    run();
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues;
  }
  throw new Error("expected a ConfigurationError");
}

async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

describe("Plugin.create", () => {
  it("accepts lower-case names made of [a-z0-9._-]", () => {
    for (const name of ["torch", "my-plugin", "a.b_c-1", "0x", "h100"]) {
      expect(Plugin.create(name).name).toBe(name);
    }
  });

  it("rejects other names with a ConfigurationError on `name`", () => {
    for (const name of ["", "Torch", "-x", "_x", ".x", "a b", "ü", "a/b"]) {
      const [issue] = issuesOf(() => Plugin.create(name));
      expect(issue?.path).toBe("name");
      expect(issue?.message).toContain("[a-z0-9][a-z0-9._-]*");
      expect(issue?.message).toContain(JSON.stringify(name));
    }
    expect(issuesOf(() => Plugin.create(3 as unknown as string))[0]?.message).toContain("number 3");
  });

  it("starts with no hooks", () => {
    const plugin = Plugin.create("empty");
    expect([plugin.transform, plugin.bootstrap, plugin.launcher, plugin.aroundClient, plugin.worker]).toEqual(
      [undefined, undefined, undefined, undefined, undefined],
    );
  });
});

describe("Plugin builder", () => {
  it("returns a new frozen plugin from every with* and leaves the original unchanged", () => {
    const transform = ({ image }: { image: Image }) => image;
    const bootstrap = () => ["echo hi"];
    const launcher = ({ command }: { command: LaunchCommand }) => command;
    const around = () => undefined;

    const empty = Plugin.create("p");
    const a = empty.withImageTransform(transform);
    const b = a.withBootstrap(bootstrap);
    const c = b.withLauncher(launcher);
    const d = c.withAroundClient(around);
    const e = d.withWorker({ module: "skyward_p" });

    for (const plugin of [empty, a, b, c, d, e]) expect(Object.isFrozen(plugin)).toBe(true);
    expect(new Set([empty, a, b, c, d, e]).size).toBe(6);
    expect(empty.transform).toBeUndefined();
    expect(a.transform).toBe(transform);
    expect(a.bootstrap).toBeUndefined();
    expect(b.bootstrap).toBe(bootstrap);
    expect(b.launcher).toBeUndefined();
    expect(c.launcher).toBe(launcher);
    expect(c.aroundClient).toBeUndefined();
    expect(d.aroundClient).toBe(around);
    expect(d.worker).toBeUndefined();
    expect(e.worker?.module).toBe("skyward_p");
    expect([e.name, e.transform, e.bootstrap, e.launcher, e.aroundClient]).toEqual([
      "p",
      transform,
      bootstrap,
      launcher,
      around,
    ]);
    expect(() => {
      (e as { name: string }).name = "q";
    }).toThrow(TypeError);
  });

  it("replaces a hook of the same kind", () => {
    const first = () => ["first"];
    const second = () => ["second"];
    const plugin = Plugin.create("p").withBootstrap(first).withBootstrap(second);
    expect(collectBootstrapOps([plugin], cluster)).toEqual(["second"]);
  });

  it("rejects hooks that are not functions, naming the hook", () => {
    const plugin = Plugin.create("p");
    const notAFunction = "nope" as unknown as () => never;
    expect(issuesOf(() => plugin.withImageTransform(notAFunction))[0]?.path).toBe("transform");
    expect(issuesOf(() => plugin.withBootstrap(notAFunction))[0]?.path).toBe("bootstrap");
    expect(issuesOf(() => plugin.withLauncher(notAFunction))[0]).toEqual({
      path: "launcher",
      message: 'expected a function, received the string "nope"',
    });
    expect(issuesOf(() => plugin.withAroundClient(notAFunction))[0]?.path).toBe("aroundClient");
  });
});

describe("Plugin.withWorker", () => {
  it("keeps the module, resolves the path and deep-freezes a copy of the config", () => {
    const config = { backend: "nccl", ports: [29500, 29501], nested: { on: true, off: null } };
    const plugin = Plugin.create("torch").withWorker({
      module: "skyward_torch",
      path: new URL("file:///opt/plugin-torch/python/skyward_torch"),
      config,
    });
    config.nested.on = false;
    config.ports.push(1);
    expect(plugin.worker).toEqual({
      module: "skyward_torch",
      path: "/opt/plugin-torch/python/skyward_torch",
      config: { backend: "nccl", ports: [29500, 29501], nested: { on: true, off: null } },
    });
    expect(Object.isFrozen(plugin.worker)).toBe(true);
    expect(Object.isFrozen(plugin.worker?.config.nested)).toBe(true);
    expect(Object.isFrozen(plugin.worker?.config.ports)).toBe(true);
  });

  it("accepts absolute paths, file: URL strings, .py files, dotted modules and no path", () => {
    expect(Plugin.create("a").withWorker({ module: "hooks", path: "/x/hooks.py" }).worker?.path).toBe(
      "/x/hooks.py",
    );
    expect(
      Plugin.create("a").withWorker({ module: "pkg.sub.hooks", path: "file:///x/pkg" }).worker?.path,
    ).toBe("/x/pkg");
    expect(Plugin.create("a").withWorker({ module: "installed_elsewhere" }).worker).toEqual({
      module: "installed_elsewhere",
      path: undefined,
      config: {},
    });
  });

  it("reports every problem with its path", () => {
    const issues = issuesOf(() =>
      Plugin.create("bad").withWorker({
        module: "not-a-module",
        path: "relative/dir",
        config: {
          ok: 1,
          nan: Number.NaN,
          fn: (() => 1) as unknown as string,
          when: new Date(0) as unknown as string,
          list: [1, undefined as unknown as string],
          "odd key": Number.POSITIVE_INFINITY,
        },
        extra: true,
      } as never),
    );
    expect(issues.map((issue) => issue.path)).toEqual([
      "worker.extra",
      "worker.module",
      "worker.path",
      "worker.config.nan",
      "worker.config.fn",
      "worker.config.when",
      "worker.config.list[1]",
      'worker.config["odd key"]',
    ]);
    expect(issues.find((issue) => issue.path === "worker.config.fn")?.message).toBe(
      "expected a JSON value (string, finite number, boolean, null, array or plain object), received a function",
    );
    expect(issues.find((issue) => issue.path === "worker.config.when")?.message).toContain("received a Date");
    expect(issues.find((issue) => issue.path === "worker.module")?.message).toContain('"not-a-module"');
  });

  it("rejects a path not named after the module, a non-file URL, cycles and non-object configs", () => {
    expect(
      issuesOf(() => Plugin.create("a").withWorker({ module: "pkg.hooks", path: "/x/other" }))[0],
    ).toEqual({
      path: "worker.path",
      message:
        'expected the package directory or file of module "pkg" (named "pkg" or "pkg.py"), received "/x/other"',
    });
    expect(
      issuesOf(() =>
        Plugin.create("a").withWorker({ module: "m", path: new URL("https://example.com/m") }),
      )[0]?.path,
    ).toBe("worker.path");
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(
      issuesOf(() => Plugin.create("a").withWorker({ module: "m", config: cyclic as never }))[0],
    ).toEqual({
      path: "worker.config.self",
      message: "expected a JSON value, received a circular reference",
    });
    expect(issuesOf(() => Plugin.create("a").withWorker({ module: "m", config: [] as never }))[0]?.path).toBe(
      "worker.config",
    );
    // The same object twice is not a cycle.
    const shared = { x: 1 };
    expect(
      Plugin.create("a").withWorker({ module: "m", config: { one: shared, two: shared } }).worker?.config,
    ).toEqual({
      one: { x: 1 },
      two: { x: 1 },
    });
  });
});

describe("isPlugin and pluginSchema", () => {
  it("recognises plugins only", () => {
    expect(isPlugin(Plugin.create("p"))).toBe(true);
    expect(isPlugin({ name: "p" })).toBe(false);
    expect(isPlugin(null)).toBe(false);
    expect(isPlugin("torch")).toBe(false);
  });

  it("recognises a plain PluginV1 object by its shape, and says why something else is not one", () => {
    expect(isPlugin({ specificationVersion: "v1", name: "elsewhere" })).toBe(true);
    expect(
      isPlugin({
        specificationVersion: "v1",
        name: "hooks",
        transform: ({ image }: { image: Image }) => image,
      }),
    ).toBe(true);
    expect(whyNotPlugin({ name: "old" })).toBe('plugin "old" has no specificationVersion');
    expect(whyNotPlugin({ specificationVersion: "v2", name: "next" })).toBe(
      'plugin "next" implements specification version "v2", but this version of @skyward/core supports "v1"',
    );
    expect(whyNotPlugin({ specificationVersion: "v1", name: "Bad Name" })).toBe(
      'plugin "Bad Name" has no name matching [a-z0-9][a-z0-9._-]* (received the string "Bad Name")',
    );
    expect(whyNotPlugin({ specificationVersion: "v1", name: "p", launcher: "accelerate" })).toBe(
      'plugin "p" has a launcher hook that is not a function',
    );
  });

  it("normalises a plain object's worker side once, and refuses a bad one naming the field", () => {
    const plain: PluginV1 = {
      specificationVersion: "v1",
      name: "plain",
      worker: { module: "skyward_plain", path: new URL("file:///opt/plugins/skyward_plain.py") },
    };
    const normalised = normalizePlugin(plain);
    expect(normalised.worker).toEqual({
      module: "skyward_plain",
      path: "/opt/plugins/skyward_plain.py",
      config: {},
    });
    expect(normalizePlugin(plain)).toBe(normalised);
    expect(workerModules([plain])).toEqual([
      { plugin: "plain", module: "skyward_plain", path: "/opt/plugins/skyward_plain.py", config: {} },
    ]);
    const schema = z.strictObject({ plugins: z.array(pluginSchema) });
    const issues = issuesOf(() =>
      parseInput(schema, {
        plugins: [{ specificationVersion: "v1", name: "bad", worker: { module: "not a module" } }],
      }),
    );
    expect(issues[0]?.path).toBe("plugins[0].worker.module");
  });

  it("names the field and what was expected", () => {
    const schema = z.strictObject({ plugins: z.array(pluginSchema) });
    const plugin = Plugin.create("p");
    expect(parseInput(schema, { plugins: [plugin] }).plugins[0]).toBe(plugin);
    const factory = () => plugin;
    const issues = issuesOf(() => parseInput(schema, { plugins: [plugin, "torch", factory] }));
    expect(issues).toEqual([
      {
        path: "plugins[1]",
        message:
          'expected a plugin (e.g. torch({ backend: "nccl" }), Plugin.create(name) or a PluginV1 object), received the string "torch"',
      },
      {
        path: "plugins[2]",
        message:
          'expected a plugin (e.g. torch({ backend: "nccl" }), Plugin.create(name) or a PluginV1 object), received a function (a plugin factory must be called: torch(), not torch)',
      },
    ]);
  });
});

describe("applyImageTransforms", () => {
  it("chains transforms in plugin order, awaiting async ones, skipping plugins without one", async () => {
    const seen: unknown[] = [];
    const plugins = [
      Plugin.create("one").withImageTransform(({ image, cluster: given }) => {
        seen.push(given);
        return withPip(image, "one");
      }),
      Plugin.create("none"),
      Plugin.create("two").withImageTransform(async ({ image }) => withPip(image, "two")),
      Plugin.create("three").withImageTransform(({ image }) =>
        withPip(image, `three-after-${image.pip.at(-1)}`),
      ),
    ];
    const result = await applyImageTransforms(plugins, baseImage, cluster);
    expect(pipOf(result)).toEqual(["numpy", "one", "two", "three-after-two"]);
    expect(pipOf(baseImage)).toEqual(["numpy"]);
    expect(seen).toEqual([cluster]);
    expect(await applyImageTransforms([], baseImage, cluster)).toBe(baseImage);
  });

  it("rethrows a failure as a PluginError naming the plugin and hook, with the cause", async () => {
    const cause = new Error("no CUDA wheel for cu999");
    const plugins = [
      Plugin.create("fine").withImageTransform(({ image }) => image),
      Plugin.create("broken").withImageTransform(async () => {
        throw cause;
      }),
    ];
    const error = await rejection(applyImageTransforms(plugins, baseImage, cluster));
    expect(PluginError.isInstance(error)).toBe(true);
    expect(SkywardError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ plugin: "broken", hook: "transform", cause });
    expect((error as Error).message).toBe('plugin "broken": transform hook failed: no CUDA wheel for cu999');
  });

  it("rejects a transform that returns no image", async () => {
    const plugins = [
      Plugin.create("forgetful").withImageTransform((() => undefined) as unknown as () => Image),
    ];
    const error = await rejection(applyImageTransforms(plugins, baseImage, cluster));
    expect((error as Error).message).toBe(
      'plugin "forgetful": transform hook returned nothing, expected an image',
    );
  });
});

describe("collectBootstrapOps", () => {
  it("concatenates ops in plugin order and passes the cluster", () => {
    const plugins = [
      Plugin.create("a").withBootstrap(({ cluster: given }) => [`echo a ${given.id}`, "echo a2"]),
      Plugin.create("b"),
      Plugin.create("c").withBootstrap(() => []),
      Plugin.create("d").withBootstrap(() => ["echo d"]),
    ];
    expect(collectBootstrapOps(plugins, cluster)).toEqual(["echo a cluster-1", "echo a2", "echo d"]);
  });

  it("names the plugin whose bootstrap throws or returns something else", () => {
    const throwing = Plugin.create("hf").withBootstrap(() => {
      throw new Error("HF_TOKEN missing");
    });
    const error = thrown(() => collectBootstrapOps([Plugin.create("ok"), throwing], cluster));
    expect(error).toMatchObject({ plugin: "hf", hook: "bootstrap" });
    expect((error as Error).message).toContain("HF_TOKEN missing");

    const wrong = Plugin.create("mps").withBootstrap(
      (() => "echo not-an-array") as unknown as () => string[],
    );
    expect((thrown(() => collectBootstrapOps([wrong], cluster)) as Error).message).toBe(
      'plugin "mps": bootstrap hook returned the string "echo not-an-array", expected an array of shell ops (strings)',
    );
    const mixed = Plugin.create("mixed").withBootstrap((() => ["ok", 3]) as unknown as () => string[]);
    expect(PluginError.isInstance(thrown(() => collectBootstrapOps([mixed], cluster)))).toBe(true);
  });
});

describe("resolveWorkersPerNode", () => {
  it("is what the one plugin that sets it returns for the cluster, 1 when none does, kept by with*", () => {
    expect(resolveWorkersPerNode([Plugin.create("a"), Plugin.create("b")], cluster)).toBe(1);
    const partitions = Plugin.create("partitions").withWorkersPerNode(({ cluster: given }) =>
      given.id === "cluster-1" ? 3 : 1,
    );
    expect(partitions.workersPerNode?.({ cluster })).toBe(3);
    expect(resolveWorkersPerNode([Plugin.create("a"), partitions.withBootstrap(() => [])], cluster)).toBe(3);
    expect(issuesOf(() => Plugin.create("x").withWorkersPerNode(3 as unknown as () => number))[0]).toEqual({
      path: "workersPerNode",
      message: "expected a function, received number 3",
    });
  });

  it("refuses two plugins that both set it, naming both", () => {
    const plugins = [
      Plugin.create("mig").withWorkersPerNode(() => 2),
      Plugin.create("torch"),
      Plugin.create("slicer").withWorkersPerNode(() => 4),
    ];
    const error = thrown(() => resolveWorkersPerNode(plugins, cluster));
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).issues).toEqual([
      {
        path: "plugins[2]",
        message:
          'plugins "mig" and "slicer" both set workersPerNode; at most one plugin of a pool may decide how many workers a node runs',
      },
    ]);
  });

  it("names the plugin whose hook throws or returns anything but a positive whole number", () => {
    const throwing = Plugin.create("gpu").withWorkersPerNode(() => {
      throw new Error("no GPU to partition");
    });
    expect(thrown(() => resolveWorkersPerNode([throwing], cluster))).toMatchObject({
      plugin: "gpu",
      hook: "workersPerNode",
      message: 'plugin "gpu": workersPerNode hook failed: no GPU to partition',
    });
    for (const [returned, described] of [
      [0, "number 0"],
      [2.5, "number 2.5"],
      ["2", 'the string "2"'],
    ] as const) {
      const wrong = Plugin.create("wrong").withWorkersPerNode(() => returned as number);
      expect((thrown(() => resolveWorkersPerNode([wrong], cluster)) as Error).message).toBe(
        `plugin "wrong": workersPerNode hook returned ${described}, expected a positive whole number`,
      );
    }
  });
});

describe("one worker per accelerator", () => {
  const gpus = (offered: number | null, asked = 0): Cluster => ({
    ...cluster,
    spec: { acceleratorCount: asked } as PoolSpec,
    offer: { accelerator: offered === null ? null : { name: "H100", count: offered, memoryGb: 80 } } as Offer,
  });

  it("counts a node's accelerators from the offer, else the spec; a fraction or none is 0", () => {
    expect(acceleratorsPerNode(gpus(8))).toBe(8);
    expect(acceleratorsPerNode(gpus(null, 4))).toBe(4);
    expect(acceleratorsPerNode(gpus(null))).toBe(0);
    expect(acceleratorsPerNode(gpus(0.5))).toBe(0);
  });

  it("withWorkersPerAccelerator: as many workers as accelerators, each pinned, each a process", () => {
    const torch = Plugin.create("torch").withWorkersPerAccelerator();
    expect(isWorkersPerAccelerator(torch.workersPerNode)).toBe(true);
    expect(isWorkersPerAccelerator(workersPerAccelerator())).toBe(true);
    expect(isWorkersPerAccelerator(() => 2)).toBe(false);
    expect(resolveWorkerLayout([torch], gpus(8))).toEqual({
      workersPerNode: 8,
      processPerWorker: true,
      checkAccelerators: true,
      pinAccelerators: true,
    });
    expect(resolveWorkerLayout([Plugin.create("plain")], gpus(8))).toEqual({
      workersPerNode: 1,
      processPerWorker: false,
      checkAccelerators: false,
      pinAccelerators: false,
    });
    expect(thrown(() => resolveWorkerLayout([torch], gpus(null)))).toMatchObject({
      plugin: "torch",
      hook: "workersPerNode",
      message: expect.stringContaining("one worker per accelerator needs nodes with accelerators"),
    });
  });

  it("several plugins may ask for it; a plugin with its own count (MIG) decides and pins", () => {
    const torch = Plugin.create("torch").withWorkersPerAccelerator();
    const accelerate = Plugin.create("accelerate").withWorkersPerAccelerator();
    expect(resolveWorkerLayout([torch, accelerate], gpus(2))).toEqual({
      workersPerNode: 2,
      processPerWorker: true,
      checkAccelerators: true,
      pinAccelerators: true,
    });
    const mig = Plugin.create("mig").withWorkersPerNode(() => 7);
    for (const plugins of [
      [torch, mig],
      [mig, torch, accelerate],
    ]) {
      expect(resolveWorkerLayout(plugins, gpus(1))).toEqual({
        workersPerNode: 7,
        processPerWorker: true,
        checkAccelerators: false,
        pinAccelerators: false,
      });
    }
  });

  it("pins the devices only when every plugin asking for it pins; every one's check runs", () => {
    const checked: string[] = [];
    const torch = Plugin.create("torch").withWorkersPerAccelerator();
    const accelerate = Plugin.create("accelerate").withWorkersPerNode(
      workersPerAccelerator({ pin: false, check: (count) => checked.push(`accelerate saw ${count}`) }),
    );
    expect(resolveWorkerLayout([torch, accelerate], gpus(4))).toEqual({
      workersPerNode: 4,
      processPerWorker: true,
      checkAccelerators: true,
      pinAccelerators: false,
    });
    expect(checked).toEqual(["accelerate saw 4"]);
    const refusing = Plugin.create("strict").withWorkersPerNode(
      workersPerAccelerator({
        check: () => {
          throw new Error("needs 8");
        },
      }),
    );
    expect(thrown(() => resolveWorkerLayout([torch, refusing], gpus(4)))).toMatchObject({
      plugin: "strict",
      message: 'plugin "strict": workersPerNode hook failed: needs 8',
    });
  });
});

describe("applyLaunchers", () => {
  const base = LaunchCommand.create({ entrypoint: "/opt/skyward/worker.py", args: ["--node-id", "1"] });

  it("chains launchers in plugin order with the context", () => {
    const plugins = [
      Plugin.create("torchrun").withLauncher(({ command, context: given }) =>
        command.with({ launcher: `torchrun --nnodes ${given.numNodes} --node-rank ${given.nodeId}` }),
      ),
      Plugin.create("plain"),
      Plugin.create("nice").withLauncher(({ command }) =>
        command.with({ launcher: `nice -n 5 ${command.launcher}` }),
      ),
    ];
    const result = applyLaunchers(plugins, base, context);
    expect(result.render()).toBe(
      "nice -n 5 torchrun --nnodes 4 --node-rank 1 /opt/skyward/worker.py --node-id 1",
    );
    expect(base.launcher).toBe("");
    expect(applyLaunchers([], base, context)).toBe(base);
  });

  it("rebuilds a command-shaped object and rejects anything else", () => {
    const shaped = Plugin.create("shaped").withLauncher(
      () => ({ launcher: "env", entrypoint: "w", args: ["x y"] }) as unknown as LaunchCommand,
    );
    const rebuilt = applyLaunchers([shaped], base, context);
    expect(rebuilt).toBeInstanceOf(LaunchCommand);
    expect(rebuilt.render()).toBe("env w 'x y'");

    const wrong = Plugin.create("stringly").withLauncher(
      () => "accelerate launch" as unknown as LaunchCommand,
    );
    expect((thrown(() => applyLaunchers([wrong], base, context)) as Error).message).toBe(
      'plugin "stringly": launcher hook returned the string "accelerate launch", expected a LaunchCommand',
    );
  });

  it("names the plugin whose launcher throws", () => {
    const throwing = Plugin.create("accelerate").withLauncher(() => {
      throw new TypeError("num_processes must be > 0");
    });
    const error = thrown(() => applyLaunchers([throwing], base, context));
    expect(PluginError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ plugin: "accelerate", hook: "launcher" });
    expect((error as PluginError).cause).toBeInstanceOf(TypeError);
  });
});

describe("enterAroundClient", () => {
  /** A plugin whose aroundClient records enter/exit in `log`. */
  const recording = (
    name: string,
    log: string[],
    options: { failEnter?: boolean; failExit?: boolean } = {},
  ) =>
    Plugin.create(name).withAroundClient(async ({ pool: given, cluster: givenCluster }) => {
      if (options.failEnter) throw new Error(`${name} cannot start`);
      log.push(`enter ${name} ${given.id} ${givenCluster.id}`);
      return {
        [Symbol.asyncDispose]: async () => {
          log.push(`exit ${name}`);
          if (options.failExit) throw new Error(`${name} cannot stop`);
        },
      };
    });

  it("enters in plugin order and exits in reverse", async () => {
    const log: string[] = [];
    const plugins = [
      recording("a", log),
      Plugin.create("no-hook"),
      Plugin.create("sync").withAroundClient(() => {
        log.push("enter sync");
        return { [Symbol.dispose]: () => void log.push("exit sync") };
      }),
      Plugin.create("nothing-to-exit").withAroundClient(async () => {
        log.push("enter nothing-to-exit");
      }),
      recording("c", log),
    ];
    const hooks = await enterAroundClient(plugins, pool, cluster);
    expect(log).toEqual([
      "enter a pool-1 cluster-1",
      "enter sync",
      "enter nothing-to-exit",
      "enter c pool-1 cluster-1",
    ]);
    await hooks[Symbol.asyncDispose]();
    expect(log.slice(4)).toEqual(["exit c", "exit sync", "exit a"]);
    await hooks[Symbol.asyncDispose]();
    expect(log).toHaveLength(7);
  });

  it("works with await using", async () => {
    const log: string[] = [];
    {
      await using _hooks = await enterAroundClient([recording("a", log), recording("b", log)], pool, cluster);
      log.push("body");
    }
    expect(log).toEqual(["enter a pool-1 cluster-1", "enter b pool-1 cluster-1", "body", "exit b", "exit a"]);
  });

  it("exits the hooks already entered, in reverse, when a later one fails to enter", async () => {
    const log: string[] = [];
    const plugins = [
      recording("a", log),
      recording("b", log),
      recording("c", log, { failEnter: true }),
      recording("d", log),
    ];
    const error = await rejection(enterAroundClient(plugins, pool, cluster));
    expect(log).toEqual(["enter a pool-1 cluster-1", "enter b pool-1 cluster-1", "exit b", "exit a"]);
    expect(PluginError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ plugin: "c", hook: "aroundClient", suppressed: [] });
    expect((error as Error).message).toBe('plugin "c": aroundClient hook failed: c cannot start');
  });

  it("keeps cleanup failures as suppressed errors of the entry failure", async () => {
    const log: string[] = [];
    const plugins = [
      recording("a", log, { failExit: true }),
      recording("b", log),
      recording("c", log, { failEnter: true }),
    ];
    const error = (await rejection(enterAroundClient(plugins, pool, cluster))) as PluginError;
    expect(log).toEqual(["enter a pool-1 cluster-1", "enter b pool-1 cluster-1", "exit b", "exit a"]);
    expect(error.plugin).toBe("c");
    expect(error.suppressed).toHaveLength(1);
    expect(error.suppressed[0]).toMatchObject({ plugin: "a", hook: "aroundClient" });
    expect((error.suppressed[0] as Error).message).toBe(
      'plugin "a": aroundClient hook failed while exiting: a cannot stop',
    );
  });

  it("exits every hook even when some fail, then rejects with the first failure", async () => {
    const log: string[] = [];
    const plugins = [
      recording("a", log, { failExit: true }),
      recording("b", log),
      recording("c", log, { failExit: true }),
    ];
    const hooks = await enterAroundClient(plugins, pool, cluster);
    const error = (await rejection(hooks[Symbol.asyncDispose]())) as PluginError;
    expect(log.slice(3)).toEqual(["exit c", "exit b", "exit a"]);
    expect(error.plugin).toBe("c");
    expect(error.message).toContain("while exiting: c cannot stop");
    expect(error.suppressed.map((suppressed) => (suppressed as PluginError).plugin)).toEqual(["a"]);
  });

  it("rejects a hook returning something that cannot be exited, after exiting the others", async () => {
    const log: string[] = [];
    const plugins = [
      recording("a", log),
      Plugin.create("odd").withAroundClient(() => 42 as unknown as undefined),
    ];
    const error = await rejection(enterAroundClient(plugins, pool, cluster));
    expect((error as Error).message).toBe(
      'plugin "odd": aroundClient hook returned number 42, expected an AsyncDisposable, a Disposable or nothing',
    );
    expect(log).toEqual(["enter a pool-1 cluster-1", "exit a"]);
  });
});

describe("workerModules", () => {
  it("lists worker modules in plugin order with their plugin names", () => {
    const plugins = [
      Plugin.create("jax").withWorker({ module: "skyward_jax", config: { cuda: "12" } }),
      Plugin.create("no-worker"),
      Plugin.create("keras").withWorker({ module: "skyward_keras", path: "/pkg/python/skyward_keras" }),
    ];
    expect(workerModules(plugins)).toEqual([
      { plugin: "jax", module: "skyward_jax", path: undefined, config: { cuda: "12" } },
      { plugin: "keras", module: "skyward_keras", path: "/pkg/python/skyward_keras", config: {} },
    ]);
  });
});
