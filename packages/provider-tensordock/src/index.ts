/** `@skyward/provider-tensordock` — TensorDock marketplace virtual machines for Skyward pools (see its README). */
export type { FetchFunction } from "@skyward/provider-utils";
export { TensorDockApiError } from "./tensordock-api.js";
export type { TensorDockOfferData } from "./tensordock-offers.js";
export { createProviderFromConfig, TensorDock, type TensorDockClusterData } from "./tensordock-provider.js";
export type {
  TensorDockInstanceAddress,
  TensorDockSettings,
  TensorDockSshMapping,
} from "./tensordock-settings.js";
