/** `@skyward/provider-runpod` — RunPod pods for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { RunPodApiError } from "./runpod-api.js";
export type { RunPodOfferData } from "./runpod-offers.js";
export { createProviderFromConfig, RunPod, type RunPodClusterData } from "./runpod-provider.js";
export { DEFAULT_RUNPOD_IMAGE, type RunPodCloudType, type RunPodSettings } from "./runpod-settings.js";
