/**
 * The `torch` plugin: installs PyTorch (and optionally torchvision / torchaudio) from the PyTorch
 * wheel index of the chosen CUDA build, and initialises `torch.distributed` on every worker so DDP
 * code runs unchanged across the pool's nodes.
 */
import { fileURLToPath } from "node:url";
import {
  extendImage,
  Plugin,
  type PluginV1,
  parseInput,
  refuseElasticPool,
  refuseProcessExecutor,
} from "@skyward/core/contract";
import { z } from "zod";

/** A `torch.distributed` backend: `nccl` for NVIDIA GPUs, `gloo` for CPUs (and as a fallback). */
export type TorchBackend = "nccl" | "gloo";

/** A PyTorch wheel build: a CUDA version tag, or `cpu`. Names the index `download.pytorch.org/whl/<tag>`. */
export type TorchCuda = "cu128" | "cu126" | "cu124" | "cu121" | "cpu";

/** Options of {@link torch}; every field is optional. */
export interface TorchOptions {
  /**
   * The process-group backend. Default: `nccl` when the worker sees a CUDA device, else `gloo`
   * (decided on the worker, by `torch.cuda.is_available()`).
   */
  backend?: TorchBackend;
  /** Which PyTorch wheel build to install. Default `"cu128"`. */
  cuda?: TorchCuda;
  /**
   * The torch version: `"latest"` (default; whatever the index has, or what is already installed),
   * an exact version (`"2.7.1"`), or a version specifier (`">=2.4,<2.8"`).
   */
  version?: string;
  /** Also install torchvision: `true` for any version, or a version (or specifier) as for `version`. */
  vision?: boolean | string;
  /** Also install torchaudio: `true` for any version, or a version (or specifier) as for `version`. */
  audio?: boolean | string;
  /**
   * One worker per accelerator (default `false`: one per node). Each node then runs as many worker
   * processes as it has accelerators, worker `i` pinned to device `i` (`CUDA_VISIBLE_DEVICES`, so
   * it is the process's `cuda:0`), and every worker is a rank of one process group: `RANK` =
   * node × accelerators + `LOCAL_RANK`, `WORLD_SIZE` = nodes × accelerators, the rendezvous on the
   * head. With the MIG plugin, a MIG instance is the accelerator. `pool.broadcast` then returns one
   * result per rank, in rank order.
   */
  perAccelerator?: boolean;
  /**
   * With `perAccelerator`: which devices each worker process sees. `"own"` (default): only its own
   * (`CUDA_VISIBLE_DEVICES` = that device, the process's `cuda:0`). `"all"`: every device of the
   * node, as under torchrun, the plugin selecting `cuda:<LOCAL_RANK>` — for code that indexes devices
   * by `LOCAL_RANK` (Hugging Face `Trainer`, accelerate's state). Refused without `perAccelerator`.
   */
  visibleDevices?: "own" | "all";
}

const BACKENDS = ["nccl", "gloo"] as const satisfies readonly TorchBackend[];
const CUDA_BUILDS = ["cu128", "cu126", "cu124", "cu121", "cpu"] as const satisfies readonly TorchCuda[];

/** The Python module holding the worker-side hooks. */
const WORKER_MODULE = "skyward_plugin_torch";
const WORKER_PATH = fileURLToPath(new URL(`../python/${WORKER_MODULE}.py`, import.meta.url));

/** The PyTorch wheel index of one build. */
function wheelIndexUrl(cuda: TorchCuda): string {
  return `https://download.pytorch.org/whl/${cuda}`;
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : value === null ? "null" : typeof value;
}

function choice<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, {
    error: (issue) =>
      `expected one of ${values.map((value) => JSON.stringify(value)).join(", ")}, received ${describe(issue.input)}`,
  });
}

