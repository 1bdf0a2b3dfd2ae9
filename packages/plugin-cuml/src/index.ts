/**
 * `@skyward/plugin-cuml` — RAPIDS cuML on a Skyward pool: `cuml-cu12` installed from NVIDIA's
 * package index, and scikit-learn accelerated on the GPU in every worker (`cuml.accel.install()`
 * before the first task), so unchanged scikit-learn code runs on the GPU where cuML supports it:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { cuml } from "@skyward/plugin-cuml";
 *
 * await using pool = await sky.compute({
 *   accelerator: sky.accelerators.L4(),
 *   plugins: [cuml()],
 * });
 * ```
 */
import { fileURLToPath } from "node:url";
import { extendImage, Plugin, type PluginV1, parseInput } from "@skyward/core/contract";
import { z } from "zod";

/** Settings of {@link cuml}. */
export interface CumlOptions {
  /** The CUDA major version of the RAPIDS wheels: `"cu12"` (default), `"cu13"` or `"cu11"` (RAPIDS ≤ 25.06). */
  cuda?: "cu11" | "cu12" | "cu13";
}

/** NVIDIA's package index, where RAPIDS publishes its wheels. */
export const NVIDIA_PACKAGE_INDEX = "https://pypi.nvidia.com";

/**
 * The RAPIDS packages (without their `-cuXX` suffix) that cuML pulls in or that go with it. The
 * scoped index covers all of them, so a pool that also asks for `cudf-cu12` gets it from the same
 * index as cuML.
 */
const RAPIDS_PACKAGES = [
  "cuml",
  "libcuml",
  "cudf",
  "libcudf",
  "pylibcudf",
  "dask-cudf",
  "pylibraft",
  "libraft",
  "raft-dask",
  "rmm",
  "librmm",
  "cuvs",
  "libcuvs",
  "kvikio",
  "libkvikio",
  "ucxx",
  "libucxx",
  "distributed-ucxx",
  "ucx-py",
  "libucx",
] as const;

const optionsSchema = z.strictObject({
  cuda: z.enum(["cu11", "cu12", "cu13"]).optional(),
});

/**
 * The cuML plugin: installs `cuml-<cuda>` from NVIDIA's index (a scoped pip index covering cuML
 * and the RAPIDS packages that come with it), and on the workers calls `cuml.accel.install()` once
 * per process — the worker process, and each executor subprocess under `executor: "process"` —
 * before its first task, so scikit-learn estimators run on the GPU.
 *
 * @throws {ConfigurationError} (path `cuml.cuda`) when the CUDA version is not one RAPIDS ships.
 */
export function cuml(options: CumlOptions = {}): PluginV1 {
  const { cuda = "cu12" } = parseInput(optionsSchema, options, "cuml");
  const packages = RAPIDS_PACKAGES.map((name) => `${name}-${cuda}`);
  return Plugin.create("cuml")
    .withImageTransform(({ image }) =>
      extendImage(image, {
        pip: [`cuml-${cuda}`],
        // NVIDIA's index holds RAPIDS only: numpy, scikit-learn and the rest come from PyPI.
        pipIndexes: [{ url: NVIDIA_PACKAGE_INDEX, packages, dependenciesFromDefault: true }],
      }),
    )
    .withWorker({
      module: "skyward_plugin_cuml",
      path: fileURLToPath(new URL("../python/skyward_plugin_cuml.py", import.meta.url)),
      config: { cuda },
    });
}
