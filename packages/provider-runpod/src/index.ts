/** `@skyward/provider-runpod` — RunPod pods for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { RunPodApiError } from "./runpod-api.js";
export type { RunPodOfferData } from "./runpod-offers.js";
export type { RunPodClusterData } from "./runpod-provider.js";
export { createProviderFromConfig, RunPod } from "./runpod-provider.js";
export type { RunPodCloudType, RunPodSettings } from "./runpod-settings.js";
export { DEFAULT_RUNPOD_IMAGE } from "./runpod-settings.js";
