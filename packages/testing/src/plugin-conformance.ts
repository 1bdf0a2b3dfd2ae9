/**
 * The plugin conformance suite: one vitest `describe` block that checks a plugin against the `v1`
 * contract of `@skyward/core` — its shape, its worker side, and each hook it has, run the way a pool
 * runs it on a stand-in cluster: the transform returns a usable image without touching its input,
 * bootstrap ops are shell that `bash -n` accepts, the launcher still starts the worker, `aroundClient`
 * enters and exits, `workersPerNode` is a positive whole number, and the Python worker module imports
 * through the worker runtime's own plugin loader with its hooks callable. Every plugin package runs it,
 * the built-ins included.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { image as createImage, type Image, options as poolOptions, spec as poolSpec } from "@skyward/core";
import {
  applyImageTransforms,
  applyLaunchers,
  type Cluster,
  collectPluginBootstrapOps,
  enterAroundClient,
  LaunchCommand,
  type LaunchContext,
  normalizePlugin,
  type PluginV1,
  type PluginWorker,
  type PoolHandle,
  pythonRuntimeDirectory,
  resolvePoolSpec,
  resolveWorkersPerNode,
  whyNotPlugin,
} from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { fakeCluster } from "./plugin-helpers.js";

/** What a plugin under test needs from its test environment; every field is optional. */
export interface PluginConformanceSupport {
  /**
   * Whether the worker module is imported for real (with `python3`, through the worker runtime's
   * plugin loader). Default true; set false only for a module whose import needs what the test
   * machine cannot have (a GPU-only library), and say why where you call the suite.
   */
  workerImport?: boolean;
}

/** Options of {@link runPluginConformance}. */
export interface PluginConformanceOptions {
  /** Names the `describe` block: `plugin conformance: <name>`. */
  name: string;
  /** Creates the plugin under test (the package's factory, called with typical settings). */
  create: () => PluginV1;
  /**
   * The stand-in cluster its hooks are given. Default {@link conformanceCluster}: two CPU nodes, a
   * fully resolved pool spec.
   */
  cluster?: Cluster;
  /** The image its transform is applied to. Default `image()`. */
  image?: Image;
  /** What the test environment can do. */
  supports?: PluginConformanceSupport;
  /** The Python that imports the worker module. Default `$SKYWARD_TEST_PYTHON`, else `python3`. */
  python?: string;
}

const WORKER_ENTRYPOINT = "/opt/skyward/runtime/skyward_worker.py";

/**
 * The cluster the suite gives hooks by default: `fakeCluster()` with a resolved pool spec of two CPU
 * nodes (`sky.compute({ nodes: 2 })`'s) and a matching CPU offer; `overrides` replace its fields.
 */
export function conformanceCluster(overrides: Partial<Cluster> = {}): Cluster {
  return fakeCluster({
    spec: resolvePoolSpec(poolSpec({ nodes: 2 }), poolOptions({})),
    offer: {
      id: "fake-cpu",
      provider: "fake",
      instanceType: "fake.cpu",
      accelerator: null,
      vcpus: 4,
      memoryGb: 16,
      architecture: "x86_64",
      region: "local",
      spotPrice: null,
      onDemandPrice: 0.1,
      pricesAsOf: "2026-01-01",
      specific: {},
    },
    ...overrides,
  });
}

/** The launch context a launcher is given: node 1 of 2, loopback addresses, thread executor. */
export function fakeLaunchContext(overrides: Partial<LaunchContext> = {}): LaunchContext {
  return {
    nodeId: 1,
    numNodes: 2,
    headAddr: "10.0.0.1",
    headPort: 29500,
    privateIp: "10.0.0.2",
    pythonBin: "/opt/skyward/venv/bin/python",
    venvDir: "/opt/skyward/venv",
    root: "/opt/skyward",
    concurrency: 1,
    executor: "thread",
    workersPerNode: 1,
    ...overrides,
  };
}

/** What is wrong with an image a transform returned, in words (empty when nothing is). */
function imageProblems(returned: Image): string[] {
  try {
    createImage(returned);
    return [];
  } catch (error) {
    return [`the transform returned an image that does not validate: ${(error as Error).message}`];
  }
}

/**
 * Imports `worker` in a real Python through `skyward.plugins.load_plugins`, as a worker does, and
 * reports the hooks it defines; throws with Python's own message when it cannot.
 */
