/** `@skyward/provider-hyperstack` — Hyperstack (NexGen Cloud) virtual machines for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { HyperstackApiError } from "./hyperstack-api.js";
export type {
  HyperstackClusterData,
  HyperstackOfferData,
  HyperstackSettings,
  HyperstackSshMapping,
  HyperstackVmAddresses,
} from "./hyperstack-provider.js";
export { createProviderFromConfig, Hyperstack } from "./hyperstack-provider.js";