/** An exact version (`2.7.1`, `2.7.1+cu128`) or a PEP 440 specifier list (`>=2.4,<2.8`). */
const EXACT_VERSION = /^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[A-Za-z0-9.]+)?$/;
const SPECIFIER = /^(?:===?|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+$/;

function isVersion(value: string): boolean {
  if (value === "latest" || EXACT_VERSION.test(value)) return true;
  return value.split(",").every((part) => SPECIFIER.test(part.trim()));
}

const versionSchema = z
  .string({ error: (issue) => `expected a version string, received ${describe(issue.input)}` })
  .refine(isVersion, {
    error: (issue) =>
      `expected "latest", a version like "2.7.1" or a specifier like ">=2.4,<2.8", received ${describe(issue.input)}`,
  });

const companionSchema = z.union([z.boolean(), versionSchema], {
  error: (issue) => `expected true, false or a version string, received ${describe(issue.input)}`,
});

const optionsSchema = z
  .strictObject(
    {
      backend: choice(BACKENDS).optional(),
      cuda: choice(CUDA_BUILDS).default("cu128"),
      version: versionSchema.default("latest"),
      vision: companionSchema.default(false),
      audio: companionSchema.default(false),
      perAccelerator: z
        .boolean({ error: (issue) => `expected true or false, received ${describe(issue.input)}` })
        .default(false),
      visibleDevices: choice(["own", "all"]).optional(),
    },
    { error: (issue) => `expected an options object, received ${describe(issue.input)}` },
  )
  .superRefine((options, context) => {
    if (options.visibleDevices !== undefined && !options.perAccelerator) {
      context.addIssue({
        code: "custom",
        path: ["visibleDevices"],
        message: "expected perAccelerator: true with it (each node runs one worker then)",
      });
    }
  });

/** A requirement for `name` at `version` (`latest` / `true` = any version). */
function requirement(name: string, version: string | true): string {
  if (version === true || version === "latest") return name;
  return EXACT_VERSION.test(version) ? `${name}==${version}` : `${name}${version.replaceAll(" ", "")}`;
}

/**
 * The `torch` plugin. On every worker's image it adds `torch` (plus `torchvision` / `torchaudio`
 * when asked), each fetched only from PyTorch's wheel index for `cuda`
 * (`https://download.pytorch.org/whl/<cuda>`) — a requirement the environment already satisfies,
 * such as a deep-learning image's or Debian's PyTorch, is used as it is. On each worker's first task
 * it sets `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`, `RANK`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE` and
 * `NODE_RANK` from the pool's topology and calls `torch.distributed.init_process_group(backend)`
 * once; the group is destroyed when the worker stops. With `perAccelerator: true` every node runs one
 * worker process per accelerator, each pinned to its device and a rank of the group.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { torch } from "@skyward/plugin-torch";
 *
 * await using pool = await sky.compute({ nodes: 4, accelerator: sky.accelerators.A100(), plugins: [torch()] });
 *
 * // 4 nodes × 8 GPUs: 32 ranks, one process per GPU.
 * await using big = await sky.compute({
 *   nodes: 4,
 *   accelerator: sky.accelerators.H100({ count: 8 }),
 *   plugins: [torch({ perAccelerator: true })],
 * });
 * ```
 *
 * @throws {ConfigurationError} naming the field (`backend`, `cuda`, `version`, `vision`, `audio`,
 *   `perAccelerator`, `visibleDevices`)
 *   when an option is invalid; and, when the pool starts (before any node is provisioned), without
 *   `perAccelerator` under `executor: "process"` (`options.worker.executor`), and on an elastic
 *   pool (`nodes`).
 */
export function torch(options: TorchOptions = {}): PluginV1 {
  const { backend, cuda, version, vision, audio, perAccelerator, visibleDevices } = parseInput(
    optionsSchema,
    options,
  );
  const requirements = [requirement("torch", version)];
  if (vision !== false) requirements.push(requirement("torchvision", vision));
  if (audio !== false) requirements.push(requirement("torchaudio", audio));
  const packages = requirements.map((entry) => entry.split(/[=<>!~]/, 1)[0] as string);
  // Its workers on different nodes meet at a rendezvous on the head: refused where nodes share no network.
  const plugin = Plugin.create("torch")
    .withPeerNetwork()
    .withImageTransform(({ image, cluster }) => {
      refuseElasticPool(
        cluster,
        (min, max) =>
          `expected a fixed node count with torch() (one process group, its size fixed when it forms), received ${min} to ${max}`,
      );
      if (!perAccelerator)
        refuseProcessExecutor(
          cluster,
          'expected "thread" with torch() (the node\'s worker process is its rank), received "process": its tasks would run in child processes outside the process group; torch({ perAccelerator: true }) makes each child process a rank',
        );
      return extendImage(image, { pip: requirements, pipIndexes: [{ url: wheelIndexUrl(cuda), packages }] });
    })
    .withWorker({
      module: WORKER_MODULE,
      path: WORKER_PATH,
      config: { backend: backend ?? null, per_worker: perAccelerator },
    });
  return perAccelerator ? plugin.withWorkersPerAccelerator({ pin: visibleDevices !== "all" }) : plugin;
}
