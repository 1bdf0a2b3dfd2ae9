/**
 * `@skyward/provider-utils` — what Skyward provider packages share: an HTTP client for a provider's
 * API (bearer key looked up lazily from the settings or the environment, deadlines, retries, errors
 * that never carry the key), the settings schemas every provider accepts, Skyward's tags, offer
 * filtering and prices, the keys directory, and the boot script that arms a VM's self-destruct. For
 * provider authors; see `docs/providers.md`.
 *
 * ```ts
 * import { defineProviderApi, ProviderApiError } from "@skyward/provider-utils";
 *
 * const api = defineProviderApi({
 *   label: "Example",
 *   apiKeyVariable: "EXAMPLE_API_KEY",
 *   createError: (options) => new ProviderApiError({ ...options, provider: "example" }),
 * });
 * const http = api.createClient({ maxRetries: 4, retryDelayMs: 1000, requestTimeoutMs: 30_000 });
 * ```
 */

// HTTP APIs
export type { HttpSettings } from "./http/http-settings.js";
export { environmentVariablesSchema, httpSettingsShape, keysDirectorySchema } from "./http/http-settings.js";
export type { ProviderApi, ProviderApiDefinition } from "./http/provider-api.js";
export { defineProviderApi } from "./http/provider-api.js";
export type {
  FetchFunction,
  ProviderApiErrorOptions,
  ProviderApiIdentity,
  ProviderHttpAnswer,
  ProviderHttpAttempt,
  ProviderHttpClient,
  ProviderHttpClientOptions,
  ProviderHttpRequest,
  ProviderHttpRequestFunction,
  ProviderHttpResponse,
  ProviderHttpSettings,
  ProviderRateLimit,
} from "./http/provider-http.js";
export {
  answerListSchema,
  answerMessage,
  answerNumberSchema,
  answerTextSchema,
  createProviderHttpClient,
  ProviderApiError,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./http/provider-http.js";
// Instances
export type { ProvisionByMarketOptions, SshStandIn } from "./instances.js";
export { instanceSsh, provisionByMarket, sshReachableStatus } from "./instances.js";
// Keys
export { privateKeyPath, removePrivateKey, skywardKeysDirectory, writePrivateKey } from "./keys.js";
// Offers and prices
export type { OfferHardware } from "./offers/offer-filter.js";
export {
  filterOffers,
  fitsAllocationAndBudget,
  matchesHardware,
  requireOwnOffer,
} from "./offers/offer-filter.js";
export type { Market } from "./offers/prices.js";
export { marketsFor, roundPrice } from "./offers/prices.js";
// Self-destruct
export type { SelfDestructScriptOptions } from "./self-destruct-script.js";
export { renderSelfDestructScript } from "./self-destruct-script.js";
// Tags
export type { SkywardTagValues } from "./tags.js";
export {
  createClusterId,
  hourlyPriceFromTags,
  ownerTag,
  poolIdFromTags,
  SKYWARD_TAGS,
  skywardTags,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
} from "./tags.js";
// Volumes
export type { RefuseVolumesOptions } from "./volumes.js";
export { refuseVolumesWithoutFuse } from "./volumes.js";
