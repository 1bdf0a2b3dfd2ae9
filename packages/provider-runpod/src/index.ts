/** `@skyward/provider-runpod` — RunPod pods for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { RunPodApiError } from "./runpod-api.js";
export type {
  RunPodCloudType,
  RunPodClusterData,
  RunPodOfferData,
  RunPodSettings,
} from "./runpod-provider.js";
export { createProviderFromConfig, DEFAULT_RUNPOD_IMAGE, RunPod } from "./runpod-provider.js";
