/** `@skyward/provider-tensordock` — TensorDock marketplace virtual machines for Skyward pools (see its README). */
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
