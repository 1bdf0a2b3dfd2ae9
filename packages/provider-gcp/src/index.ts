/**
 * `@skyward/provider-gcp` — Google Compute Engine VMs for Skyward pools.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { GCP } from "@skyward/provider-gcp";
 *
 * await using pool = await sky.compute({ provider: GCP({ project: "my-project-123" }), accelerator: sky.accelerators.T4() });
 * ```
 */

export type { GcpAcceleratorType } from "./accelerators.js";
export { GCP_ACCELERATOR_TYPES } from "./accelerators.js";
export type { GcpClusterData, GcpOfferData } from "./gcp-provider.js";
export {
  createProviderFromConfig,
  DEFAULT_ARM_IMAGE,
  DEFAULT_CPU_IMAGE,
  DEFAULT_GPU_IMAGE,
  GCP,
  GCP_LABELS,
  TAGS_METADATA_KEY,
} from "./gcp-provider.js";
export { COMPUTE_ENGINE_SERVICE_ID } from "./prices.js";
export type { GcpInstanceAddresses, GcpSettings, GcpSshAddressMapping } from "./settings.js";
