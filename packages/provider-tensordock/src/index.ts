/**
 * `@skyward/provider-tensordock` — TensorDock marketplace virtual machines for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { TensorDock } from "@skyward/provider-tensordock";
 *
 * await using pool = await sky.compute({
 *   provider: TensorDock({ location: "United States" }),
 *   accelerator: sky.accelerators.RTX_4090(),
 * });
 * ```
 */

export type { FetchFunction } from "@skyward/provider-utils";
export { TensorDockApiError } from "./tensordock-api.js";
export type {
  TensorDockClusterData,
  TensorDockInstanceAddress,
  TensorDockOfferData,
  TensorDockSettings,
  TensorDockSshMapping,
} from "./tensordock-provider.js";
export { createProviderFromConfig, TensorDock } from "./tensordock-provider.js";