function importWorkerModule(plugin: string, worker: PluginWorker, python: string): string[] {
  const paths = [pythonRuntimeDirectory(), ...(worker.path ? [dirname(worker.path)] : [])];
  const script = [
    "import json, sys",
    "from skyward.plugins import load_plugins",
    "entry = json.loads(sys.argv[1])",
    "[loaded] = load_plugins([entry])",
    "hooks = [name for name in ('decorate', 'around_app', 'around_process') if loaded.hook(name)]",
    "bad = [name for name in ('decorate', 'around_app', 'around_process') if hasattr(loaded.module, name) and not loaded.hook(name)]",
    "print(json.dumps({'hooks': hooks, 'bad': bad}))",
  ].join("\n");
  const result = spawnSync(
    python,
    ["-c", script, JSON.stringify({ name: plugin, module: worker.module, config: worker.config })],
    {
      encoding: "utf8",
      env: { ...process.env, PYTHONPATH: [...paths, process.env.PYTHONPATH].filter(Boolean).join(":") },
      timeout: 60_000,
    },
  );
  if (result.status !== 0) {
    throw new Error(`importing ${worker.module} failed: ${(result.stderr || String(result.error)).trim()}`);
  }
  const report = JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "{}") as {
    hooks: string[];
    bad: string[];
  };
  if (report.bad.length > 0)
    throw new Error(`${worker.module} defines ${report.bad.join(", ")} but not as functions`);
  return report.hooks;
}

/**
 * Registers the conformance suite for one plugin.
 *
 * ```ts
 * import { runPluginConformance } from "@skyward/testing";
 * import { torch } from "@skyward/plugin-torch";
 *
 * runPluginConformance({ name: "torch", create: () => torch({ backend: "gloo" }) });
 * ```
 */
export function runPluginConformance(options: PluginConformanceOptions): void {
  const cluster = options.cluster ?? conformanceCluster();
  const baseImage = options.image ?? createImage({});
  const python = options.python ?? process.env.SKYWARD_TEST_PYTHON ?? "python3";

  describe(`plugin conformance: ${options.name}`, () => {
    it("is a v1 plugin by shape, with a usable worker side", () => {
      const plugin = options.create();
      expect(whyNotPlugin(plugin)).toBeUndefined();
      expect(plugin.specificationVersion).toBe("v1");
      const normalized = normalizePlugin(plugin);
      expect(normalized.name).toBe(plugin.name);
      // A factory makes a fresh plugin of the same name each time: pools do not share state through it.
      expect(options.create().name).toBe(plugin.name);
    });

    it("transforms the image into a valid one, leaving its input as it was", async () => {
      const plugin = options.create();
      const before = JSON.stringify(baseImage);
      const transformed = await applyImageTransforms([plugin], baseImage, cluster);
      expect(JSON.stringify(baseImage)).toBe(before);
      expect(imageProblems(transformed)).toEqual([]);
      if (!plugin.transform) expect(transformed).toBe(baseImage);
    });

    it("has bootstrap ops that are shell bash accepts", () => {
      const plugin = options.create();
      const ops = collectPluginBootstrapOps([plugin], cluster);
      for (const { plugin: owner, op } of ops) {
        expect(owner).toBe(plugin.name);
        expect(op.trim()).not.toBe("");
        const syntax = spawnSync("bash", ["-n"], { input: op, encoding: "utf8" });
        expect(syntax.status, `bash -n rejects ${JSON.stringify(op)}: ${syntax.stderr}`).toBe(0);
      }
      if (!plugin.bootstrap) expect(ops).toEqual([]);
    });

    it("keeps starting the worker from its launcher", () => {
      const plugin = options.create();
      const base = LaunchCommand.create({
        launcher: "/opt/skyward/venv/bin/python",
        entrypoint: WORKER_ENTRYPOINT,
        args: ["--node-id", "1"],
      });
      const command = applyLaunchers([plugin], base, fakeLaunchContext());
      const line = command.render();
      expect(line).not.toContain("\n");
      expect(line).toContain(WORKER_ENTRYPOINT);
      expect(command.args).toEqual(expect.arrayContaining(["--node-id", "1"]));
      if (!plugin.launcher) expect(line).toBe(base.render());
    });

    it("enters and exits around the client", async () => {
      const plugin = options.create();
      const pool: PoolHandle = { id: "pool", spec: cluster.spec, currentNodes: () => 2 };
      const entered = await enterAroundClient([plugin], pool, cluster);
      await entered[Symbol.asyncDispose]();
      // Exiting twice does nothing more.
      await entered[Symbol.asyncDispose]();
    });

    it("asks for a positive whole number of workers per node", () => {
      const count = resolveWorkersPerNode([options.create()], cluster);
      expect(Number.isInteger(count) && count >= 1).toBe(true);
    });

    it("ships a worker module that the worker runtime imports, its hooks callable", () => {
      const worker = normalizePlugin(options.create()).worker as PluginWorker | undefined;
      if (!worker) return;
      if (worker.path !== undefined) expect(existsSync(worker.path), `${worker.path} is missing`).toBe(true);
      if (options.supports?.workerImport === false || worker.path === undefined) return;
      const hooks = importWorkerModule(options.name, worker, python);
      expect(Array.isArray(hooks)).toBe(true);
    });
  });
}
