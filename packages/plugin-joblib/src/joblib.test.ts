import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { image } from "@skyward/core";
import { applyImageTransforms, isPlugin, type PluginV1, workerModules } from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, packedFiles } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { type JoblibOptions, joblib, sklearn } from "./index.js";

const cluster = fakeCluster();

const workerPath = fileURLToPath(new URL("../python/skyward_plugin_joblib.py", import.meta.url));

function transformed(plugins: PluginV1[], base = image()) {
  return applyImageTransforms(plugins, base, cluster);
}

/** The worker module's top-level functions and string constants, read by Python's own parser. */
function pythonSurface(): { functions: Record<string, string[]>; constants: Record<string, string> } {
  const script = `
import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read())
functions = {node.name: [arg.arg for arg in node.args.args] for node in tree.body if isinstance(node, ast.FunctionDef)}
constants = {
    node.targets[0].id: node.value.value
    for node in tree.body
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
}
print(json.dumps({"functions": functions, "constants": constants}))
`;
  return JSON.parse(execFileSync("python3", ["-c", script, workerPath], { encoding: "utf8" }));
}

describe.each([
  ["joblib", joblib],
  ["sklearn", sklearn],
] as const)("%s()", (name, factory) => {
  it("is a plugin with the joblib backend's worker module, shipped from the package", () => {
    const plugin = factory();
    expect(isPlugin(plugin)).toBe(true);
    expect(plugin.name).toBe(name);
    expect(plugin.worker).toEqual({ module: "skyward_plugin_joblib", path: workerPath, config: {} });
    expect(existsSync(workerPath)).toBe(true);
    expect(workerModules([plugin])).toEqual([
      { plugin: name, module: "skyward_plugin_joblib", path: workerPath, config: {} },
    ]);
    // Client-side hooks beyond the image transform are not needed: everything happens on the workers.
    expect(plugin.bootstrap).toBeUndefined();
    expect(plugin.launcher).toBeUndefined();
    expect(plugin.aroundClient).toBeUndefined();
  });

  it.each<[unknown, string, RegExp]>([
    [
      { version: "newest" },
      "version",
      /expected an exact version like "1.5.2".*received the string "newest"/,
    ],
    [{ version: "1.5 or so" }, "version", /received the string "1.5 or so"/],
    [{ version: "" }, "version", /expected an exact version/],
    [{ version: 1.5 }, "version", /expected a version string, received number 1.5/],
    [{ version: null }, "version", /expected a version string, received null/],
    [{ backend: "loky" }, "backend", /unknown field/],
    ["1.5.2", "", /expected an options object, received the string "1.5.2"/],
  ])("rejects %j naming the field", (input, path, message) => {
    const issues = configurationIssuesOf(() => factory(input as JoblibOptions));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe(path);
    expect(issues[0]?.message).toMatch(message);
  });
});

describe("image transforms", () => {
  it("joblib() adds joblib, keeping what the image had", async () => {
    const base = image({ pip: ["numpy"], env: { A: "1" } });
    const result = await transformed([joblib()], base);
    expect(result.pip).toEqual(["numpy", "joblib"]);
    expect(result.env).toEqual({ A: "1" });
    expect(result.pipIndexes).toEqual([]);
    expect(base.pip).toEqual(["numpy"]);
  });

  it("pins an exact version and passes a specifier through", async () => {
    expect((await transformed([joblib({ version: "1.5.2" })])).pip).toEqual(["joblib==1.5.2"]);
    expect((await transformed([joblib({ version: "1.6.0rc1" })])).pip).toEqual(["joblib==1.6.0rc1"]);
    expect((await transformed([joblib({ version: ">=1.3, <2" })])).pip).toEqual(["joblib>=1.3,<2"]);
    expect((await transformed([joblib({ version: "~=1.4" })])).pip).toEqual(["joblib~=1.4"]);
  });

  it("sklearn() adds scikit-learn (pinned when asked) and joblib", async () => {
    expect((await transformed([sklearn()])).pip).toEqual(["scikit-learn", "joblib"]);
    expect((await transformed([sklearn({ version: "1.7.2" })])).pip).toEqual([
      "scikit-learn==1.7.2",
      "joblib",
    ]);
    expect((await transformed([sklearn({ version: ">=1.5" })])).pip).toEqual(["scikit-learn>=1.5", "joblib"]);
  });

  it("both plugins in one pool add joblib once", async () => {
    const result = await transformed([joblib(), sklearn()], image({ pip: ["joblib"] }));
    expect(result.pip).toEqual(["joblib", "scikit-learn"]);
  });
});

describe("the worker module", () => {
  const { functions, constants } = pythonSurface();

  it("defines the hooks of the worker-module contract, with its signatures", () => {
    expect(functions.around_app).toEqual(["info", "config"]);
    expect(functions.around_process).toEqual(["info", "config"]);
    expect(functions.decorate).toBeUndefined();
  });

  it("names its nested-dispatch entry point as module:qualname, and defines it", () => {
    expect(constants.RUN_BATCH).toBe("skyward_plugin_joblib:run_batch");
    expect(functions.run_batch).toEqual(["payload"]);
    expect(constants.BACKEND_NAME).toBe("skyward");
  });
});

describe("the package", () => {
  const root = fileURLToPath(new URL("..", import.meta.url));

  it("ships the worker module in its tarball, and no tests", () => {
    const files = packedFiles(root);
    expect(files).toContain("python/skyward_plugin_joblib.py");
    expect(files).toContain("src/index.ts");
    expect(files.filter((file) => /test|__pycache__/.test(file))).toEqual([]);
  }, 60_000); // `pnpm pack` in a child process: more than the default 5 s on a busy machine

  it("depends on @skyward/core as a peer", () => {
    const manifest = JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
      peerDependencies: Record<string, string>;
    };
    expect(manifest.peerDependencies["@skyward/core"]).toBe("workspace:>=0.1.0 <1.0.0");
  });
});
