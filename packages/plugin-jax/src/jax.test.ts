import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { image } from "@skyward/core";
import {
  applyImageTransforms,
  isPlugin,
  isWorkersPerAccelerator,
  type PluginV1,
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
