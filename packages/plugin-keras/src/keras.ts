/**
 * The `keras` plugin: installs Keras 3, selects its backend in the image's environment (Keras reads
 * `KERAS_BACKEND` once, when it is first imported), and with the JAX backend on several nodes sets a
 * data-parallel distribution over every device of the pool.
 */
import { fileURLToPath } from "node:url";
import { ConfigurationError } from "@skyward/core";
import { type Cluster, extendImage, Plugin, type PluginV1, parseInput } from "@skyward/core/contract";
import { z } from "zod";

/** A Keras 3 backend. */
export type KerasBackend = "jax" | "torch" | "tensorflow";

/** Options of {@link keras}; every field is optional. */
export interface KerasOptions {
  /** The backend Keras runs on; default `"jax"`. The backend's own package comes from its plugin or the image. */
  backend?: KerasBackend;
}

const BACKENDS = ["jax", "torch", "tensorflow"] as const satisfies readonly KerasBackend[];

/** The Python module holding the worker-side hooks. */
const WORKER_MODULE = "skyward_plugin_keras";
const WORKER_PATH = fileURLToPath(new URL(`../python/${WORKER_MODULE}.py`, import.meta.url));

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : value === null ? "null" : typeof value;
}

const optionsSchema = z.strictObject(
  {
    backend: z
      .enum(BACKENDS, {
        error: (issue) =>
          `expected one of ${BACKENDS.map((value) => JSON.stringify(value)).join(", ")}, received ${describe(issue.input)}`,
      })
      .default("jax"),
  },
  { error: (issue) => `expected an options object, received ${describe(issue.input)}` },
);

/**
 * With the JAX backend, refuses a pool where the jax plugin does not come before this one when the
 * pool may have several nodes or has the jax plugin at all (run before any node is provisioned). Without `jax.distributed` up
 * first the data-parallel distribution spans one node's devices: every node would train a model of
 * its own on its shard, silently; listed after, jax would initialise after Keras started JAX's backends.
 */
function refuseJaxWithoutDistributed(cluster: Cluster): void {
  const nodes = cluster.spec.nodes?.max ?? 1;
  const names = (cluster.spec.plugins ?? []).map((plugin) => plugin.name);
  const jaxAt = names.indexOf("jax");
  if (jaxAt !== -1 && jaxAt < names.indexOf("keras")) return;
  // One node without jax(): one process, nothing to distribute. jax() listed after keras() (on one
  // node too: several processes with perAccelerator) comes up after Keras looked for its runtime.
  if (nodes <= 1 && jaxAt === -1) return;
  const where = nodes > 1 ? ` on ${nodes} nodes` : "";
  throw new ConfigurationError({
    issues: [
      {
        path: "keras.backend",
        message: `"jax"${where} needs the jax plugin listed before keras (plugins: [jax(), keras()]): without jax.distributed up first each JAX process would train a model of its own`,
      },
    ],
  });
}

/**
 * The `keras` plugin. Adds `keras` to every worker's image and sets `KERAS_BACKEND` in the image's
 * environment, so it holds before anything imports Keras. With the `jax` backend, every process
 * where `jax()` brought up a runtime of several JAX processes (each node's worker; with
 * `jax({ perAccelerator: true })` each device's process) sets, before its first task,
 * `keras.distribution.set_distribution(DataParallel(devices=list_devices()))` — list `jax()` before
 * this plugin so JAX's distributed runtime (and with it every process's devices) is up by then. The
 * backend framework itself is not installed here: add `jax()` or `torch()`, or put it in the image.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { jax } from "@skyward/plugin-jax";
 * import { keras } from "@skyward/plugin-keras";
 *
 * await using pool = await sky.compute({ nodes: 2, plugins: [jax(), keras({ backend: "jax" })] });
 * ```
 *
 * @throws {ConfigurationError} naming the field (`backend`) when an option is invalid.
 */
export function keras(options: KerasOptions = {}): PluginV1 {
  const { backend } = parseInput(optionsSchema, options);
  // Its workers on different nodes meet at a rendezvous on the head: refused where nodes share no network.
  return Plugin.create("keras")
    .withPeerNetwork()
    .withImageTransform(({ image, cluster }) => {
      if (backend === "jax") refuseJaxWithoutDistributed(cluster);
      return extendImage(image, { pip: ["keras"], env: { KERAS_BACKEND: backend } });
    })
    .withWorker({ module: WORKER_MODULE, path: WORKER_PATH, config: { backend } });
}
