/** `@skyward/provider-hyperstack` — Hyperstack (NexGen Cloud) virtual machines for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { HyperstackApiError } from "./hyperstack-api.js";
export type { HyperstackClusterData } from "./hyperstack-environments.js";
export type { HyperstackOfferData } from "./hyperstack-offers.js";
export { createProviderFromConfig, Hyperstack } from "./hyperstack-provider.js";
export type {
  HyperstackSettings,
  HyperstackSshMapping,
  HyperstackVmAddresses,
} from "./hyperstack-settings.js";
