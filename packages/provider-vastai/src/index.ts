/**
 * `@skyward/provider-vastai` — Vast.ai marketplace instances for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { VastAI } from "@skyward/provider-vastai";
 *
 * await using pool = await sky.compute({ provider: VastAI(), accelerator: sky.accelerators.RTX_4090() });
 * ```
 */

export type { FetchFunction } from "@skyward/provider-utils";
export { VastApiError } from "./vastai-api.js";
export type { VastAISettings, VastClusterData, VastOfferData, VastSshMode } from "./vastai-provider.js";
export { createProviderFromConfig, DEFAULT_VASTAI_IMAGE, VastAI } from "./vastai-provider.js";
