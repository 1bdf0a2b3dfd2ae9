/** `@skyward/provider-novita` — Novita AI GPU instances for Skyward pools: `Novita()` as a pool's `provider`. */

export type { FetchFunction } from "@skyward/provider-utils";
export { NOVITA_API_URL, NovitaApiError } from "./novita-api.js";
export type { NovitaClusterData, NovitaOfferData } from "./novita-provider.js";
export { createProviderFromConfig, DEFAULT_NOVITA_IMAGE, Novita } from "./novita-provider.js";
export type { NovitaSettings, NovitaSshAddress } from "./novita-settings.js";
