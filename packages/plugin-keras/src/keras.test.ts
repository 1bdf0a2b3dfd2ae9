import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { image } from "@skyward/core";
import { applyImageTransforms, isPlugin, type PluginV1, workerModules } from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, packedFiles } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { type KerasOptions, keras } from "./index.js";

const cluster = fakeCluster();

function transformed(plugin: PluginV1, base = image()) {
  return applyImageTransforms([plugin], base, cluster);
}

describe("keras()", () => {
  it("is a plugin named keras with its worker module shipped from the package", () => {
    const plugin = keras();
    expect(isPlugin(plugin)).toBe(true);
    expect(plugin.name).toBe("keras");
    const path = fileURLToPath(new URL("../python/skyward_plugin_keras.py", import.meta.url));
    expect(plugin.worker?.path).toBe(path);
    expect(existsSync(path)).toBe(true);
    expect(workerModules([plugin])).toEqual([
      { plugin: "keras", module: "skyward_plugin_keras", path, config: { backend: "jax" } },
    ]);
    expect(keras({ backend: "torch" }).worker?.config).toEqual({ backend: "torch" });
    expect(readFileSync(path, "utf8")).toMatch(/^def around_app\(info: Any, config: Mapping\[str, Any\]\)/m);
  });

  it.each([
    [undefined, "jax"],
    ["jax", "jax"],
    ["torch", "torch"],
    ["tensorflow", "tensorflow"],
  ] as const)("with backend %s adds keras and sets KERAS_BACKEND=%s in the image", async (backend, value) => {
    const base = image({ pip: ["numpy"], env: { A: "1", KERAS_BACKEND: "old" } });
    const result = await transformed(keras(backend === undefined ? {} : { backend }), base);
    expect(result.pip).toEqual(["numpy", "keras"]);
    expect(result.env).toEqual({ A: "1", KERAS_BACKEND: value });
    expect(result.pipIndexes).toEqual([]);
    expect(base.env.KERAS_BACKEND).toBe("old");
  });

  it.each<[unknown, string, RegExp]>([
    [{ backend: "mxnet" }, "backend", /expected one of "jax", "torch", "tensorflow", received "mxnet"/],
    [{ backend: null }, "backend", /received null/],
    [{ distribute: true }, "distribute", /unknown field/],
    [42, "", /expected an options object, received number/],
  ])("rejects %j naming the field", (input, path, message) => {
    const issues = configurationIssuesOf(() => keras(input as KerasOptions));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe(path);
    expect(issues[0]?.message).toMatch(message);
  });
});

describe("the package", () => {
  const root = fileURLToPath(new URL("..", import.meta.url));

  it("ships the worker module in its tarball, and no tests", () => {
    const files = packedFiles(root);
    expect(files).toContain("python/skyward_plugin_keras.py");
    expect(files.filter((file) => file.includes(".test.") || file.startsWith("test/"))).toEqual([]);
  }, 60_000); // `pnpm pack` in a child process: more than the default 5 s on a busy machine

  it("depends on @skyward/core as a peer", () => {
    const manifest = JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
      peerDependencies: Record<string, string>;
    };
    expect(manifest.peerDependencies["@skyward/core"]).toBe("workspace:>=0.1.0 <1.0.0");
  });
});
