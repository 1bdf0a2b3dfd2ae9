import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { accelerators, image, options, PluginError, spec } from "@skyward/core";
import {
  applyLaunchers,
  type Cluster,
  collectBootstrapOps,
  isWorkersPerAccelerator,
  LaunchCommand,
  type LaunchContext,
  type Offer,
  Plugin,
  resolvePoolSpec,
} from "@skyward/core/contract";
import { configurationIssuesOf, packedFiles, requirePrerequisite } from "@skyward/testing";
import { afterAll, describe, expect, it } from "vitest";
import { type AccelerateConfig, accelerate, inferDistributedType } from "./index.js";

const scratch = mkdtempSync(join(tmpdir(), "skyward-accelerate-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function clusterOf(nodes: number | [number, number], gpus: number): Cluster {
  const poolSpec = resolvePoolSpec(
    spec(gpus > 0 ? { nodes, accelerator: accelerators.A100({ count: gpus }) } : { nodes }),
    options(),
  );
  const offer: Offer = {
    id: "offer",
    provider: "fake",
    instanceType: "fake",
    accelerator: gpus > 0 ? { name: "A100", count: gpus, memoryGb: 80 } : null,
    vcpus: 8,
    memoryGb: 32,
    architecture: "x86_64",
    region: "here",
    spotPrice: null,
    onDemandPrice: 1,
    pricesAsOf: "2025-01-01",
    specific: {},
  };
  return {
    id: "cluster",
    provider: "fake",
    poolId: "pool",
    region: "here",
    spec: poolSpec,
    offer,
    ssh: null,
    specific: {},
  };
}

function contextOf(nodeId: number, numNodes: number, venvDir: string): LaunchContext {
  return {
    nodeId,
    numNodes,
    headAddr: "10.0.0.2",
    headPort: 29500,
    privateIp: `10.0.0.${nodeId + 2}`,
    pythonBin: `${venvDir}/bin/python`,
    venvDir,
    concurrency: 1,
    executor: "thread",
    workersPerNode: 1,
  };
}

function workerCommand(context: LaunchContext): LaunchCommand {
  return LaunchCommand.create({
    launcher: context.pythonBin,
    entrypoint: "/opt/skyward/runtime/skyward_worker.py",
    args: ["--node", String(context.nodeId), "--self-destruct", "sudo shutdown -h now"],
  });
}

/** Runs the plugin's bootstrap ops as the bootstrap script's plugins phase does: `bash -c op`. */
function runBootstrapOps(config: AccelerateConfig, cluster: Cluster, root: string): void {
  mkdirSync(root, { recursive: true });
  for (const op of collectBootstrapOps([accelerate(config)], cluster)) {
    execFileSync("bash", ["-c", op], { env: { ...process.env, SKYWARD_ROOT: root }, stdio: "pipe" });
  }
}

/** The argv the rendered launch line stands for, as a real `sh` splits it (words, quotes removed). */
function argvOf(command: LaunchCommand): string[] {
  const argvFile = join(scratch, "argv");
  execFileSync("/bin/sh", ["-c", `set -- ${command.render()}; printf '%s\\0' "$@" > "$ARGV_FILE"`], {
    env: { ...process.env, ARGV_FILE: argvFile },
  });
  return readFileSync(argvFile, "utf8").split("\0").slice(0, -1);
}

describe("accelerate() settings", () => {
  it("refuses bad settings with a ConfigurationError naming the field", () => {
    expect(configurationIssuesOf(() => accelerate({ mixed_precision: "fp32" as "fp16" }))[0]?.path).toBe(
      "accelerate.mixed_precision",
    );
    expect(configurationIssuesOf(() => accelerate({ num_processes: 0 }))).toEqual([
      { path: "accelerate.num_processes", message: "expected a positive whole number" },
    ]);
    expect(configurationIssuesOf(() => accelerate({ num_cpu_threads_per_process: 1.5 }))[0]?.path).toBe(
      "accelerate.num_cpu_threads_per_process",
    );
    expect(configurationIssuesOf(() => accelerate({ gpu_ids: "0;reboot" }))[0]).toEqual({
      path: "accelerate.gpu_ids",
      message: 'expected "all" or comma-separated GPU indexes like "0,1"',
    });
    expect(configurationIssuesOf(() => accelerate({ distributed_type: "SOMETHING" as "NO" }))[0]?.path).toBe(
      "accelerate.distributed_type",
    );
    expect(configurationIssuesOf(() => accelerate({ fsdp: {}, deepspeed: {} }))).toEqual([
      { path: "accelerate.deepspeed", message: "expected either fsdp or deepspeed, not both" },
    ]);
    expect(
      configurationIssuesOf(() =>
        accelerate({ fsdp: "FULL_SHARD" as unknown as { [key: string]: string } }),
      )[0],
    ).toEqual({ path: "accelerate.fsdp", message: "expected an object of FSDP settings" });
    expect(configurationIssuesOf(() => accelerate({ num_machines: 2 } as AccelerateConfig))).toEqual([
      { path: "accelerate.num_machines", message: "unknown field" },
    ]);
  });

  it("adds accelerate to the image's pip packages", async () => {
    const plugin = accelerate();
    expect(plugin.name).toBe("accelerate");
    const transformed = await plugin.transform?.({
      image: image({ pip: ["numpy"] }),
      cluster: clusterOf(1, 0),
    });
    expect(transformed?.pip).toEqual(["numpy", "accelerate"]);
  });
});

describe("the package", () => {
  it("ships the worker module in its tarball, and no tests", () => {
    const files = packedFiles(fileURLToPath(new URL("..", import.meta.url)));
    expect(files).toContain("python/skyward_plugin_accelerate.py");
    expect(files.filter((file) => file.includes(".test.") || file.startsWith("test/"))).toEqual([]);
  });
});

describe("inferDistributedType", () => {
  it.each([
    [{}, 1, 0, "NO"],
    [{}, 1, 1, "NO"],
    [{}, 2, 0, "MULTI_CPU"],
    [{}, 2, 8, "MULTI_GPU"],
    [{ num_processes: 2 }, 1, 0, "MULTI_CPU"],
    [{ fsdp: { sharding_strategy: "FULL_SHARD" } }, 1, 1, "FSDP"],
    [{ deepspeed: { zero_stage: 2 } }, 4, 1, "DEEPSPEED"],
    [{ distributed_type: "MULTI_GPU", fsdp: {} }, 2, 1, "MULTI_GPU"],
    [{ distributed_type: "NO" }, 4, 1, "NO"],
  ] as const)("%j on %i nodes with %i GPUs each → %s", (config, nodes, gpus, expected) => {
    expect(inferDistributedType(config, nodes, gpus)).toBe(expected);
  });
});

describe("the config file written at bootstrap", () => {
  it("holds the typed settings in accelerate's structure, with the inferred distributed type", () => {
    const root = join(scratch, "root-gpu");
    runBootstrapOps(
      {
        mixed_precision: "bf16",
        gpu_ids: "all",
        same_network: true,
        debug: false,
        downcast_bf16: true,
        rdzv_backend: "c10d",
        fsdp: { sharding_strategy: "FULL_SHARD", fsdp_offload_params: false, min_num_params: 1000 },
      },
      clusterOf(2, 4),
      root,
    );
    expect(JSON.parse(readFileSync(join(root, "accelerate.json"), "utf8"))).toEqual({
      compute_environment: "LOCAL_MACHINE",
      distributed_type: "FSDP",
      mixed_precision: "bf16",
      use_cpu: false,
      num_processes: 2,
      debug: false,
      downcast_bf16: true,
      gpu_ids: "all",
      same_network: true,
      rdzv_backend: "c10d",
      fsdp_config: { sharding_strategy: "FULL_SHARD", fsdp_offload_params: false, min_num_params: 1000 },
    });
  });

  it("infers MULTI_CPU for several CPU nodes, DEEPSPEED from its settings", () => {
    const many = join(scratch, "root-cpu");
    runBootstrapOps({}, clusterOf(3, 0), many);
    expect(JSON.parse(readFileSync(join(many, "accelerate.json"), "utf8"))).toEqual({
      compute_environment: "LOCAL_MACHINE",
      distributed_type: "MULTI_CPU",
      mixed_precision: "no",
      use_cpu: true,
      num_processes: 3,
    });
    const one = join(scratch, "root-one");
    runBootstrapOps({ deepspeed: { zero_stage: 3 } }, clusterOf(1, 1), one);
    expect(JSON.parse(readFileSync(join(one, "accelerate.json"), "utf8"))).toMatchObject({
      distributed_type: "DEEPSPEED",
      deepspeed_config: { zero_stage: 3 },
    });
  });

  it("carries any value byte-for-byte: quotes, $(…), backticks and newlines are not run by the shell", () => {
    const root = join(scratch, "root-quoting");
    const marker = join(scratch, "pwned");
    const nasty = `it's "$(touch ${marker})" \`touch ${marker}\` $HOME\nEOF\n'`;
    runBootstrapOps({ deepspeed: { deepspeed_config_file: nasty } }, clusterOf(2, 1), root);
    const written = JSON.parse(readFileSync(join(root, "accelerate.json"), "utf8"));
    expect(written.deepspeed_config.deepspeed_config_file).toBe(nasty);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(root, "accelerate.json.next"))).toBe(false);
  });

  it("fails the op clearly when the bootstrap gives no Skyward root", () => {
    const [op] = collectBootstrapOps([accelerate()], clusterOf(1, 0));
    const environment = { ...process.env };
    delete environment.SKYWARD_ROOT;
    expect(() => execFileSync("bash", ["-c", op ?? ""], { env: environment, stdio: "pipe" })).toThrow(
      /SKYWARD_ROOT/,
    );
  });
});

