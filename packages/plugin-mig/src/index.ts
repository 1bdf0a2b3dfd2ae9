/**
 * `@skyward/plugin-mig` — NVIDIA Multi-Instance GPU on a Skyward pool: GPU 0 of every node is put
 * in MIG mode and cut into as many instances of one profile as it holds, and each worker is pinned
 * to its own instance (`CUDA_VISIBLE_DEVICES=MIG-…`):
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { mig } from "@skyward/plugin-mig";
 *
 * const partitions = mig("3g.40gb"); // two per A100 80GB
 * await using pool = await sky.compute({
 *   accelerator: sky.accelerators.A100(),
 *   options: { worker: { concurrency: 2, executor: "process" } },
 *   plugins: [partitions],
 * });
 * ```
 */
import { fileURLToPath } from "node:url";
import { ConfigurationError } from "@skyward/core";
import {
  type Cluster,
  type ClusterHookOptions,
  canonicalAcceleratorName,
  type PluginV1,
  shellQuote,
} from "@skyward/core/contract";

/** A MIG profile as `nvidia-smi` names it: compute slices `g`, memory in GB, optionally `+me` (media extensions). */
const PROFILE = /^([1-7])g\.(\d+)gb(\+me)?$/;

/** The GPU layouts MIG exists on: how many compute and memory slices a GPU has. */
interface MigLayout {
  readonly computeSlices: number;
  readonly memorySlices: number;
}

/** A100, H100, H200, B200, GB200 and the like: 7 compute slices, 8 memory slices. */
const SEVEN_SLICE_LAYOUT: MigLayout = { computeSlices: 7, memorySlices: 8 };
/** The A30: 4 and 4. */
const A30_LAYOUT: MigLayout = { computeSlices: 4, memorySlices: 4 };

/**
 * The catalog's GPUs that have MIG (NVIDIA's MIG user guide, "Supported GPUs"): Ampere A100/A800 and
 * A30, Hopper H100/H800/H200/H20/GH200, Blackwell B100/B200/GB200/B300/GB300, RTX PRO 6000 and 5000
 * Blackwell. On any other GPU the catalog knows, `nvidia-smi -mig 1` fails.
 */
const MIG_GPUS: ReadonlySet<string> = new Set([
  "A100",
  "A800",
  "A30",
  "H100",
  "H800",
  "H200",
  "H20",
  "GH200",
  "B100",
  "B200",
  "GB200",
  "B300",
  "GB300",
  "RTX_PRO_6000",
  "RTX_PRO_5000",
]);

/** What a GPU has that the instance count depends on. */
export interface MigGpu {
  /** The accelerator's canonical name (`"A100"`, `"H100"`, `"A30"`…). */
  readonly name: string;
  /** Its memory in GB (`80`). */
  readonly memoryGb: number;
}

function parseProfile(profile: string): { compute: number; memoryGb: number; media: boolean } | undefined {
  const match = PROFILE.exec(profile);
  if (!match) return undefined;
  return { compute: Number(match[1]), memoryGb: Number(match[2]), media: match[3] !== undefined };
}

/**
 * How many GPU instances of `profile` fit on one `gpu` — the number of workers each node gets:
 * `3g.40gb` → 2 and `1g.10gb` → 7 on an A100 80GB; `1g.10gb` → 4 on an A100 40GB; `+me` profiles
 * (which take the GPU's single media engine) → 1. Counted from the GPU's compute and memory slices,
 * as `nvidia-smi mig -lgip` reports them.
 *
 * @throws {ConfigurationError} (path `mig.profile`) when the profile is malformed or does not fit;
 *   (path `accelerator`) when the catalog knows the GPU and it has no MIG (a T4, an L4…).
 */
export function migInstancesPerGpu(profile: string, gpu: MigGpu): number {
  const parsed = parseProfile(profile);
  if (!parsed) throw profileError(profile);
  refuseGpuWithoutMig(profile, gpu);
  const layout = gpu.name.toUpperCase() === "A30" ? A30_LAYOUT : SEVEN_SLICE_LAYOUT;
  const sliceGb = gpu.memoryGb / layout.memorySlices;
  const memorySlices = Math.max(1, Math.round(parsed.memoryGb / sliceGb));
  const count = Math.min(
    Math.floor(layout.computeSlices / parsed.compute),
    Math.floor(layout.memorySlices / memorySlices),
  );
  if (count < 1 || parsed.memoryGb > gpu.memoryGb) {
    throw new ConfigurationError({
      issues: [
        {
          path: "mig.profile",
          message: `expected a MIG profile that fits a ${gpu.name} with ${gpu.memoryGb} GB, received ${JSON.stringify(profile)}`,
        },
      ],
    });
  }
  return parsed.media ? 1 : count;
}

/** Refuses a GPU the catalog knows to have no MIG; a name it does not know is left to nvidia-smi. */
function refuseGpuWithoutMig(profile: string, gpu: MigGpu): void {
  const known = canonicalAcceleratorName(gpu.name);
  if (known === undefined || MIG_GPUS.has(known)) return;
  throw new ConfigurationError({
    issues: [
      {
        path: "accelerator",
        message: `expected a GPU with MIG (${[...MIG_GPUS].join(", ")}) for mig(${JSON.stringify(profile)}), received ${gpu.name}: it has no MIG mode to enable`,
      },
    ],
  });
}

