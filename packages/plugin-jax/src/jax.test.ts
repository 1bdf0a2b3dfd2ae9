import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { ConfigurationError, image, options, PluginError, spec } from "@skyward/core";
import {
  applyImageTransforms,
  isPlugin,
  isWorkersPerAccelerator,
  type PluginV1,
  resolvePoolSpec,
  workerModules,
} from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, packedFiles } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { type JaxOptions, jax } from "./index.js";

const cluster = fakeCluster();

function transformed(plugin: PluginV1, base = image()) {
  return applyImageTransforms([plugin], base, cluster);
}

describe("jax()", () => {
  it("is a plugin named jax with its worker module shipped from the package", () => {
    const plugin = jax();
    expect(isPlugin(plugin)).toBe(true);
    expect(plugin.name).toBe("jax");
    const path = fileURLToPath(new URL("../python/skyward_plugin_jax.py", import.meta.url));
    expect(plugin.worker?.path).toBe(path);
    expect(existsSync(path)).toBe(true);
    expect(workerModules([plugin])).toEqual([
      { plugin: "jax", module: "skyward_plugin_jax", path, config: {} },
    ]);
    expect(readFileSync(path, "utf8")).toMatch(/^def around_app\(info: Any, config: Mapping\[str, Any\]\)/m);
    // One JAX process per node unless asked for one per accelerator.
    expect(plugin.workersPerNode).toBeUndefined();
    const perDevice = jax({ perAccelerator: true });
    expect(isWorkersPerAccelerator(perDevice.workersPerNode)).toBe(true);
    expect(perDevice.worker?.config).toEqual({ per_worker: true });
    expect(readFileSync(path, "utf8")).toMatch(
      /^def around_process\(info: Any, config: Mapping\[str, Any\]\)/m,
    );
  });

  it.each([
    [undefined, "jax[cuda12]"],
    ["cu12", "jax[cuda12]"],
    ["cu13", "jax[cuda13]"],
    ["cpu", "jax"],
  ] as const)("with cuda %s adds %s from PyPI and keeps the image's own", async (cuda, requirement) => {
    const base = image({
      pip: ["numpy"],
      env: { A: "1" },
      pipIndexes: [{ url: "https://example.org/simple", packages: ["x"] }],
    });
    const result = await transformed(jax(cuda === undefined ? {} : { cuda }), base);
    expect(result.pip).toEqual(["numpy", requirement]);
    expect(result.pipIndexes).toEqual(base.pipIndexes);
    expect(result.env).toEqual({ A: "1" });
  });

  it.each<[unknown, string, RegExp]>([
    [{ cuda: "cu11" }, "cuda", /expected one of "cu12", "cu13", "cpu", received "cu11"/],
    [{ cuda: 12 }, "cuda", /expected one of .*received number/],
    [{ perAccelerator: "yes" }, "perAccelerator", /expected true or false, received "yes"/],
    [{ backend: "gloo" }, "backend", /unknown field/],
    [[], "", /expected an options object/],
  ])("rejects %j naming the field", (input, path, message) => {
    const issues = configurationIssuesOf(() => jax(input as JaxOptions));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe(path);
    expect(issues[0]?.message).toMatch(message);
  });
});

describe("jax() and the process executor", () => {
  /** What the image transform throws on a pool with these worker options, or undefined. */
  async function refusal(plugin: PluginV1, worker: { executor: "thread" | "process"; concurrency?: number }) {
    const poolSpec = resolvePoolSpec(spec({ nodes: 2, plugins: [plugin] }), options({ worker }));
    try {
      await applyImageTransforms([plugin], poolSpec.image, fakeCluster({ spec: poolSpec }));
      return undefined;
    } catch (error) {
      return error;
    }
  }

  // jax.distributed is initialised in the node's worker process; under the process executor the
  // tasks run in its children, each a JAX runtime of one process.
  it("one JAX process per node is refused under executor: 'process' before any node starts, naming the option", async () => {
    const error = await refusal(jax(), { executor: "process" });
    expect(PluginError.isInstance(error)).toBe(true);
    const cause = (error as PluginError).cause;
    expect(ConfigurationError.isInstance(cause)).toBe(true);
    expect((cause as ConfigurationError).issues).toEqual([
      {
        path: "options.worker.executor",
        message: expect.stringMatching(
          /^expected "thread" with jax\(\) \(the node's worker process is its JAX process\).*perAccelerator: true/,
        ),
      },
    ]);
  });

  it("is accepted under the thread executor, and with perAccelerator (each child a JAX process)", async () => {
    expect(await refusal(jax(), { executor: "thread", concurrency: 4 })).toBeUndefined();
    expect(await refusal(jax({ perAccelerator: true }), { executor: "process" })).toBeUndefined();
  });
});

describe("jax() on an elastic pool", () => {
  // jax.distributed has a fixed number of processes: a node joining later (autoscaling) would
  // initialise with a count the runtime formed before it never had.
  it("is refused before any node starts, naming nodes", async () => {
    for (const nodes of [[1, 4], sky.nodes({ desired: 4, min: 2 })] as const) {
      const poolSpec = resolvePoolSpec(spec({ nodes, plugins: [jax()] }), options());
      const error = await applyImageTransforms([jax()], poolSpec.image, fakeCluster({ spec: poolSpec })).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(PluginError.isInstance(error)).toBe(true);
      expect(((error as PluginError).cause as ConfigurationError).issues).toEqual([
        { path: "nodes", message: expect.stringMatching(/^expected a fixed node count with jax\(\)/) },
      ]);
    }
  });

  it("is accepted on a fixed node count", async () => {
    const poolSpec = resolvePoolSpec(spec({ nodes: 3, plugins: [jax()] }), options());
    await expect(
      applyImageTransforms([jax()], poolSpec.image, fakeCluster({ spec: poolSpec })),
    ).resolves.toBeDefined();
  });
});

describe("the package", () => {
  const root = fileURLToPath(new URL("..", import.meta.url));

  it("ships the worker module in its tarball, and no tests", () => {
    const files = packedFiles(root);
    expect(files).toContain("python/skyward_plugin_jax.py");
    expect(files.filter((file) => file.includes(".test.") || file.startsWith("test/"))).toEqual([]);
  }, 60_000); // `pnpm pack` in a child process: more than the default 5 s on a busy machine

  it("depends on @skyward/core as a peer", () => {
    const manifest = JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
      peerDependencies: Record<string, string>;
    };
    expect(manifest.peerDependencies["@skyward/core"]).toBe("workspace:>=0.1.0 <1.0.0");
  });
});
