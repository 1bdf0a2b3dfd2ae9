/**
 * `@skyward/provider-hyperstack` — Hyperstack (NexGen Cloud) virtual machines for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Hyperstack } from "@skyward/provider-hyperstack";
 *
 * await using pool = await sky.compute({
 *   provider: Hyperstack({ region: "CANADA-1" }),
 *   accelerator: sky.accelerators.A100(),
 * });
 * ```
 */

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
