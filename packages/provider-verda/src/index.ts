/**
 * `@skyward/provider-verda` — Verda (formerly DataCrunch) instances for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Verda } from "@skyward/provider-verda";
 *
 * await using pool = await sky.compute({ provider: Verda(), accelerator: sky.accelerators.H100() });
 * ```
 */

export { VERDA_API_URL, VerdaApiError } from "./verda-api.js";
export type { VerdaClusterData, VerdaOfferData, VerdaSettings, VerdaSshAddress } from "./verda-provider.js";
export { createProviderFromConfig, Verda } from "./verda-provider.js";