describe("the launcher", () => {
  it("wraps the worker with accelerate launch: the exact argv for node 0 and node 1 of 2", () => {
    const venv = join(scratch, "venv one");
    const plugin = accelerate({ num_cpu_threads_per_process: 4 });
    for (const nodeId of [0, 1]) {
      const context = contextOf(nodeId, 2, venv);
      const command = applyLaunchers([plugin], workerCommand(context), context);
      expect(argvOf(command)).toEqual([
        "env",
        `RANK=${nodeId}`,
        "WORLD_SIZE=2",
        "LOCAL_RANK=0",
        "LOCAL_WORLD_SIZE=1",
        join(venv, "bin", "python"),
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        join(scratch, "accelerate.json"),
        "--num_machines",
        "2",
        "--machine_rank",
        String(nodeId),
        "--main_process_ip",
        "10.0.0.2",
        "--main_process_port",
        "29500",
        "--num_processes",
        "2",
        "--num_cpu_threads_per_process",
        "4",
        "/opt/skyward/runtime/skyward_worker.py",
        "--node",
        String(nodeId),
        "--self-destruct",
        "sudo shutdown -h now",
      ]);
    }
  });

  it("sets the rank variables accelerate's multi-CPU mode reads", () => {
    const venv = join(scratch, "venv-env");
    mkdirSync(join(venv, "bin"), { recursive: true });
    writeFileSync(join(venv, "bin", "python"), '#!/bin/bash\nenv > "$ARGV_FILE"\n');
    chmodSync(join(venv, "bin", "python"), 0o755);
    const context = contextOf(1, 3, venv);
    const command = applyLaunchers([accelerate()], workerCommand(context), context);
    const argvFile = join(scratch, "env-1");
    execFileSync("/bin/sh", ["-c", `exec ${command.render()}`], {
      env: { ...process.env, ARGV_FILE: argvFile },
    });
    const environment = readFileSync(argvFile, "utf8").split("\n");
    expect(environment).toEqual(
      expect.arrayContaining(["RANK=1", "WORLD_SIZE=3", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1"]),
    );
  });

  it("quotes the paths it puts on the command line", () => {
    const venv = join(scratch, "it's $(here) *", "venv");
    const context = contextOf(0, 1, venv);
    const command = applyLaunchers([accelerate()], workerCommand(context), context);
    const argv = argvOf(command);
    expect(argv.slice(0, 5)).toEqual([
      join(venv, "bin", "python"),
      "-m",
      "accelerate.commands.launch",
      "--config_file",
      join(scratch, "it's $(here) *", "accelerate.json"),
    ]);
  });

  it("refuses what Skyward cannot run, with an error naming the plugin and the hook", () => {
    const context = contextOf(0, 2, "/opt/skyward/venv");
    const failure = (plugins: Parameters<typeof applyLaunchers>[0], command = workerCommand(context)) => {
      try {
        applyLaunchers(plugins, command, context);
      } catch (error) {
        expect(PluginError.isInstance(error)).toBe(true);
        expect((error as PluginError).plugin).toBe("accelerate");
        expect((error as PluginError).hook).toBe("launcher");
        return (error as Error).message;
      }
      throw new Error("expected a PluginError");
    };
    expect(failure([accelerate({ num_processes: 4 })])).toMatch(/num_processes is 4 across 2 nodes/);
    expect(
      failure([accelerate()], workerCommand(context).with({ launcher: "torchrun --nproc-per-node 8" })),
    ).toMatch(/already launched with "torchrun --nproc-per-node 8"/);
    expect(() =>
      applyLaunchers([accelerate()], workerCommand(context), {
        ...context,
        venvDir: "",
        pythonBin: "python3",
      }),
    ).toThrow(/virtual environment/);
  });
});

/** A virtual environment with the real accelerate, over Debian's python3-torch, or why there is none. */
function realAccelerate(): { python: string } | { skip: string } {
  const base = "/usr/bin/python3";
  try {
    execFileSync(base, ["-c", "import torch"], { stdio: "pipe" });
  } catch {
    return { skip: "no PyTorch for /usr/bin/python3 (apt-get install python3-torch)" };
  }
  const venv = join(tmpdir(), "skyward-accelerate-e2e", "venv-0.31");
  const python = join(venv, "bin", "python");
  try {
    execFileSync(python, ["-c", "import accelerate.commands.launch"], { stdio: "pipe" });
    return { python };
  } catch {
    // Not there yet: make it.
  }
  try {
    rmSync(venv, { recursive: true, force: true });
    execFileSync(base, ["-m", "venv", "--system-site-packages", venv], { stdio: "pipe" });
    // Debian's torch is 1.13: accelerate 1.x needs torch >= 2, and from 0.32 on it calls
    // torch.cpu.device_count(), which 1.13 lacks.
    execFileSync(
      python,
      ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "accelerate<0.32"],
      {
        stdio: "pipe",
        timeout: 300_000,
      },
    );
    execFileSync(python, ["-c", "import accelerate.commands.launch"], { stdio: "pipe" });
    return { python };
  } catch (error) {
    return { skip: `could not install accelerate: ${(error as Error).message.split("\n")[0]}` };
  }
}

const real = realAccelerate();
// CI must run the real accelerate launch, not skip it quietly.
const skipReason = requirePrerequisite(
  "skip" in real ? real.skip : undefined,
  "the real accelerate for the accelerate plugin's tests",
);
if (skipReason) console.warn(`accelerate end-to-end tests skipped: ${skipReason}`);

describe.skipIf(skipReason !== undefined)("under the real accelerate launch", () => {
  const entrypoint = join(scratch, "entry.py");
  writeFileSync(
    entrypoint,
    [
      "import json, os, sys",
      "from accelerate import PartialState",
      "state = PartialState()",
      "print(json.dumps({",
      '  "argv": sys.argv[1:],',
      '  "process_index": state.process_index,',
      '  "num_processes": state.num_processes,',
      '  "distributed_type": str(state.distributed_type),',
      '  "mixed_precision": os.environ.get("ACCELERATE_MIXED_PRECISION"),',
      '  "use_cpu": os.environ.get("ACCELERATE_USE_CPU"),',
      "}))",
      "",
    ].join("\n"),
  );

  /** Starts one node's "worker" (the entry script) with the plugin's launcher, as the pool would. */
  function launch(config: AccelerateConfig, nodeId: number, numNodes: number, port: number): Promise<string> {
    const python = (real as { python: string }).python;
    const venvDir = join(python, "..", "..");
    const context: LaunchContext = {
      ...contextOf(nodeId, numNodes, venvDir),
      pythonBin: python,
      headAddr: "127.0.0.1",
      headPort: port,
    };
    const command = applyLaunchers(
      [accelerate(config)],
      LaunchCommand.create({ launcher: python, entrypoint, args: ["--node", String(nodeId)] }),
      context,
    );
    return new Promise((resolve, reject) => {
      const child = spawn("/bin/sh", ["-c", `exec ${command.render()}`], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
      });
      child.stderr.on("data", (chunk) => {
        stderr += chunk;
      });
      child.on("exit", (code) =>
        code === 0 ? resolve(stdout) : reject(new Error(`exit ${code}: ${stderr.slice(-2000)}`)),
      );
    });
  }

  /** A port nothing listens on now, for the head's rendezvous. */
  function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
      });
    });
  }

  function lastJson(output: string): Record<string, unknown> {
    const line = output.trim().split("\n").at(-1) ?? "";
    return JSON.parse(line) as Record<string, unknown>;
  }

  it("runs the worker under accelerate launch on one node, with the configured mixed precision", async () => {
    const python = (real as { python: string }).python;
    runBootstrapOps({ mixed_precision: "fp16" }, clusterOf(1, 0), join(python, "..", "..", ".."));
    const result = lastJson(await launch({ mixed_precision: "fp16" }, 0, 1, await freePort()));
    expect(result).toMatchObject({
      argv: ["--node", "0"],
      process_index: 0,
      num_processes: 1,
      mixed_precision: "fp16",
      use_cpu: "True",
    });
  });

  it("forms one process group across two nodes (multi-CPU over gloo on loopback)", async () => {
    const python = (real as { python: string }).python;
    runBootstrapOps({}, clusterOf(2, 0), join(python, "..", "..", ".."));
    const port = await freePort();
    const [head, other] = await Promise.all([launch({}, 0, 2, port), launch({}, 1, 2, port)]);
    expect(lastJson(head ?? "")).toMatchObject({
      argv: ["--node", "0"],
      process_index: 0,
      num_processes: 2,
      distributed_type: "DistributedType.MULTI_CPU",
    });
    expect(lastJson(other ?? "")).toMatchObject({
      argv: ["--node", "1"],
      process_index: 1,
      num_processes: 2,
    });
  }, 180_000);
});

