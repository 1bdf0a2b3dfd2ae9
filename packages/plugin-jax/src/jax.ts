/**
 * The `jax` plugin: installs JAX (with the CUDA wheels of the chosen CUDA major version, or for CPU
 * only) and initialises `jax.distributed` on every worker, so JAX sees every node's devices as one
 * mesh.
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

/** Which JAX build to install: with the CUDA 12 or CUDA 13 wheels, or for CPU only. */
export type JaxCuda = "cu12" | "cu13" | "cpu";

/** Options of {@link jax}; every field is optional. */
export interface JaxOptions {
  /** Which JAX build to install: `"cu12"` (default, `jax[cuda12]`), `"cu13"` (`jax[cuda13]`) or `"cpu"` (`jax`). */
  cuda?: JaxCuda;
  /**
   * One JAX process per accelerator (default `false`). The default — one process per node, seeing
   * all of the node's devices — is JAX's own recommended shape for GPUs, and the one to keep unless
   * something needs a process per device. With `true`, each node runs one worker process per
   * accelerator, pinned to its device (`CUDA_VISIBLE_DEVICES`), each a JAX process of its own:
   * `jax.process_count()` = nodes × accelerators, one local device each.
   */
  perAccelerator?: boolean;
}

const CUDA_BUILDS = ["cu12", "cu13", "cpu"] as const satisfies readonly JaxCuda[];

const REQUIREMENTS: Readonly<Record<JaxCuda, string>> = {
  cu12: "jax[cuda12]",
  cu13: "jax[cuda13]",
  cpu: "jax",
};

/** The Python module holding the worker-side hooks. */
const WORKER_MODULE = "skyward_plugin_jax";
const WORKER_PATH = fileURLToPath(new URL(`../python/${WORKER_MODULE}.py`, import.meta.url));

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : value === null ? "null" : typeof value;
}

const optionsSchema = z.strictObject(
  {
    cuda: z
      .enum(CUDA_BUILDS, {
        error: (issue) =>
          `expected one of ${CUDA_BUILDS.map((value) => JSON.stringify(value)).join(", ")}, received ${describe(issue.input)}`,
      })
      .default("cu12"),
    perAccelerator: z
      .boolean({ error: (issue) => `expected true or false, received ${describe(issue.input)}` })
      .default(false),
  },
  { error: (issue) => `expected an options object, received ${describe(issue.input)}` },
);

/**
 * The `jax` plugin. Adds `jax[cuda12]` (or `jax[cuda13]`, or plain `jax` for `cuda: "cpu"`) to
 * every worker's image. On each worker's first task it sets `JAX_COORDINATOR_ADDRESS` (the head's
 * address, at the pool's head port + 1, next to the one `torch` uses), `JAX_NUM_PROCESSES`,
 * `JAX_PROCESS_ID` and `JAX_LOCAL_DEVICE_COUNT`, and calls `jax.distributed.initialize(…)` once;
 * `jax.distributed.shutdown()` runs when the worker stops. With Keras on JAX, list it before
 * `keras()`, so the distributed runtime is up when Keras discovers the devices.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { jax } from "@skyward/plugin-jax";
 * import { keras } from "@skyward/plugin-keras";
 *
 * await using pool = await sky.compute({ nodes: 2, plugins: [jax(), keras({ backend: "jax" })] });
 * ```
 *
 * One JAX process per node, seeing all of the node's devices, is the default and JAX's recommended
 * shape; `perAccelerator: true` runs one per device instead (see {@link JaxOptions.perAccelerator}).
 *
 * @throws {ConfigurationError} naming the field (`cuda`, `perAccelerator`) when an option is invalid;
 *   and, when the pool starts (before any node is provisioned), without `perAccelerator` under
 *   `executor: "process"` (`options.worker.executor`), and on an elastic pool (`nodes`).
 */
export function jax(options: JaxOptions = {}): PluginV1 {
  const { cuda, perAccelerator } = parseInput(optionsSchema, options);
  // Its workers on different nodes meet at a rendezvous on the head: refused where nodes share no network.
  const plugin = Plugin.create("jax")
    .withPeerNetwork()
    .withImageTransform(({ image, cluster }) => {
      refuseElasticPool(
        cluster,
        (min, max) =>
          `expected a fixed node count with jax() (one distributed runtime, its process count fixed when it forms), received ${min} to ${max}`,
      );
      if (!perAccelerator)
        refuseProcessExecutor(
          cluster,
          'expected "thread" with jax() (the node\'s worker process is its JAX process), received "process": its tasks would run in child processes outside the distributed runtime; jax({ perAccelerator: true }) makes each child process a JAX process',
        );
      return extendImage(image, { pip: [REQUIREMENTS[cuda]] });
    })
    .withWorker({
      module: WORKER_MODULE,
      path: WORKER_PATH,
      config: perAccelerator ? { per_worker: true } : {},
    });
  return perAccelerator ? plugin.withWorkersPerAccelerator() : plugin;
}
