import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { ConfigurationError, image, options, PluginError, spec } from "@skyward/core";
import {
  applyImageTransforms,
  type Cluster,
  isPlugin,
  isWorkersPerAccelerator,
  type PluginV1,
  resolvePoolSpec,
  resolveWorkerLayout,
  workerModules,
} from "@skyward/core/contract";
import { configurationIssuesOf, fakeCluster, packedFiles } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { type TorchOptions, torch } from "./index.js";

const cluster = fakeCluster();

function transformed(plugin: PluginV1, base = image()) {
  return applyImageTransforms([plugin], base, cluster);
}

describe("torch()", () => {
  it("is a plugin named torch with its worker module shipped from the package", () => {
    const plugin = torch();
    expect(isPlugin(plugin)).toBe(true);
    expect(plugin.name).toBe("torch");
    // Its DDP rendezvous needs the nodes to reach one another: refused on providers without a network.
    expect(plugin.peerNetwork).toBe(true);
    expect(plugin.worker?.module).toBe("skyward_plugin_torch");
    expect(plugin.worker?.path).toBe(
      fileURLToPath(new URL("../python/skyward_plugin_torch.py", import.meta.url)),
    );
    expect(existsSync(plugin.worker?.path ?? "")).toBe(true);
    expect(workerModules([plugin])).toEqual([
      {
        plugin: "torch",
        module: "skyward_plugin_torch",
        path: plugin.worker?.path,
        config: { backend: null, per_worker: false },
      },
    ]);
    expect(plugin.worker?.config).toEqual({ backend: null, per_worker: false });
    expect(torch({ backend: "gloo" }).worker?.config).toEqual({ backend: "gloo", per_worker: false });
    expect(torch({ backend: "nccl" }).worker?.config).toEqual({ backend: "nccl", per_worker: false });
    // One node, one worker, unless asked for one per accelerator.
    expect(plugin.workersPerNode).toBeUndefined();
  });

  it("perAccelerator: one worker per accelerator, each a rank of its own", () => {
    const plugin = torch({ perAccelerator: true });
    expect(plugin.worker?.config).toEqual({ backend: null, per_worker: true });
    expect(isWorkersPerAccelerator(plugin.workersPerNode)).toBe(true);
    const sized = (count: number) =>
      ({
        offer: { accelerator: count > 0 ? { name: "H100", count, memoryGb: 80 } : null },
        spec: { acceleratorCount: count },
      }) as unknown as Cluster;
    expect(plugin.workersPerNode?.({ cluster: sized(8) })).toBe(8);
    expect(() => plugin.workersPerNode?.({ cluster: sized(0) })).toThrow(
      /one worker per accelerator needs nodes with accelerators/,
    );
    expect(() => torch({ perAccelerator: "yes" as unknown as boolean })).toThrow(
      /perAccelerator: expected true or false, received "yes"/,
    );
    // Which devices each worker sees: only its own (pinned) by default, or all of them.
    expect(resolveWorkerLayout([plugin], sized(4)).pinAccelerators).toBe(true);
    const all = torch({ perAccelerator: true, visibleDevices: "all" });
    expect(resolveWorkerLayout([all], sized(4))).toMatchObject({ workersPerNode: 4, pinAccelerators: false });
    expect(configurationIssuesOf(() => torch({ visibleDevices: "all" }))).toEqual([
      {
        path: "visibleDevices",
        message: "expected perAccelerator: true with it (each node runs one worker then)",
      },
    ]);
    expect(
      configurationIssuesOf(() => torch({ perAccelerator: true, visibleDevices: "some" as "all" }))[0]?.path,
    ).toBe("visibleDevices");
  });

  it("the worker module defines around_app", () => {
    const source = readFileSync(torch().worker?.path ?? "", "utf8");
    expect(source).toMatch(/^def around_app\(info: Any, config: Mapping\[str, Any\]\)/m);
  });

  it("adds torch from the cu128 wheel index by default, keeping what the image had", async () => {
    const base = image({ pip: ["numpy"], env: { A: "1" } });
    const result = await transformed(torch(), base);
    expect(result.pip).toEqual(["numpy", "torch"]);
    expect(result.pipIndexes).toEqual([
      { url: "https://download.pytorch.org/whl/cu128", packages: ["torch"] },
    ]);
    expect(result.env).toEqual({ A: "1" });
    expect(base.pip).toEqual(["numpy"]);
  });

  it.each([
    ["cu126", "https://download.pytorch.org/whl/cu126"],
    ["cu124", "https://download.pytorch.org/whl/cu124"],
    ["cu121", "https://download.pytorch.org/whl/cu121"],
    ["cpu", "https://download.pytorch.org/whl/cpu"],
  ] as const)("routes torch to the %s index", async (cuda, url) => {
    const result = await transformed(torch({ cuda }));
    expect(result.pipIndexes).toEqual([{ url, packages: ["torch"] }]);
  });

  it("pins versions and adds torchvision / torchaudio to the same index", async () => {
    const result = await transformed(torch({ version: "2.7.1", vision: "0.22.1", audio: true, cuda: "cpu" }));
    expect(result.pip).toEqual(["torch==2.7.1", "torchvision==0.22.1", "torchaudio"]);
    expect(result.pipIndexes).toEqual([
      { url: "https://download.pytorch.org/whl/cpu", packages: ["torch", "torchvision", "torchaudio"] },
    ]);
    const specified = await transformed(torch({ version: ">=2.4, <2.8", vision: true }));
    expect(specified.pip).toEqual(["torch>=2.4,<2.8", "torchvision"]);
    expect(specified.pipIndexes[0]?.packages).toEqual(["torch", "torchvision"]);
    const local = await transformed(torch({ version: "2.7.1+cu128" }));
    expect(local.pip).toEqual(["torch==2.7.1+cu128"]);
  });

  it("leaves out torchvision and torchaudio when false", async () => {
    const result = await transformed(torch({ vision: false, audio: false }));
    expect(result.pip).toEqual(["torch"]);
  });

  it("does not add the same requirement or index twice when applied twice", async () => {
    const plugin = torch({ vision: true });
    const once = await transformed(plugin);
    const twice = await transformed(plugin, once);
    expect(twice.pip).toEqual(once.pip);
    expect(twice.pipIndexes).toEqual(once.pipIndexes);
  });

  it.each<[unknown, string, RegExp]>([
    [{ backend: "mpi" }, "backend", /expected one of "nccl", "gloo", received "mpi"/],
    [
      { cuda: "cu118" },
      "cuda",
      /expected one of "cu128", "cu126", "cu124", "cu121", "cpu", received "cu118"/,
    ],
    [{ version: "newest" }, "version", /expected "latest", a version like "2.7.1".*received "newest"/],
    [{ version: 2 }, "version", /expected a version string, received number/],
    [{ vision: "yes please" }, "vision", /received "yes please"/],
    [{ audio: 1 }, "audio", /expected true, false or a version string, received number/],
    [{ gpu: true }, "gpu", /unknown field/],
    ["gloo", "", /expected an options object, received "gloo"/],
  ])("rejects %j naming the field", (input, path, message) => {
    const issues = configurationIssuesOf(() => torch(input as TorchOptions));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe(path);
    expect(issues[0]?.message).toMatch(message);
  });

  it("reports every bad field at once", () => {
    const issues = configurationIssuesOf(() => torch({ backend: "x", cuda: "y" } as unknown as TorchOptions));
    expect(issues.map((issue) => issue.path).sort()).toEqual(["backend", "cuda"]);
  });
});

