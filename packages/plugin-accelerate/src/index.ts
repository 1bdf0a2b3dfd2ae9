/**
 * `@skyward/plugin-accelerate` — Hugging Face Accelerate on a Skyward pool. Every node's worker is
 * started under `accelerate launch`, with a config file generated from typed settings (the same
 * structure `accelerate config` writes) and the topology (machines, rank, head address and port,
 * processes) passed on the command line:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { accelerate } from "@skyward/plugin-accelerate";
 *
 * await using pool = await sky.compute({
 *   nodes: 2,
 *   accelerator: sky.accelerators.A100(),
 *   plugins: [accelerate({ mixed_precision: "bf16", fsdp: { sharding_strategy: "FULL_SHARD" } })],
 * });
 * ```
 */
import { posix } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigurationError } from "@skyward/core";
import type { Cluster, JsonValue, LaunchCommand, LaunchContext, PluginV1 } from "@skyward/core/contract";
import {
  extendImage,
  isWorkersPerAccelerator,
  Plugin,
  parseInput,
  refuseElasticPool,
  resolveWorkersPerNode,
  shellQuote,
  workersPerAccelerator,
} from "@skyward/core/contract";
import { z } from "zod";

/** Options of the plugin itself (not accelerate settings). */
export interface AccelerateOptions {
  /**
   * One process per accelerator (default `false`: one per node). Each node then runs as many
   * worker processes as it has accelerators, each seeing every device (accelerate selects
   * `cuda:<LOCAL_RANK>`), each a process of accelerate's state: `process_index` = node ×
   * accelerators + local index, `num_processes` = nodes × accelerators. The node's worker runs
   * under `accelerate launch` with those totals (accelerate's single-process launcher: the node's
   * processes are Skyward's), and each process gets the rank variables (`RANK`, `LOCAL_RANK`,
   * `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`) torchrun would give it.
   * The node's launcher reads `accelerate-launch.json` (the config with a single-process type);
   * `accelerate.json` keeps the real one, from which each process gets the environment accelerate's
   * own launch code gives the processes it starts (`ACCELERATE_USE_FSDP`, `FSDP_*`, …). For
   * `MULTI_GPU`, `MULTI_CPU` and `FSDP`; DeepSpeed and the others are refused with it for now.
   */
  perAccelerator?: boolean;
}

/** The distributed types one process per accelerator supports. */
const PER_ACCELERATOR_TYPES: readonly AccelerateDistributedType[] = ["MULTI_GPU", "MULTI_CPU", "FSDP"];

/** Accelerate's distributed types, as `accelerate config` writes them. */
export type AccelerateDistributedType =
  | "NO"
  | "MULTI_CPU"
  | "MULTI_GPU"
  | "MULTI_XPU"
  | "MULTI_NPU"
  | "MULTI_MLU"
  | "MULTI_HPU"
  | "FSDP"
  | "DEEPSPEED"
  | "MEGATRON_LM"
  | "XLA";

/**
 * Accelerate settings, in the structure of the YAML `accelerate config` writes. The topology
 * (`num_machines`, `machine_rank`, `main_process_ip`, `main_process_port`, `compute_environment`)
 * is not set here: the plugin passes it for each node.
 */
