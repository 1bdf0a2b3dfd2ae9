import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Plugin } from "../contract/plugin.js";
import type { Provider } from "../contract/provider.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { accelerators } from "./accelerators.js";
import { resolveComputeInput } from "./compute-input.js";
import { DEFAULT_IMAGE, image } from "./image.js";
import { options } from "./options.js";
import { resolvePoolSpec, spec } from "./spec.js";

function fakeProvider(name: string): Provider {
  return {
    specificationVersion: "v1",
    name,
    capabilities: { spot: true, volumes: false, images: false },
    offers: async () => [],
    prepare: async () => {
      throw new Error("not used");
    },
    provision: async () => [],
    getInstance: async () => null,
    launchWorker: async () => {
      throw new Error("not used");
    },
    terminate: async () => {},
    teardown: async () => {},
    selfDestruct: () => "shutdown -h now",
  };
}

/** The settings the fixture provider recorded (it keeps them on itself). */
function settingsOf(provider: unknown): unknown {
  return (provider as { settings?: unknown } | undefined)?.settings;
}

async function issuesOf(promise: Promise<unknown>): Promise<readonly ConfigurationIssue[]> {
  try {
    await promise;
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues;
  }
  throw new Error("expected a ConfigurationError, but nothing was thrown");
}

describe("flat form", () => {
  it("resolves to one pool spec with default options", async () => {
    const resolved = await resolveComputeInput({});
    expect(resolved.name).toBeUndefined();
    expect(resolved.options).toEqual(options());
    expect(resolved.specs).toEqual([resolvePoolSpec(spec({}), options())]);
    expect(resolved.specs[0]?.image).toEqual(DEFAULT_IMAGE);
  });

  it("validates the spec fields and applies the options", async () => {
    const provider = fakeProvider("aws");
    const resolved = await resolveComputeInput({
      provider,
      accelerator: accelerators.A100(),
      nodes: 4,
      image: { pip: ["numpy"] },
      plugins: [Plugin.create("torch")],
      options: { worker: { concurrency: 4 }, provisionTimeout: 600, bootstrapTimeout: 120 },
    });
    expect(resolved.specs).toHaveLength(1);
    const pool = resolved.specs[0];
    expect(pool?.provider).toBe(provider);
    expect(pool?.nodes).toEqual({ desired: 4, min: 4, max: 4 });
    expect(pool?.image).toEqual(image({ pip: ["numpy"] }));
    expect(pool?.plugins.map((plugin) => plugin.name)).toEqual(["torch"]);
    expect(pool).toMatchObject({
      acceleratorName: "A100",
      acceleratorCount: 1,
      acceleratorMemoryGb: 80,
      worker: { concurrency: 4, buffer: "auto", executor: "thread", reuseProcesses: true },
      provisionTimeout: 600,
      bootstrapTimeout: 120,
      sshTimeout: 300,
    });
    expect(resolved.options.provisionTimeout).toBe(600);
  });

  it("is frozen", async () => {
    const resolved = await resolveComputeInput({ nodes: [1, 3] });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.specs)).toBe(true);
    expect(Object.isFrozen(resolved.specs[0])).toBe(true);
    expect(Object.isFrozen(resolved.options)).toBe(true);
  });
});

