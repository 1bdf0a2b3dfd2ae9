/** `@skyward/provider-vastai` — Vast.ai marketplace instances for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { VastApiError } from "./vastai-api.js";
export type { VastOfferData } from "./vastai-offers.js";
export type { VastClusterData } from "./vastai-provider.js";
export { createProviderFromConfig, VastAI } from "./vastai-provider.js";
export type { VastAISettings, VastSshMode } from "./vastai-settings.js";
export { DEFAULT_VASTAI_IMAGE } from "./vastai-settings.js";