export interface AccelerateConfig {
  /**
   * How the processes cooperate. When unset it is inferred: `FSDP` when `fsdp` is given,
   * `DEEPSPEED` when `deepspeed` is, else `NO` for one node running one process, else `MULTI_GPU`
   * when the nodes have GPUs and `MULTI_CPU` when they do not.
   */
  distributed_type?: AccelerateDistributedType;
  /** Mixed precision: `"no"` (default), `"fp16"`, `"bf16"` or `"fp8"`. */
  mixed_precision?: "no" | "fp16" | "bf16" | "fp8";
  /**
   * Processes in TOTAL, across every node (accelerate's meaning). Default: one per node, or with
   * {@link AccelerateOptions.perAccelerator} one per accelerator (nodes × accelerators per node).
   * Must be that number: anything else is refused before any node starts.
   */
  num_processes?: number;
  /** CPU threads per process (`OMP_NUM_THREADS`), passed as `--num_cpu_threads_per_process`. */
  num_cpu_threads_per_process?: number;
  /**
   * The GPUs each node uses: `"all"` or a comma-separated list of indexes (`"0,1"`). With
   * {@link AccelerateOptions.perAccelerator} only `"all"` (a process runs on every accelerator).
   */
  gpu_ids?: string;
  /** Whether every node is on the same local network. */
  same_network?: boolean;
  /** Accelerate's debug mode (checks collective operations; slower). */
  debug?: boolean;
  /** With `bf16` on TPUs: downcast `torch.float` to `bfloat16` as well. */
  downcast_bf16?: boolean;
  /** The rendezvous backend of `torchrun`: `"static"` (accelerate's default), `"c10d"`, `"etcd"` or `"etcd-v2"`. */
  rdzv_backend?: "static" | "c10d" | "etcd" | "etcd-v2";
  /**
   * FSDP settings, written as the config's `fsdp_config` (keys as `accelerate config` writes them,
   * with or without the `fsdp_` prefix: `sharding_strategy`, `auto_wrap_policy`, …).
   */
  fsdp?: { readonly [key: string]: JsonValue };
  /** DeepSpeed settings, written as the config's `deepspeed_config` (`zero_stage`, `offload_optimizer_device`, …). */
  deepspeed?: { readonly [key: string]: JsonValue };
}

const DISTRIBUTED_TYPES = [
  "NO",
  "MULTI_CPU",
  "MULTI_GPU",
  "MULTI_XPU",
  "MULTI_NPU",
  "MULTI_MLU",
  "MULTI_HPU",
  "FSDP",
  "DEEPSPEED",
  "MEGATRON_LM",
  "XLA",
] as const satisfies readonly AccelerateDistributedType[];

const positiveInteger = z
  .number({ error: "expected a positive whole number" })
  .int({ error: "expected a positive whole number" })
  .positive({ error: "expected a positive whole number" });

const jsonValueSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.string(),
    z.number().refine(Number.isFinite, { error: "expected a finite number" }),
    z.boolean(),
    z.null(),
    z.array(jsonValueSchema),
    z.record(z.string(), jsonValueSchema),
  ]),
);

const settingsSchema = z
  .strictObject({
    distributed_type: z.enum(DISTRIBUTED_TYPES).optional(),
    mixed_precision: z.enum(["no", "fp16", "bf16", "fp8"]).optional(),
    num_processes: positiveInteger.optional(),
    num_cpu_threads_per_process: positiveInteger.optional(),
    gpu_ids: z
      .string({ error: 'expected "all" or comma-separated GPU indexes like "0,1"' })
      .regex(/^(all|\d+(,\d+)*)$/, { error: 'expected "all" or comma-separated GPU indexes like "0,1"' })
      .optional(),
    same_network: z.boolean().optional(),
    debug: z.boolean().optional(),
    downcast_bf16: z.boolean().optional(),
    rdzv_backend: z.enum(["static", "c10d", "etcd", "etcd-v2"]).optional(),
    fsdp: z.record(z.string(), jsonValueSchema, { error: "expected an object of FSDP settings" }).optional(),
    deepspeed: z
      .record(z.string(), jsonValueSchema, { error: "expected an object of DeepSpeed settings" })
      .optional(),
  })
  .superRefine((settings, context) => {
    if (settings.fsdp !== undefined && settings.deepspeed !== undefined) {
      context.addIssue({
        code: "custom",
        path: ["deepspeed"],
        message: "expected either fsdp or deepspeed, not both",
      });
    }
  });

/** The Python module holding the worker-side hook (gloo on the node's private interface). */
const WORKER_MODULE = "skyward_plugin_accelerate";
const WORKER_PATH = fileURLToPath(new URL(`../python/${WORKER_MODULE}.py`, import.meta.url));