describe("several specs", () => {
  it("keeps the order and shares the options", async () => {
    const first = fakeProvider("first");
    const second = fakeProvider("second");
    const third = fakeProvider("third");
    const resolved = await resolveComputeInput({
      specs: [
        { provider: first, accelerator: accelerators.H100() },
        spec({ provider: second, accelerator: accelerators.A100(), nodes: 2 }),
        { provider: third },
      ],
      options: { selection: "first", worker: { concurrency: 2 } },
    });
    expect(resolved.specs.map((pool) => pool.provider)).toEqual([first, second, third]);
    expect(resolved.specs.map((pool) => pool.acceleratorName)).toEqual(["H100", "A100", undefined]);
    expect(resolved.specs[1]?.nodes).toEqual({ desired: 2, min: 2, max: 2 });
    expect(resolved.options.selection).toBe("first");
    for (const pool of resolved.specs) {
      expect(pool.worker).toBe(resolved.options.worker);
      expect(pool.worker.concurrency).toBe(2);
    }
    expect(resolved.name).toBeUndefined();
  });

  it("resolves each spec with its own defaults", async () => {
    const resolved = await resolveComputeInput({ specs: [{ ttl: 0 }, { image: { bootstrapTimeout: 900 } }] });
    expect(resolved.specs.map((pool) => pool.ttl)).toEqual([0, 600]);
    expect(resolved.specs.map((pool) => pool.bootstrapTimeout)).toEqual([300, 900]);
    expect(resolved.options).toEqual(options());
  });

  it("is frozen", async () => {
    const resolved = await resolveComputeInput({ specs: [{}, {}] });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.specs)).toBe(true);
    expect(resolved.specs.every((pool) => Object.isFrozen(pool))).toBe(true);
  });
});

describe("named form (skyward.toml)", () => {
  let root: string;
  let home: string;
  let cwd: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "skyward-compute-"));
    home = join(root, "home");
    cwd = join(root, "project");
    await mkdir(join(home, ".skyward"), { recursive: true });
    const packageDir = join(cwd, "node_modules", "skyward-provider-fixture");
    await mkdir(packageDir, { recursive: true });
    await writeFile(
      join(packageDir, "package.json"),
      JSON.stringify({ name: "skyward-provider-fixture", type: "module", exports: "./index.js" }),
    );
    await writeFile(
      join(packageDir, "index.js"),
      `export function createProviderFromConfig(settings) {
  return {
    specificationVersion: "v1",
    name: "fixture",
    capabilities: { spot: false, volumes: false, images: false },
    settings,
    async offers() { return []; },
    async prepare() { throw new Error("not used"); },
    async provision() { return []; },
    async getInstance() { return null; },
    async terminate() {},
    async launchWorker() { throw new Error("not used"); },
    async teardown() {},
    selfDestruct() { return "true"; },
  };
}
`,
    );
    await writeFile(
      join(home, ".skyward", "defaults.toml"),
      `
[providers.fixture]
type = "fixture"
package = "skyward-provider-fixture"
region = "global-region"

[pools.train]
provider = "fixture"
nodes = 2

[pools.train.image]
pip = ["torch"]
`,
    );
    await writeFile(
      join(cwd, "skyward.toml"),
      `
[providers.fixture]
api_key_env = "FIXTURE_KEY"

[pools.train]
nodes = [2, 8]
accelerator = "A100-40GB"
ttl = 120

[pools.train.options]
provision_timeout = 100
ssh_timeout = 42
console = "log"

[pools.train.options.worker]
concurrency = 4
executor = "process"

[pools.bad]
nodes = 0
vcpus = -1

[pools.local]
nodes = 1
`,
    );
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("resolves the pool from both files with the provider from its package", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(resolved.name).toBe("train");
    expect(resolved.specs).toHaveLength(1);
    const pool = resolved.specs[0];
    expect(pool?.provider?.name).toBe("fixture");
    expect(settingsOf(pool?.provider)).toEqual({
      region: "global-region",
      apiKeyEnv: "FIXTURE_KEY",
    });
    expect(pool?.nodes).toEqual({ desired: 2, min: 2, max: 8 });
    expect(pool?.accelerator).toEqual(accelerators.A100({ memory: "40GB" }));
    expect(pool?.acceleratorMemoryGb).toBe(40);
    expect(pool?.image).toEqual(image({ pip: ["torch"] }));
    expect(pool?.ttl).toBe(120);
  });

  it("takes the options from [pools.NAME.options]", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(resolved.options).toEqual(
      options({
        provisionTimeout: 100,
        sshTimeout: 42,
        console: "log",
        worker: { concurrency: 4, executor: "process" },
      }),
    );
    expect(resolved.specs[0]).toMatchObject({
      provisionTimeout: 100,
      sshTimeout: 42,
      worker: { concurrency: 4, buffer: "auto", executor: "process", reuseProcesses: true },
    });
  });

  it("merges the code's options over the file's, the code winning, worker fields merged", async () => {
    const resolved = await resolveComputeInput({
      name: "train",
      config: { cwd, home },
      options: { provisionTimeout: 50, worker: { buffer: 2, concurrency: 8 }, retryOnInterruption: 7 },
    });
    expect(resolved.options).toMatchObject({
      provisionTimeout: 50,
      sshTimeout: 42,
      console: "log",
      retryOnInterruption: 7,
      worker: { concurrency: 8, buffer: 2, executor: "process", reuseProcesses: true },
    });
    expect(resolved.specs[0]?.provisionTimeout).toBe(50);
    expect(resolved.specs[0]?.worker).toEqual(resolved.options.worker);
  });

  it("keeps the file's value for an option the code leaves undefined", async () => {
    const resolved = await resolveComputeInput({
      name: "train",
      config: { cwd, home },
      options: { sshTimeout: undefined, worker: { concurrency: undefined } },
    });
    expect(resolved.options.sshTimeout).toBe(42);
    expect(resolved.options.worker.concurrency).toBe(4);
  });

  it("resolves a pool without a provider to the built-in Local (no provider)", async () => {
    const resolved = await resolveComputeInput({ name: "local", config: { cwd, home } });
    expect(resolved.specs[0]?.provider).toBeUndefined();
    expect(resolved.options).toEqual(options());
  });

  it("is frozen", async () => {
    const resolved = await resolveComputeInput({ name: "train", config: { cwd, home } });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.specs)).toBe(true);
    expect(Object.isFrozen(resolved.specs[0])).toBe(true);
    expect(Object.isFrozen(resolved.options)).toBe(true);
  });

  it("reports bad pool fields at pools.NAME paths", async () => {
    const issues = await issuesOf(resolveComputeInput({ name: "bad", config: { cwd, home } }));
    expect(issues.map((issue) => issue.path).sort()).toEqual(["pools.bad.nodes", "pools.bad.vcpus"]);
  });

  it.each([42, "fast", null, [1]])("rejects options %j instead of ignoring them", async (bad) => {
    const issues = await issuesOf(
      resolveComputeInput({ name: "train", config: { cwd, home }, options: bad as never }),
    );
    expect(issues.map((issue) => issue.path)).toEqual(["options"]);
  });

  it("reports an unknown pool name with the pools defined", async () => {
    const issues = await issuesOf(resolveComputeInput({ name: "trian", config: { cwd, home } }));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe("name");
    expect(issues[0]?.message).toContain('no pool named "trian"');
    expect(issues[0]?.message).toContain("(defined: train, bad, local)");
  });
});

