import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ConfigurationError, image, options, PluginError, spec } from "@skyward/core";
import {
  applyImageTransforms,
  isPlugin,
  type PluginV1,
  resolvePoolSpec,
  workerModules,
} from "@skyward/core/contract";
import { jax } from "@skyward/plugin-jax";
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

describe("keras() with the JAX backend on several nodes", () => {
  /** What the image transforms of `plugins` on a pool of `nodes` nodes throw, or undefined. */
  async function refusal(plugins: PluginV1[], nodes: number | [number, number]): Promise<unknown> {
    const poolSpec = resolvePoolSpec(spec({ nodes, plugins }), options());
    try {
      await applyImageTransforms(plugins, poolSpec.image, fakeCluster({ spec: poolSpec }));
      return undefined;
    } catch (error) {
      return error;
    }
  }

  it("is refused before any node starts unless the jax plugin comes first (each node would train a model of its own)", async () => {
    for (const plugins of [[keras()], [keras({ backend: "jax" }), jax({ cuda: "cpu" })]]) {
      const error = await refusal(plugins, 2);
      expect(PluginError.isInstance(error)).toBe(true);
      const cause = (error as PluginError).cause;
      expect(ConfigurationError.isInstance(cause)).toBe(true);
      expect((cause as ConfigurationError).issues).toEqual([
        {
          path: "keras.backend",
          message: expect.stringMatching(/"jax" on 2 nodes needs the jax plugin listed before keras/),
        },
      ]);
    }
    expect(await refusal([keras()], [1, 3])).toBeDefined();
  });

  it("is refused on one node too when jax() comes after it (its processes would each train their own model)", async () => {
    const error = await refusal([keras(), jax({ cuda: "cpu", perAccelerator: true })], 1);
    expect(PluginError.isInstance(error)).toBe(true);
    expect(((error as PluginError).cause as ConfigurationError).issues).toEqual([
      {
        path: "keras.backend",
        message: expect.stringMatching(/^"jax" needs the jax plugin listed before keras/),
      },
    ]);
  });

  it("is accepted after jax(), on one node, or with another backend", async () => {
    expect(await refusal([jax({ cuda: "cpu" }), keras()], 2)).toBeUndefined();
    expect(await refusal([keras()], 1)).toBeUndefined();
    expect(await refusal([keras({ backend: "torch" })], 2)).toBeUndefined();
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