/** The accelerate config file's name, in the node's Skyward root (`$SKYWARD_ROOT` of the bootstrap ops). */
const ACCELERATE_CONFIG_FILE = "accelerate.json";
/**
 * With one process per accelerator: the config the node's `accelerate launch` reads, for its
 * single-process launcher (the node's worker is the one process it starts).
 */
const LAUNCH_CONFIG_FILE = "accelerate-launch.json";

/** How many nodes a cluster may have, and how many GPUs each: what the config inference needs. */
interface ClusterShape {
  readonly nodes: number;
  readonly gpusPerNode: number;
}

function clusterShape(cluster: Cluster): ClusterShape {
  return {
    // A fixed node count: an elastic pool is refused (refuseElasticPool).
    nodes: cluster.spec.nodes.max,
    gpusPerNode: cluster.offer.accelerator?.count ?? cluster.spec.acceleratorCount,
  };
}

/**
 * The distributed type for `config` on a cluster of `nodes` nodes with `gpusPerNode` GPUs each:
 * the one set, else `FSDP` / `DEEPSPEED` when their settings are given, else `NO` for one node
 * running one process, else `MULTI_GPU` with GPUs and `MULTI_CPU` without.
 */
export function inferDistributedType(
  config: AccelerateConfig,
  nodes: number,
  gpusPerNode: number,
): AccelerateDistributedType {
  if (config.distributed_type) return config.distributed_type;
  if (config.fsdp) return "FSDP";
  if (config.deepspeed) return "DEEPSPEED";
  const processes = config.num_processes ?? nodes;
  if (nodes <= 1 && processes <= 1) return "NO";
  return gpusPerNode > 0 ? "MULTI_GPU" : "MULTI_CPU";
}

/**
 * The config file accelerate loads (`--config_file accelerate.json`), as a JSON object: the settings
 * in `accelerate config`'s structure plus `compute_environment: "LOCAL_MACHINE"` and the inferred
 * `distributed_type` and `num_processes`. The topology is left out: the launcher passes it on the
 * command line.
 */
function renderAccelerateConfig(
  config: AccelerateConfig,
  nodes: number,
  gpusPerNode: number,
  perAccelerator: boolean,
): Record<string, JsonValue> {
  const processes = perAccelerator ? nodes * Math.max(1, gpusPerNode) : nodes;
  const type = inferDistributedType({ num_processes: processes, ...config }, nodes, gpusPerNode);
  const file: Record<string, JsonValue> = {
    compute_environment: "LOCAL_MACHINE",
    distributed_type: type,
    mixed_precision: config.mixed_precision ?? "no",
    use_cpu: gpusPerNode <= 0 || type === "MULTI_CPU",
    // Passed on the command line too (which wins); accelerate < 1 requires it in the file.
    num_processes: config.num_processes ?? processes,
  };
  if (config.debug !== undefined) file.debug = config.debug;
  if (config.downcast_bf16 !== undefined) file.downcast_bf16 = config.downcast_bf16;
  if (config.gpu_ids !== undefined) file.gpu_ids = config.gpu_ids;
  if (config.same_network !== undefined) file.same_network = config.same_network;
  if (config.rdzv_backend !== undefined) file.rdzv_backend = config.rdzv_backend;
  if (config.fsdp !== undefined) file.fsdp_config = config.fsdp;
  if (config.deepspeed !== undefined) file.deepspeed_config = config.deepspeed;
  return file;
}

/**
 * With one process per accelerator, the config the node's launcher reads: `accelerate.json` with a
 * type whose launcher starts one process (`NO`; `MULTI_CPU` stays, its launcher is that one too)
 * and without the FSDP / DeepSpeed settings, which reach each device process through the
 * environment the worker module computes from `accelerate.json` with accelerate's own launch code.
 */
function renderLaunchConfig(file: Record<string, JsonValue>): Record<string, JsonValue> {
  const { fsdp_config: _fsdp, deepspeed_config: _deepspeed, ...rest } = file;
  return { ...rest, distributed_type: file.distributed_type === "MULTI_CPU" ? "MULTI_CPU" : "NO" };
}