function profileError(profile: unknown): ConfigurationError {
  return new ConfigurationError({
    issues: [
      {
        path: "mig.profile",
        message: `expected a MIG profile like "3g.40gb" or "1g.10gb" (compute slices "g", memory "gb", optionally "+me"), received ${typeof profile === "string" ? JSON.stringify(profile) : typeof profile}`,
      },
    ],
  });
}

/** The GPU a cluster's nodes have, from the offer (or, failing that, the spec). */
function clusterGpu(cluster: Cluster): MigGpu {
  const offered = cluster.offer.accelerator;
  const name = offered?.name ?? cluster.spec.acceleratorName;
  const memoryGb = offered?.memoryGb ?? cluster.spec.acceleratorMemoryGb;
  if (!name || !memoryGb) {
    throw new Error(
      "mig needs GPU nodes whose accelerator memory is known (e.g. accelerator: sky.accelerators.A100()); this pool has none",
    );
  }
  return { name, memoryGb };
}

/**
 * The bootstrap op that partitions GPU 0: MIG mode on, the GPU and compute instances an earlier
 * bootstrap left removed, `instances` GPU instances of `profile` created with their default
 * compute instances (`-C`), and the MIG devices counted. System changes go through
 * `$SKYWARD_SUDO` (set by the bootstrap script when the user is not root).
 */
function partitionOp(profile: string, instances: number): string {
  const profiles = shellQuote(Array.from({ length: instances }, () => profile).join(","));
  return [
    "set -e",
    `sudo_=\${SKYWARD_SUDO:-}`,
    "$sudo_ nvidia-smi -i 0 -mig 1",
    "$sudo_ nvidia-smi mig -i 0 -dci >/dev/null 2>&1 || true",
    "$sudo_ nvidia-smi mig -i 0 -dgi >/dev/null 2>&1 || true",
    `$sudo_ nvidia-smi mig -i 0 -cgi ${profiles} -C`,
    // GPU 0's MIG devices: the "UUID: MIG-" lines between "GPU 0:" and the next GPU.
    `found=$(nvidia-smi -L | awk '/^GPU / { gpu = $2 } gpu == "0:" && /UUID: MIG-/ { n++ } END { print n + 0 }')`,
    `if [ "$found" -lt ${instances} ]; then`,
    `  echo "mig: expected ${instances} MIG devices after partitioning GPU 0, nvidia-smi -L lists $found" >&2`,
    "  exit 1",
    "fi",
    `echo ${shellQuote(`mig: GPU 0 partitioned into ${instances} × ${profile}`)}`,
  ].join("\n");
}

/**
 * A MIG plugin: a {@link PluginV1} whose `workersPerNode` hook says how many workers each node runs —
 * one per GPU instance — and which also carries its profile. A frozen plain object.
 */
export interface MigPlugin extends PluginV1 {
  /** The MIG profile each instance is cut to (`"3g.40gb"`). */
  readonly profile: string;
  /**
   * Workers per node on `cluster`: how many instances of the profile fit its GPU (see
   * {@link migInstancesPerGpu}). What the pool uses as the node's worker count, so that worker `i`
   * of a node runs on MIG device `i`.
   */
  readonly workersPerNode: (options: ClusterHookOptions) => number;
}

/**
 * The MIG plugin: at bootstrap, enables MIG on GPU 0 of each node and creates one GPU instance of
 * `profile` per worker (as many as the GPU holds: {@link MigPlugin.workersPerNode}); on the
 * workers, pins each worker process — each executor subprocess under `executor: "process"` — to
 * the MIG device of its worker index by UUID, through `CUDA_VISIBLE_DEVICES`, before its first
 * task. Under the thread executor every task shares the process, and so the device of worker 0.
 *
 * @param profile the MIG profile, as `nvidia-smi mig -lgip` names it: `"3g.40gb"`, `"1g.10gb"`,
 *   `"1g.10gb+me"`.
 * @throws {ConfigurationError} (path `mig.profile`) when the profile is malformed.
 */
export function mig(profile: string): MigPlugin {
  if (typeof profile !== "string" || !parseProfile(profile)) throw profileError(profile);
  const workersPerNode = ({ cluster }: ClusterHookOptions): number =>
    migInstancesPerGpu(profile, clusterGpu(cluster));
  return Object.freeze({
    specificationVersion: "v1",
    name: "mig",
    profile,
    workersPerNode,
    bootstrap: ({ cluster }) => [partitionOp(profile, workersPerNode({ cluster }))],
    worker: Object.freeze({
      module: "skyward_plugin_mig",
      path: fileURLToPath(new URL("../python/skyward_plugin_mig.py", import.meta.url)),
      config: Object.freeze({ profile, gpu: 0 }),
    }),
  } satisfies MigPlugin);
}
