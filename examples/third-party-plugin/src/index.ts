/**
 * `threads()`: caps the CPU threads each worker's math libraries use, so that several workers (or
 * several tasks) on one machine do not oversubscribe its cores. A plugin written as an outside author
 * writes one: a plain `PluginV1` object, depending only on `@skyward/core`'s published entry points.
 *
 * - transform: `OMP_NUM_THREADS`, `MKL_NUM_THREADS`, `OPENBLAS_NUM_THREADS` in the image's env;
 * - bootstrap: records the setting in `threads.json` in the worker's working directory on every node;
 * - worker module `skyward_threads`: `around_app` caps PyTorch's threads too when it is installed.
 */
import { fileURLToPath } from "node:url";
import { ConfigurationError, extendImage, type PluginV1 } from "@skyward/core/contract";

/** Settings of {@link threads}. */
export interface ThreadsSettings {
  /** Threads each worker's math libraries may use; a whole number >= 1. Default 1. */
  perWorker?: number;
}

/** The plugin; see the module comment. */
export function threads(settings: ThreadsSettings = {}): PluginV1 {
  const perWorker = settings.perWorker ?? 1;
  if (!Number.isInteger(perWorker) || perWorker < 1) {
    throw new ConfigurationError({
      issues: [{ path: "perWorker", message: `expected a whole number >= 1, received ${String(perWorker)}` }],
    });
  }
  const count = String(perWorker);
  return {
    specificationVersion: "v1",
    name: "threads",
    transform: ({ image }) =>
      extendImage(image, {
        env: { OMP_NUM_THREADS: count, MKL_NUM_THREADS: count, OPENBLAS_NUM_THREADS: count },
      }),
    // Bootstrap ops run in the worker's working directory.
    bootstrap: () => [`printf '{"perWorker": %s}\\n' ${count} > threads.json`],
    worker: {
      module: "skyward_threads",
      path: fileURLToPath(new URL("../python/skyward_threads.py", import.meta.url)),
      config: { perWorker },
    },
  } satisfies PluginV1;
}