/**
 * The bootstrap op that writes the config file into the node's Skyward root (`$SKYWARD_ROOT`, set
 * by the bootstrap script), atomically. The JSON travels as one shell-quoted word.
 */
function renderConfigFileOp(file: Record<string, JsonValue>, name = ACCELERATE_CONFIG_FILE): string {
  const target = `"\${SKYWARD_ROOT:?}/${name}"`;
  const next = `"\${SKYWARD_ROOT:?}/${name}.next"`;
  return `printf '%s\\n' ${shellQuote(JSON.stringify(file))} > ${next} && mv -f ${next} ${target}`;
}

/**
 * Wraps the worker's launch command with `accelerate launch`, run as `<venv python> -m
 * accelerate.commands.launch` so no console script needs to be on `PATH`:
 *
 * ```text
 * [env RANK=<node> WORLD_SIZE=<total> LOCAL_RANK=0 LOCAL_WORLD_SIZE=1]   (several nodes only)
 *   <python> -m accelerate.commands.launch --config_file <root>/accelerate.json --num_machines N
 *   --machine_rank RANK --main_process_ip HEAD --main_process_port PORT --num_processes TOTAL
 *   [--num_cpu_threads_per_process T] <entrypoint> <args…>
 * ```
 *
 * The config file is the one the bootstrap op wrote into the node's Skyward root (`context.root`;
 * without one, the virtual environment's parent directory).
 *
 * @throws {Error} when the node has no virtual environment, when the command is already wrapped
 *   by another launcher, or when `num_processes` is not one per node.
 */
function wrapWithAccelerate(
  config: AccelerateConfig,
  command: LaunchCommand,
  context: LaunchContext,
  perAccelerator: boolean,
): LaunchCommand {
  if (context.venvDir === "") {
    throw new Error(
      "accelerate needs the node's virtual environment (its config file lives next to it), and this node has none",
    );
  }
  const launcher = command.launcher.trim();
  if (launcher !== "" && launcher !== context.pythonBin && launcher !== shellQuote(context.pythonBin)) {
    throw new Error(
      `accelerate must wrap the plain Python interpreter, but the worker is already launched with ${JSON.stringify(launcher)}; list accelerate before the plugin that wraps it, or use only one launcher`,
    );
  }
  const nodes = context.numNodes;
  const expected = perAccelerator ? nodes * context.workersPerNode : nodes;
  const total = config.num_processes ?? expected;
  if (total !== expected) {
    throw new Error(
      perAccelerator
        ? `accelerate: num_processes is ${total}, but ${nodes} ${nodes === 1 ? "node" : "nodes"} × ${context.workersPerNode} accelerators run ${expected} processes, one per accelerator`
        : `accelerate: num_processes is ${total} across ${nodes} ${nodes === 1 ? "node" : "nodes"}, but Skyward runs one worker process per node, so num_processes must be ${nodes} (or use accelerate(config, { perAccelerator: true }) for one per accelerator)`,
    );
  }
  // Accelerate's multi-CPU mode reads the process's rank from the environment (what mpirun would
  // set); the multi-GPU launchers set their own. One process per node: rank = node. A single node
  // gets none: with them accelerate would look for a process group to join. One process per
  // accelerator: each process sets its own (the worker module's around_process).
  const root = context.root ?? posix.dirname(context.venvDir);
  const rankVariables =
    nodes > 1 && !perAccelerator
      ? ["env", `RANK=${context.nodeId}`, `WORLD_SIZE=${total}`, "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1"]
      : perAccelerator
        ? ["env", `SKYWARD_ACCELERATE_CONFIG=${posix.join(root, ACCELERATE_CONFIG_FILE)}`]
        : [];
  const words = [
    ...rankVariables,
    context.pythonBin,
    "-m",
    "accelerate.commands.launch",
    "--config_file",
    posix.join(root, perAccelerator ? LAUNCH_CONFIG_FILE : ACCELERATE_CONFIG_FILE),
    "--num_machines",
    String(nodes),
    "--machine_rank",
    String(context.nodeId),
    "--main_process_ip",
    context.headAddr,
    "--main_process_port",
    String(context.headPort),
    "--num_processes",
    String(total),
  ];
  if (config.num_cpu_threads_per_process !== undefined) {
    words.push("--num_cpu_threads_per_process", String(config.num_cpu_threads_per_process));
  }
  return command.with({ launcher: words.map(shellQuote).join(" ") });
}

