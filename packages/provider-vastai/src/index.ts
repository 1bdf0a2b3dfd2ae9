/** `@skyward/provider-vastai` — Vast.ai marketplace instances for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { VastApiError } from "./vastai-api.js";
export type { VastOfferData } from "./vastai-offers.js";
export { createProviderFromConfig, VastAI, type VastClusterData } from "./vastai-provider.js";
export { DEFAULT_VASTAI_IMAGE, type VastAISettings, type VastSshMode } from "./vastai-settings.js";
