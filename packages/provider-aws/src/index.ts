/**
 * `@skyward/provider-aws` — Skyward pools on AWS EC2: spot and on-demand GPU and CPU instances.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { AWS } from "@skyward/provider-aws";
 *
 * await using pool = await sky.compute({ provider: AWS({ region: "us-east-1" }), accelerator: sky.accelerators.T4() });
 * ```
 */
export { MAX_LAUNCH_ATTEMPTS } from "./allocation.js";
export {
  AWS,
  AWS_TAGS,
  type AwsClusterData,
  CLUSTER_FAILED_LAUNCH_LIMIT,
  createProviderFromConfig,
  DEFAULT_ROOT_VOLUME_GB,
} from "./aws-provider.js";
export { bootWatchdogSeconds, renderBootWatchdog } from "./boot-watchdog.js";
export type { ImageKind } from "./machine-images.js";
export { imageParameter } from "./machine-images.js";
export type { AwsOfferData } from "./offers.js";
export { BUILT_IN_ON_DEMAND_PRICES, ON_DEMAND_PRICES_AS_OF } from "./on-demand-prices.js";
export { PRICE_CACHE_MAX_AGE_DAYS } from "./pricing.js";
export type {
  AwsCredentials,
  AwsCredentialsProvider,
  AwsInstanceAddresses,
  AwsSettings,
  SshAddressMapping,
} from "./settings.js";