/**
 * The Accelerate plugin: installs `accelerate`, writes its config file on every node at bootstrap,
 * and starts each worker under `accelerate launch`, so tasks run with the environment accelerate
 * sets up (`ACCELERATE_MIXED_PRECISION`, `ACCELERATE_USE_FSDP`, `MASTER_ADDR`, …) and
 * `Accelerator()` picks it up. On a pool of several nodes its worker hook sets `GLOO_SOCKET_IFNAME`
 * (unless set) to the interface holding the node's private address, so a gloo process group (CPU
 * nodes) connects over the pool's network rather than where the host name resolves.
 *
 * With `{ perAccelerator: true }` each node runs one process per accelerator (see
 * {@link AccelerateOptions.perAccelerator}); `num_processes`, when given, must then be nodes ×
 * accelerators per node — 2 nodes × 8 GPUs: 16 — and a mismatch is refused before any node starts.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { accelerate } from "@skyward/plugin-accelerate";
 *
 * // 2 nodes × 8 H100: 16 processes, one per GPU.
 * await using pool = await sky.compute({
 *   nodes: 2,
 *   accelerator: sky.accelerators.H100({ count: 8 }),
 *   plugins: [accelerate({ mixed_precision: "bf16", num_processes: 16 }, { perAccelerator: true })],
 * });
 * ```
 *
 * @param config settings in `accelerate config`'s structure; see {@link AccelerateConfig}.
 * @param options the plugin's own options; see {@link AccelerateOptions}.
 * @throws {ConfigurationError} naming the field (`accelerate.mixed_precision`, `accelerate.fsdp`…)
 *   when a setting is not valid, or one that one process per accelerator does not support; and,
 *   when the pool starts (before any node is provisioned), on an elastic pool (`nodes`).
 */
export function accelerate(config: AccelerateConfig = {}, options: AccelerateOptions = {}): PluginV1 {
  const settings: AccelerateConfig = parseInput(settingsSchema, config, "accelerate");
  const { perAccelerator } = parseInput(optionsSchema, options, "accelerate options");
  if (perAccelerator) refuseUnsupportedPerAccelerator(settings);
  // Its workers on different nodes meet at a rendezvous on the head: refused where nodes share no network.
  const plugin = Plugin.create("accelerate")
    .withPeerNetwork()
    .withImageTransform(({ image, cluster }) => {
      refuseElasticPool(
        cluster,
        (min, max) =>
          `accelerate runs a fixed number of machines (one process group, its size given to each node's launcher): expected a fixed node count, received ${min} to ${max}`,
      );
      // The launcher would refuse it too, but only once every node is provisioned and bootstrapped.
      if (!perAccelerator) refuseProcessesOtherThanNodes(settings, cluster);
      else refuseProcessesOtherThanWorkers(settings, cluster);
      return extendImage(image, { pip: ["accelerate"] });
    })
    .withBootstrap(({ cluster }) => {
      const { nodes, gpusPerNode } = clusterShape(cluster);
      const file = renderAccelerateConfig(settings, nodes, gpusPerNode, perAccelerator);
      if (!perAccelerator) return [renderConfigFileOp(file)];
      return [renderConfigFileOp(file), renderConfigFileOp(renderLaunchConfig(file), LAUNCH_CONFIG_FILE)];
    })
    .withLauncher(({ command, context }) => wrapWithAccelerate(settings, command, context, perAccelerator))
    .withWorker({
      module: WORKER_MODULE,
      path: WORKER_PATH,
      config: perAccelerator ? { per_worker: true } : {},
    });
  if (!perAccelerator) return plugin;
  // Accelerate picks each process's device itself (cuda:<LOCAL_RANK>): every device stays visible.
  return plugin.withWorkersPerNode(
    workersPerAccelerator({
      pin: false,
      check: (count, cluster) => {
        const nodes = cluster.spec.nodes.max;
        if (settings.num_processes !== undefined && settings.num_processes !== nodes * count) {
          throw new ConfigurationError({
            issues: [
              {
                path: "accelerate.num_processes",
                message: `expected ${nodes * count} (${nodes} ${nodes === 1 ? "node" : "nodes"} × ${count} accelerators, one process per accelerator), received ${settings.num_processes}`,
              },
            ],
          });
        }
      },
    }),
  );
}

