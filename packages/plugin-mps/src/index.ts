/**
 * `@skyward/plugin-mps` — NVIDIA Multi-Process Service on a Skyward pool: the MPS control daemon
 * started on every node at bootstrap, so the worker's concurrent tasks (and executor subprocesses)
 * share each GPU through one context instead of time-slicing it:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { mps } from "@skyward/plugin-mps";
 *
 * await using pool = await sky.compute({
 *   accelerator: sky.accelerators.L4(),
 *   options: { worker: { concurrency: 4, executor: "process" } },
 *   plugins: [mps({ activeThreadPercentage: 25 })],
 * });
 * ```
 */
import { extendImage, type PluginV1, parseInput, shellQuote } from "@skyward/core/contract";
import { z } from "zod";

/** Settings of {@link mps}. */
export interface MpsOptions {
  /**
   * The share of the GPU's threads (SMs) each client may use, 1–100
   * (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`). Default: MPS's own (all of them).
   */
  activeThreadPercentage?: number;
  /**
   * The pinned device memory each client may allocate, per device (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`):
   * `"0=2G"`, `"0=1G,1=512M"`. Default: no limit.
   */
  pinnedMemoryLimit?: string;
  /** Where the daemon's pipes live (`CUDA_MPS_PIPE_DIRECTORY`). Default `/tmp/nvidia-mps`. */
  pipeDirectory?: string;
  /** Where the daemon writes its logs (`CUDA_MPS_LOG_DIRECTORY`). Default `/tmp/nvidia-mps-log`. */
  logDirectory?: string;
}

const absolutePath = (what: string) =>
  z
    .string({ error: `expected an absolute path for ${what}` })
    .refine((path) => path.startsWith("/"), { error: `expected an absolute path for ${what}` })
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    .refine((path) => !/[\u0000-\u001f\u007f]/.test(path), {
      error: `expected ${what} without control characters`,
    });

const optionsSchema = z.strictObject({
  activeThreadPercentage: z
    .number({ error: "expected a whole number from 1 to 100" })
    .int({ error: "expected a whole number from 1 to 100" })
    .min(1, { error: "expected a whole number from 1 to 100" })
    .max(100, { error: "expected a whole number from 1 to 100" })
    .optional(),
  pinnedMemoryLimit: z
    .string({ error: 'expected device=limit pairs like "0=2G" or "0=1G,1=512M"' })
    .regex(/^\d+=\d+[KMGT]?B?(,\d+=\d+[KMGT]?B?)*$/i, {
      error: 'expected device=limit pairs like "0=2G" or "0=1G,1=512M"',
    })
    .optional(),
  pipeDirectory: absolutePath("the pipe directory").optional(),
  logDirectory: absolutePath("the log directory").optional(),
});

/** The MPS variables the plugin sets, from its options. */
function mpsEnvironment(settings: z.output<typeof optionsSchema>): Record<string, string> {
  const env: Record<string, string> = {
    CUDA_MPS_PIPE_DIRECTORY: settings.pipeDirectory ?? "/tmp/nvidia-mps",
    CUDA_MPS_LOG_DIRECTORY: settings.logDirectory ?? "/tmp/nvidia-mps-log",
  };
  if (settings.activeThreadPercentage !== undefined) {
    env.CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = String(settings.activeThreadPercentage);
  }
  if (settings.pinnedMemoryLimit !== undefined) {
    env.CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = settings.pinnedMemoryLimit;
  }
  return env;
}

/**
 * The bootstrap op: creates the pipe and log directories and starts the control daemon unless one
 * already answers on that pipe directory. The variables are exported by the op itself (each value
 * shell-quoted) as well as by the image's env, so the daemon and the workers agree on them.
 */
function startDaemonOp(env: Record<string, string>): string {
  const exports = Object.entries(env)
    .map(([name, value]) => `${name}=${shellQuote(value)}`)
    .join(" ");
  return [
    `export ${exports}`,
    "if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then",
    '  echo "mps: nvidia-cuda-mps-control not found: MPS needs the NVIDIA driver\'s utilities on the node" >&2',
    "  exit 1",
    "fi",
    'mkdir -p -- "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"',
    "if echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then",
    '  echo "mps: the control daemon already runs (pipes in $CUDA_MPS_PIPE_DIRECTORY)"',
    "else",
    "  nvidia-cuda-mps-control -d",
    '  echo "mps: started the control daemon (pipes in $CUDA_MPS_PIPE_DIRECTORY)"',
    "fi",
  ].join("\n");
}

/**
 * The MPS plugin: sets the MPS variables on the workers (`CUDA_MPS_PIPE_DIRECTORY`,
 * `CUDA_MPS_LOG_DIRECTORY`, and `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` /
 * `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` when given) and starts `nvidia-cuda-mps-control -d` on every
 * node at bootstrap. Nothing is installed: MPS comes with the NVIDIA driver.
 *
 * @throws {ConfigurationError} naming the field (`mps.activeThreadPercentage`…) when an option is
 *   not valid.
 */
export function mps(options: MpsOptions = {}): PluginV1 {
  const env = mpsEnvironment(parseInput(optionsSchema, options, "mps"));
  const op = startDaemonOp(env);
  return Object.freeze({
    specificationVersion: "v1",
    name: "mps",
    transform: ({ image }) => extendImage(image, { env }),
    bootstrap: () => [op],
  } satisfies PluginV1);
}
