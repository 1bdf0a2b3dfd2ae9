import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spec } from "@skyward/core";
import {
  type Cluster,
  collectBootstrapOps,
  isPlugin,
  Plugin,
  PluginError,
  pluginSchema,
  resolveWorkersPerNode,
  whyNotPlugin,
  workerModules,
} from "@skyward/core/contract";
import { configurationIssuesOf, runBootstrapScript } from "@skyward/testing";
import { afterAll, describe, expect, it } from "vitest";
import { mig, migInstancesPerGpu } from "./index.js";

const fakes = fileURLToPath(new URL("../test/fixtures/bin", import.meta.url));
const pluginPython = fileURLToPath(new URL("../python", import.meta.url));
const coreDirectory = dirname(createRequire(import.meta.url).resolve("@skyward/core/package.json"));
const scratch = mkdtempSync(join(tmpdir(), "skyward-mig-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function gpuCluster(name: string, memoryGb: number): Cluster {
  return {
    id: "cluster",
    provider: "fake",
    poolId: "pool",
    region: "here",
    spec: { acceleratorName: name, acceleratorCount: 1, acceleratorMemoryGb: memoryGb },
    offer: { accelerator: { name, count: 1, memoryGb } },
    ssh: null,
    specific: {},
  } as unknown as Cluster;
}

/** A fresh fake GPU: where the fake nvidia-smi keeps its state and records its calls. */
function fakeGpu(instances: readonly string[] = []): {
  state: string;
  record: string;
  env: Record<string, string>;
} {
  const directory = mkdtempSync(join(scratch, "gpu-"));
  const state = join(directory, "state.json");
  const record = join(directory, "calls.jsonl");
  if (instances.length > 0) writeFileSync(state, JSON.stringify({ mig: true, instances }));
  return {
    state,
    record,
    env: { PATH: `${fakes}:${process.env.PATH}`, FAKE_NVIDIA_STATE: state, FAKE_NVIDIA_RECORD: record },
  };
}

function callsOf(record: string): string[][] {
  if (!existsSync(record)) return [];
  return readFileSync(record, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as string[]);
}

/**
 * Runs the worker module's hook in a fresh Python process, as a worker (or executor subprocess) of
 * index `worker` would, and returns what it printed: the pinned CUDA_VISIBLE_DEVICES, or the error.
 */
function runHook(hook: "around_app" | "around_process", worker: number, env: Record<string, string>): string {
  const script = [
    "import os, sys",
    "from skyward import InstanceInfo",
    "import skyward_plugin_mig as plugin",
    "info = InstanceInfo(node=0, worker=int(sys.argv[2]), workers_per_node=2)",
    "config = {'profile': '3g.40gb', 'gpu': 0}",
    "try:",
    "    manager = getattr(plugin, sys.argv[1])(info, config)",
    "    assert manager is None",
    "    # A second entry (another task) does not move the process to another device.",
    "    plugin.pin(info.worker + 1, config)",
    "    print(os.environ['CUDA_VISIBLE_DEVICES'])",
    "except RuntimeError as error:",
    "    print('error:', error)",
  ].join("\n");
  const result = spawnSync("python3", ["-c", script, hook, String(worker)], {
    env: { ...process.env, ...env, PYTHONPATH: `${join(coreDirectory, "python")}:${pluginPython}` },
    encoding: "utf8",
  });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout.trim();
}

describe("mig(profile)", () => {
  it("refuses a malformed profile, naming the field", () => {
    expect(configurationIssuesOf(() => mig("3g40gb"))[0]?.path).toBe("mig.profile");
    expect(configurationIssuesOf(() => mig("9g.40gb"))[0]?.path).toBe("mig.profile");
    expect(configurationIssuesOf(() => mig("3g.40gb; reboot"))[0]?.message).toMatch(
      /expected a MIG profile like "3g.40gb"/,
    );
    expect(configurationIssuesOf(() => mig(3 as unknown as string))[0]?.path).toBe("mig.profile");
  });

  it("is a plugin a pool accepts, with a worker module that ships from this package", () => {
    const plugin = mig("3g.40gb");
    expect(whyNotPlugin(plugin)).toBeUndefined();
    expect(isPlugin(plugin)).toBe(true);
    expect(pluginSchema.safeParse(plugin).success).toBe(true);
    expect(plugin.name).toBe("mig");
    expect(plugin.profile).toBe("3g.40gb");
    const [module] = workerModules([plugin]);
    expect(module).toMatchObject({
      plugin: "mig",
      module: "skyward_plugin_mig",
      config: { profile: "3g.40gb", gpu: 0 },
    });
    expect(existsSync(module?.path ?? "")).toBe(true);
  });

  it("is a frozen plain object carrying its profile", () => {
    const plugin = mig("1g.10gb");
    expect(Object.getPrototypeOf(plugin)).toBe(Object.prototype);
    expect(Object.isFrozen(plugin)).toBe(true);
    expect(Object.isFrozen(plugin.worker)).toBe(true);
    expect({ ...plugin }).toMatchObject({ specificationVersion: "v1", name: "mig", profile: "1g.10gb" });
  });
});

describe("workers per node: the instances of the profile that fit the GPU", () => {
  it.each([
    ["3g.40gb", "A100", 80, 2],
    ["1g.10gb", "A100", 80, 7],
    ["1g.20gb", "A100", 80, 4],
    ["2g.20gb", "A100", 80, 3],
    ["4g.40gb", "A100", 80, 1],
    ["7g.80gb", "A100", 80, 1],
    ["1g.10gb+me", "A100", 80, 1],
    ["1g.5gb", "A100", 40, 7],
    ["1g.10gb", "A100", 40, 4],
    ["3g.20gb", "A100", 40, 2],
    ["3g.40gb", "H100", 80, 2],
    ["1g.12gb", "H100", 94, 7],
    ["3g.47gb", "H100", 94, 2],
    ["1g.18gb", "H200", 141, 7],
    ["1g.35gb", "H200", 141, 4],
    ["3g.71gb", "H200", 141, 2],
    ["1g.23gb", "B200", 180, 7],
    ["1g.6gb", "A30", 24, 4],
    ["2g.12gb", "A30", 24, 2],
    ["4g.24gb", "A30", 24, 1],
  ] as const)("%s on a %s %i GB → %i", (profile, name, memoryGb, expected) => {
    expect(migInstancesPerGpu(profile, { name, memoryGb })).toBe(expected);
    expect(mig(profile).workersPerNode({ cluster: gpuCluster(name, memoryGb) })).toBe(expected);
  });

  it("sets workers per node through the hook the pool reads, from the plugin a spec keeps", () => {
    const cluster = gpuCluster("A100", 80);
    const plugin = mig("3g.40gb");
    const { plugins } = spec({ plugins: [Plugin.create("other"), plugin] });
    expect(plugins[1]).toBe(plugin);
    expect(resolveWorkersPerNode(plugins, cluster)).toBe(2);
    expect(resolveWorkersPerNode([mig("1g.10gb")], cluster)).toBe(7);
  });

  it("refuses a profile that does not fit the GPU", () => {
    expect(
      configurationIssuesOf(() => migInstancesPerGpu("7g.80gb", { name: "A100", memoryGb: 40 }))[0]?.path,
    ).toBe("mig.profile");
    expect(
      configurationIssuesOf(() => migInstancesPerGpu("7g.24gb", { name: "A30", memoryGb: 24 }))[0]?.path,
    ).toBe("mig.profile");
  });

  it.each([
    ["1g.10gb", "T4", 16],
    ["1g.10gb", "L4", 24],
    ["1g.5gb", "A10G", 24],
    ["3g.40gb", "RTX_4090", 24],
    ["1g.6gb", "V100", 32],
    ["1g.10gb", "L40S", 48],
  ] as const)(
    "refuses %s on a %s (no MIG: nvidia-smi would refuse it at bootstrap), naming the accelerator",
    (profile, name, memoryGb) => {
      const [issue] = configurationIssuesOf(() =>
        mig(profile).workersPerNode({ cluster: gpuCluster(name, memoryGb) }),
      );
      expect(issue).toEqual({
        path: "accelerator",
        message: expect.stringMatching(
          new RegExp(`^expected a GPU with MIG \\(A100, .*\\) for mig\\("${profile}"\\), received ${name}`),
        ),
      });
    },
  );

  it("takes a GPU the catalog does not know at its word (nvidia-smi decides)", () => {
    expect(migInstancesPerGpu("1g.10gb", { name: "NVIDIA Future GPU", memoryGb: 80 })).toBe(7);
  });

  it("says so when the pool has no GPU to partition", () => {
    const cpuOnly = { spec: { acceleratorMemoryGb: 0 }, offer: { accelerator: null } } as unknown as Cluster;
    expect(() => mig("1g.10gb").workersPerNode({ cluster: cpuOnly })).toThrow(/needs GPU nodes/);
    try {
      collectBootstrapOps([mig("1g.10gb")], cpuOnly);
      expect.unreachable();
    } catch (error) {
      expect(PluginError.isInstance(error)).toBe(true);
      expect((error as PluginError).hook).toBe("bootstrap");
    }
  });
});

describe("the bootstrap op, run by the real bootstrap script against a fake nvidia-smi", () => {
  it("enables MIG on GPU 0 and creates one GPU instance per worker", () => {
    const gpu = fakeGpu();
    const run = runBootstrapScript({
      directory: scratch,
      pluginOps: collectBootstrapOps([mig("3g.40gb")], gpuCluster("A100", 80)),
      env: gpu.env,
    });
    expect(run.code, run.printed).toBe(0);
    expect(callsOf(gpu.record)).toEqual([
      ["-i", "0", "-mig", "1"],
      ["mig", "-i", "0", "-dci"],
      ["mig", "-i", "0", "-dgi"],
      ["mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb", "-C"],
      ["-L"],
    ]);
    expect(run.printed).toContain("mig: GPU 0 partitioned into 2 × 3g.40gb");
  });

  it("replaces the instances an earlier bootstrap left, instead of failing for lack of room", () => {
    const gpu = fakeGpu(["1g.10gb", "1g.10gb", "1g.10gb"]);
    const run = runBootstrapScript({
      directory: scratch,
      pluginOps: collectBootstrapOps([mig("1g.10gb")], gpuCluster("A100", 80)),
      env: gpu.env,
    });
    expect(run.code, run.printed).toBe(0);
    expect(JSON.parse(readFileSync(gpu.state, "utf8")).instances).toEqual(Array(7).fill("1g.10gb"));
  });

  it("fails the bootstrap when the devices did not appear", () => {
    const gpu = fakeGpu();
    const run = runBootstrapScript({
      directory: scratch,
      pluginOps: collectBootstrapOps([mig("3g.40gb")], gpuCluster("A100", 80)),
      env: { ...gpu.env, FAKE_NVIDIA_CREATE_NOTHING: "1" },
    });
    expect(run.code).not.toBe(0);
    expect(run.printed).toContain(
      "mig: expected 2 MIG devices after partitioning GPU 0, nvidia-smi -L lists 0",
    );
  });

  it("runs the GPU changes through $SKYWARD_SUDO", () => {
    const [op] = collectBootstrapOps([mig("3g.40gb")], gpuCluster("A100", 80));
    const gpu = fakeGpu();
    const sudo = join(scratch, "fake-sudo");
    writeFileSync(
      sudo,
      `#!/bin/bash\necho "sudo $*" >> ${JSON.stringify(join(scratch, "sudo.log"))}\nexec "$@"\n`,
      {
        mode: 0o755,
      },
    );
    const result = spawnSync("bash", ["-c", op ?? ""], {
      env: { ...process.env, ...gpu.env, SKYWARD_SUDO: sudo },
      encoding: "utf8",
    });
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(join(scratch, "sudo.log"), "utf8").trim().split("\n")).toEqual([
      "sudo nvidia-smi -i 0 -mig 1",
      "sudo nvidia-smi mig -i 0 -dci",
      "sudo nvidia-smi mig -i 0 -dgi",
      "sudo nvidia-smi mig -i 0 -cgi 3g.40gb,3g.40gb -C",
    ]);
  });
});

describe("the worker module, against a fake nvidia-smi", () => {
  const partitioned = fakeGpu(["3g.40gb", "3g.40gb"]);

  it("pins each worker to the MIG device of its index on GPU 0, by UUID", () => {
    expect(runHook("around_app", 0, partitioned.env)).toBe("MIG-00000000-0000-4000-8000-000000000000");
    expect(runHook("around_process", 1, partitioned.env)).toBe("MIG-00000000-0000-4000-8000-000000000001");
    expect(callsOf(partitioned.record)).toEqual([["-L"], ["-L"]]);
  });

  it("fails with a clear error for a worker without a device, or a GPU that was not partitioned", () => {
    expect(runHook("around_process", 2, partitioned.env)).toBe(
      "error: worker 2 has no MIG device: GPU 0 has 2 (3g.40gb), so a node can run workers 0 to 1",
    );
    expect(runHook("around_app", 0, fakeGpu().env)).toBe(
      "error: GPU 0 has no MIG devices (nvidia-smi -L lists none): was it partitioned into 3g.40gb instances at bootstrap?",
    );
  });
});
