/**
 * `@skyward/provider-novita` — Novita AI GPU instances for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Novita } from "@skyward/provider-novita";
 *
 * await using pool = await sky.compute({ provider: Novita(), accelerator: sky.accelerators.RTX_4090() });
 * ```
 */

export type { FetchFunction } from "@skyward/provider-utils";
export { NOVITA_API_URL, NovitaApiError } from "./novita-api.js";
export type { NovitaClusterData, NovitaOfferData } from "./novita-provider.js";
export { createProviderFromConfig, DEFAULT_NOVITA_IMAGE, Novita } from "./novita-provider.js";
export type { NovitaSettings, NovitaSshAddress } from "./novita-settings.js";