const optionsSchema = z.strictObject(
  { perAccelerator: z.boolean({ error: "expected true or false" }).default(false) },
  { error: "expected an options object" },
);

/**
 * With one process per node, refuses a `num_processes` other than the pool's node count (the
 * transform hook runs before any node is provisioned).
 */
function refuseProcessesOtherThanNodes(settings: AccelerateConfig, cluster: Cluster): void {
  const processes = settings.num_processes;
  const nodes = cluster.spec.nodes.max;
  if (processes === undefined || processes === nodes) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "accelerate.num_processes",
        message: `expected ${nodes} (one process per node), received ${processes}; accelerate(config, { perAccelerator: true }) runs one per accelerator`,
      },
    ],
  });
}

/**
 * With one process per accelerator next to a plugin that sets its own worker count (MIG: one per
 * instance), refuses a `num_processes` other than nodes × that count (the transform hook runs before
 * any node is provisioned). The pool then never asks this plugin's own count, nor runs its check.
 */
function refuseProcessesOtherThanWorkers(settings: AccelerateConfig, cluster: Cluster): void {
  const processes = settings.num_processes;
  const plugins = cluster.spec.plugins ?? [];
  const deciding = plugins.some(
    (plugin) =>
      typeof plugin.workersPerNode === "function" && !isWorkersPerAccelerator(plugin.workersPerNode),
  );
  if (processes === undefined || !deciding) return;
  const nodes = cluster.spec.nodes.max;
  const workers = resolveWorkersPerNode(plugins, cluster);
  if (processes === nodes * workers) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "accelerate.num_processes",
        message: `expected ${nodes * workers} (${nodes} ${nodes === 1 ? "node" : "nodes"} × ${workers} workers per node, one process per worker), received ${processes}`,
      },
    ],
  });
}

/** Refuses the settings one process per accelerator does not support (yet), naming the field. */
function refuseUnsupportedPerAccelerator(settings: AccelerateConfig): void {
  // The node's single-process launcher would set CUDA_VISIBLE_DEVICES to them for every device process.
  if (settings.gpu_ids !== undefined && settings.gpu_ids !== "all") {
    throw new ConfigurationError({
      issues: [
        {
          path: "accelerate.gpu_ids",
          message: `expected "all" with one process per accelerator (a process runs on every accelerator of each node), received ${JSON.stringify(settings.gpu_ids)}`,
        },
      ],
    });
  }
  const field = settings.deepspeed !== undefined ? "deepspeed" : undefined;
  const type = settings.distributed_type;
  if (field === undefined && (type === undefined || PER_ACCELERATOR_TYPES.includes(type))) return;
  throw new ConfigurationError({
    issues: [
      {
        path: `accelerate.${field ?? "distributed_type"}`,
        message: `one process per accelerator runs ${PER_ACCELERATOR_TYPES.slice(0, -1).join(", ")} or ${PER_ACCELERATOR_TYPES.at(-1)} for now, received ${field ? `${field} settings` : JSON.stringify(type)}`,
      },
    ],
  });
}