describe("one worker per accelerator and the executor", () => {
  const perGpu = () => Plugin.create("per-gpu").withWorkersPerAccelerator();
  const input = (executor?: "auto" | "thread" | "process") => ({
    provider: fakeProvider("gpus"),
    accelerator: accelerators.A100({ count: 2 }),
    plugins: [perGpu()],
    options: executor === undefined ? {} : { worker: { executor } },
  });

  it('refuses an explicit executor: "thread", naming the option, instead of silently running processes', async () => {
    const issues = await issuesOf(resolveComputeInput(input("thread")));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe("options.worker.executor");
    expect(issues[0]?.message).toMatch(/plugin "per-gpu" runs one worker process per accelerator/);
    const several = await issuesOf(
      resolveComputeInput({
        specs: [
          {
            provider: fakeProvider("gpus"),
            accelerator: accelerators.A100({ count: 2 }),
            plugins: [perGpu()],
          },
        ],
        options: { worker: { executor: "thread" } },
      }),
    );
    expect(several.map((issue) => issue.path)).toEqual(["options.worker.executor"]);
  });

  it.each([undefined, "auto", "process"] as const)("accepts executor %s", async (executor) => {
    const resolved = await resolveComputeInput(input(executor));
    expect(resolved.specs[0]?.plugins.map((plugin) => plugin.name)).toEqual(["per-gpu"]);
  });
});