describe("one process per accelerator", () => {
  const perAccelerator = { perAccelerator: true } as const;

  it("runs as many workers per node as the node has accelerators, and checks num_processes against them", async () => {
    const plugin = accelerate({ num_processes: 16 }, perAccelerator);
    expect(isWorkersPerAccelerator(plugin.workersPerNode)).toBe(true);
    expect(plugin.workersPerNode?.({ cluster: clusterOf(2, 8) })).toBe(8);
    expect(accelerate({}, perAccelerator).workersPerNode?.({ cluster: clusterOf(3, 2) })).toBe(2);
    expect(configurationIssuesOf(() => plugin.workersPerNode?.({ cluster: clusterOf(2, 4) }))).toEqual([
      {
        path: "accelerate.num_processes",
        message: "expected 8 (2 nodes × 4 accelerators, one process per accelerator), received 16",
      },
    ]);
    expect(() => plugin.workersPerNode?.({ cluster: clusterOf(2, 0) })).toThrow(
      /needs nodes with accelerators/,
    );
    // An elastic pool is refused with it too (when the plugin sees the pool, before any node starts).
    const elastic = (async () =>
      accelerate({}, perAccelerator).transform?.({ image: image(), cluster: clusterOf([1, 2], 2) }))();
    await expect(elastic).rejects.toMatchObject({
      issues: [
        { path: "nodes", message: expect.stringMatching(/^accelerate runs a fixed number of machines/) },
      ],
    });
    // One per node, as before, unless asked.
    expect(accelerate({ num_processes: 2 }).workersPerNode).toBeUndefined();
  });

  it("checks num_processes against the workers another plugin decides (MIG: one per instance) before any node starts", async () => {
    // Two workers per node, as mig("3g.40gb") gives an A100 80GB: the one plugin setting its own count.
    const instances = Plugin.create("instances").withWorkersPerNode(() => 2);
    const transformOn = (plugin: ReturnType<typeof accelerate>) => {
      const cluster = clusterOf(2, 1);
      const withPlugins = { ...cluster, spec: { ...cluster.spec, plugins: [instances, plugin] } };
      return (async () => plugin.transform?.({ image: image(), cluster: withPlugins }))();
    };
    await expect(transformOn(accelerate({ num_processes: 2 }, perAccelerator))).rejects.toMatchObject({
      issues: [
        {
          path: "accelerate.num_processes",
          message: "expected 4 (2 nodes × 2 workers per node, one process per worker), received 2",
        },
      ],
    });
    await expect(transformOn(accelerate({ num_processes: 4 }, perAccelerator))).resolves.toBeDefined();
  });

  it("refuses what it does not run, naming the field, when the plugin is made", () => {
    expect(configurationIssuesOf(() => accelerate({ deepspeed: { zero_stage: 2 } }, perAccelerator))).toEqual(
      [
        {
          path: "accelerate.deepspeed",
          message:
            "one process per accelerator runs MULTI_GPU, MULTI_CPU or FSDP for now, received deepspeed settings",
        },
      ],
    );
    expect(() => accelerate({ fsdp: { sharding_strategy: "FULL_SHARD" } }, perAccelerator)).not.toThrow();
    // accelerate's single-process launcher (the node's, with one process per accelerator) sets
    // CUDA_VISIBLE_DEVICES to gpu_ids, which every device process inherits, while Skyward starts one
    // per accelerator of the node: those past the listed GPUs found no device of their own.
    expect(configurationIssuesOf(() => accelerate({ gpu_ids: "0,1" }, perAccelerator))).toEqual([
      {
        path: "accelerate.gpu_ids",
        message:
          'expected "all" with one process per accelerator (a process runs on every accelerator of each node), received "0,1"',
      },
    ]);
    expect(() => accelerate({ gpu_ids: "all" }, perAccelerator)).not.toThrow();
    expect(() => accelerate({ gpu_ids: "0,1" })).not.toThrow();
    expect(
      configurationIssuesOf(() => accelerate({ distributed_type: "XLA" }, perAccelerator))[0]?.path,
    ).toBe("accelerate.distributed_type");
    expect(
      configurationIssuesOf(() =>
        accelerate({}, { perAccelerator: "yes" } as unknown as { perAccelerator: boolean }),
      ),
    ).toEqual([{ path: "accelerate options.perAccelerator", message: "expected true or false" }]);
  });

  it("launches each node's worker with the totals and no rank of its own: each process sets its own", () => {
    const venv = join(scratch, "venv-per-accelerator");
    for (const nodeId of [0, 1]) {
      const context = { ...contextOf(nodeId, 2, venv), workersPerNode: 8, executor: "process" as const };
      const argv = argvOf(applyLaunchers([accelerate({}, perAccelerator)], workerCommand(context), context));
      // No rank variables: each process sets its own. The real config's path, for the worker module.
      expect(argv.slice(0, 3)).toEqual([
        "env",
        `SKYWARD_ACCELERATE_CONFIG=${join(scratch, "accelerate.json")}`,
        join(venv, "bin", "python"),
      ]);
      const flag = (name: string) => argv[argv.indexOf(name) + 1];
      expect(flag("--config_file")).toBe(join(scratch, "accelerate-launch.json"));
      expect([flag("--num_machines"), flag("--machine_rank"), flag("--num_processes")]).toEqual([
        "2",
        String(nodeId),
        "16",
      ]);
    }
    const context = { ...contextOf(0, 2, venv), workersPerNode: 8 };
    expect(() =>
      applyLaunchers([accelerate({ num_processes: 4 }, perAccelerator)], workerCommand(context), context),
    ).toThrow(/num_processes is 4, but 2 nodes × 8 accelerators run 16 processes, one per accelerator/);
  });

  it("writes the real config, and the one accelerate's single-process launcher needs, on each node", () => {
    const root = join(scratch, "per-accelerator-root");
    const gpu = join(root, "gpu");
    const fsdp = { sharding_strategy: "FULL_SHARD" };
    for (const op of collectBootstrapOps(
      [accelerate({ mixed_precision: "bf16", fsdp }, perAccelerator)],
      clusterOf(2, 8),
    )) {
      mkdirSync(gpu, { recursive: true });
      execFileSync("bash", ["-c", op], { env: { ...process.env, SKYWARD_ROOT: gpu } });
    }
    const real = JSON.parse(readFileSync(join(gpu, "accelerate.json"), "utf8"));
    expect(real).toMatchObject({
      distributed_type: "FSDP",
      mixed_precision: "bf16",
      use_cpu: false,
      num_processes: 16,
      fsdp_config: fsdp,
    });
    // The node's launcher starts one process (its worker): NO, and no FSDP settings (those reach the
    // device processes through the environment).
    const { fsdp_config: _, ...launched } = real;
    expect(JSON.parse(readFileSync(join(gpu, "accelerate-launch.json"), "utf8"))).toEqual({
      ...launched,
      distributed_type: "NO",
    });
    const cpu = join(root, "cpu");
    mkdirSync(cpu, { recursive: true });
    for (const op of collectBootstrapOps(
      [accelerate({ distributed_type: "MULTI_CPU" }, perAccelerator)],
      clusterOf(2, 2),
    )) {
      execFileSync("bash", ["-c", op], { env: { ...process.env, SKYWARD_ROOT: cpu } });
    }
    for (const name of ["accelerate.json", "accelerate-launch.json"]) {
      expect(JSON.parse(readFileSync(join(cpu, name), "utf8"))).toMatchObject({
        distributed_type: "MULTI_CPU",
        use_cpu: true,
        num_processes: 4,
      });
    }
  });
});
