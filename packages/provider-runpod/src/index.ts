/**
 * `@skyward/provider-runpod` — RunPod pods for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { RunPod } from "@skyward/provider-runpod";
 *
 * await using pool = await sky.compute({ provider: RunPod(), accelerator: sky.accelerators.A100() });
 * ```
 */

export type { FetchFunction } from "@skyward/provider-utils";
export { RunPodApiError } from "./runpod-api.js";
export type {
  RunPodCloudType,
  RunPodClusterData,
  RunPodOfferData,
  RunPodSettings,
} from "./runpod-provider.js";
export { createProviderFromConfig, DEFAULT_RUNPOD_IMAGE, RunPod } from "./runpod-provider.js";
