/** `@skyward/provider-verda` — Verda (formerly DataCrunch) instances for Skyward pools: `Verda()` as a pool's `provider`. */

export { VERDA_API_URL, VerdaApiError } from "./verda-api.js";
export type { VerdaClusterData, VerdaOfferData, VerdaSettings, VerdaSshAddress } from "./verda-provider.js";
export { createProviderFromConfig, Verda } from "./verda-provider.js";
