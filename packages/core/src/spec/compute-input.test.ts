import { describe, expect, it } from "vitest";
import { Plugin } from "../contract/plugin.js";
import type { Provider } from "../contract/provider.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { accelerators } from "./accelerators.js";
import { validateComputeInput as resolveComputeInput } from "./compute-input.js";
import { DEFAULT_IMAGE, image } from "./image.js";
import { options } from "./options.js";
import { resolvePoolSpec, spec } from "./spec.js";

function fakeProvider(name: string): Provider {
  return {
    specificationVersion: "v1",
    name,
    capabilities: { spot: true },
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