describe("torch() and the process executor", () => {
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

  // The group is joined in the node's worker process; under the process executor the tasks run in
  // its children, where no group exists ("Default process group has not been initialized").
  it("one rank per node is refused under executor: 'process' before any node starts, naming the option", async () => {
    const error = await refusal(torch(), { executor: "process" });
    expect(PluginError.isInstance(error)).toBe(true);
    const cause = (error as PluginError).cause;
    expect(ConfigurationError.isInstance(cause)).toBe(true);
    expect((cause as ConfigurationError).issues).toEqual([
      {
        path: "options.worker.executor",
        message: expect.stringMatching(
          /^expected "thread" with torch\(\) \(the node's worker process is its rank\).*perAccelerator: true/,
        ),
      },
    ]);
  });

  it("is accepted under the thread executor, and with perAccelerator (each child a rank)", async () => {
    expect(await refusal(torch(), { executor: "thread", concurrency: 4 })).toBeUndefined();
    expect(await refusal(torch({ perAccelerator: true }), { executor: "process" })).toBeUndefined();
  });
});

describe("torch() on an elastic pool", () => {
  // A group has a fixed size: a node joining later (autoscaling) inits with a WORLD_SIZE the group
  // formed before it never had — seen on 2 Local nodes [1, 2]: gloo's "enforce fail … address.cc".
  it("is refused before any node starts, naming nodes", async () => {
    for (const nodes of [[1, 4], sky.nodes({ desired: 4, min: 2 })] as const) {
      const poolSpec = resolvePoolSpec(spec({ nodes, plugins: [torch()] }), options());
      const error = await applyImageTransforms(
        [torch()],
        poolSpec.image,
        fakeCluster({ spec: poolSpec }),
      ).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(PluginError.isInstance(error)).toBe(true);
      expect(((error as PluginError).cause as ConfigurationError).issues).toEqual([
        { path: "nodes", message: expect.stringMatching(/^expected a fixed node count with torch\(\)/) },
      ]);
    }
  });

  it("is accepted on a fixed node count", async () => {
    const poolSpec = resolvePoolSpec(spec({ nodes: 3, plugins: [torch()] }), options());
    await expect(
      applyImageTransforms([torch()], poolSpec.image, fakeCluster({ spec: poolSpec })),
    ).resolves.toBeDefined();
  });
});

describe("the package", () => {
  const root = fileURLToPath(new URL("..", import.meta.url));

  it("ships the worker module in its tarball, and no tests", () => {
    const files = packedFiles(root);
    expect(files).toContain("python/skyward_plugin_torch.py");
    expect(files).toContain("src/index.ts");
    expect(files.filter((file) => file.includes(".test.") || file.startsWith("test/"))).toEqual([]);
  }, 60_000); // `pnpm pack` in a child process: more than the default 5 s on a busy machine

  it("depends on @skyward/core as a peer", () => {
    const manifest = JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
      peerDependencies: Record<string, string>;
    };
    expect(manifest.peerDependencies["@skyward/core"]).toBe("workspace:>=0.1.0 <1.0.0");
  });
});
