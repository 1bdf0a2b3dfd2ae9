/**
 * `@skyward/provider-utils` — what Skyward provider packages share: an HTTP client for a provider's
 * API (bearer key looked up lazily from the settings or the environment, deadlines, retries, errors
 * that never carry the key), the settings schemas every provider accepts, Skyward's tags, offer
 * filtering and prices, the keys directory, the boot script that arms a VM's self-destruct, and the
 * machine-provider base (`defineMachineProvider`): the whole provider contract for a machine-renting
 * API from a small adapter. For provider authors; see `docs/providers.md`.
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
export type { JsonCall, JsonCallOptions, JsonSend } from "./http/json-calls.js";
export { jsonCalls } from "./http/json-calls.js";
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
  answerOptionalListSchema,
  answerTextSchema,
  createProviderHttpClient,
  ProviderApiError,
  parseProviderAnswer,
  resolveProviderApiKey,
  retryAfterMs,
} from "./http/provider-http.js";
export type { RequestPacer } from "./http/request-pacer.js";
export { abortableSleep, createRequestPacer } from "./http/request-pacer.js";
// Instances
export type { SshStandIn } from "./instances.js";
export { instanceSsh, rememberedStandIns, sshReachableStatus } from "./instances.js";
// Keys
export { privateKeyPath, removePrivateKey, skywardKeysDirectory, writePrivateKey } from "./keys.js";
// The machine-provider base
export type {
  MachineAdapter,
  MachineBootWatchdog,
  MachineClusterData,
  MachineCreateRequest,
  MachineDeleteOutcome,
  MachineDeleter,
  MachineDescribeContext,
  MachinePage,
  MachinePrepareContext,
  MachineTagCodec,
} from "./machine-provider/adapter.js";
export {
  answerNumberFields,
  answerNumbers,
  answerTextFields,
  answerTexts,
} from "./machine-provider/answer-fields.js";
export type {
  ApiBootScriptOptions,
  PythonSelfDestruct,
  SelfDestructApi,
} from "./machine-provider/api-self-destruct.js";
export {
  pythonSelfDestructProgram,
  renderApiBootScript,
  SELF_DESTRUCT_COMMAND,
} from "./machine-provider/api-self-destruct.js";
export type { ApiVm, ApiVmDefinition, ApiVmFields, ApiVmSettings } from "./machine-provider/api-vm.js";
export { defineApiVm } from "./machine-provider/api-vm.js";
export { type AskRent, askRentals, type RentableAsk } from "./machine-provider/ask-rentals.js";
export { batchDeleteOutcomes, knownMachines } from "./machine-provider/batch-delete.js";
export type {
  ContainerBoot,
  CurlSelfDestruct,
  WorkerWatchdog,
} from "./machine-provider/boot-template.js";
export {
  CONTAINER_BOOT_VARIABLES,
  containerBootEnvironment,
  containerStartCommand,
  curlSelfDestructProgram,
  earlierWorkerMarkersCleared,
  rootSshdStatements,
  workerWatchdogScript,
} from "./machine-provider/boot-template.js";
export type {
  ClientCredentialsGrant,
  ClientCredentialsSettings,
} from "./machine-provider/client-credentials.js";
export { clientCredentialsClient, resolveClientCredentials } from "./machine-provider/client-credentials.js";
export {
  type ContainerMarketplaceOptions,
  containerMarketplace,
  imagePullCapabilities,
} from "./machine-provider/container-marketplace.js";
export {
  type ContainerSelfDestruct,
  containerSelfDestructScript,
} from "./machine-provider/container-self-destruct.js";
export {
  type ContainerSettingsSchema,
  containerSettingsSchema,
} from "./machine-provider/container-settings.js";
export {
  type CudaConstraint,
  cudaConstrained,
  cudaConstraint,
  cudaFits,
  cudaVersionField,
  imageCudaVersion,
} from "./machine-provider/cuda-constraint.js";
export { tagsFromDescription, tagsToDescription } from "./machine-provider/description-tags.js";
export type {
  BoundEndpoints,
  EndpointCall,
  EndpointDefinition,
  EndpointDefinitions,
  EndpointInput,
  EndpointOptions,
  ListCall,
  ListEndpointDefinition,
  ListPaging,
  Route,
  RouteParams,
} from "./machine-provider/endpoints.js";
export { endpoint, listEndpoint, machineEndpoints } from "./machine-provider/endpoints.js";
export type { EnvironmentEntry } from "./machine-provider/environment-list.js";
export { environmentList, environmentRecord } from "./machine-provider/environment-list.js";
export { errorTable, LEFT_TO_STATUS, type MachineErrorRule } from "./machine-provider/error-table.js";
export type {
  MachineErrorClassifier,
  MachineErrorKind,
  MachineErrorStructure,
} from "./machine-provider/errors.js";
export {
  kindOfStatus,
  MachineProviderError,
  machineError,
  machineErrorFactory,
  machineErrorKind,
} from "./machine-provider/errors.js";
export { type GraphqlRequest, graphqlCall } from "./machine-provider/graphql-call.js";
export { IMAGE_PULL_PROVISION_TIMEOUT_SECONDS } from "./machine-provider/image-pull.js";
export { type KeyCheckOptions, keyCheckedOn404 } from "./machine-provider/key-checked-404.js";
export { labelTags } from "./machine-provider/label-tags.js";
export { lenientItemsSchema } from "./machine-provider/lenient-items.js";
export type {
  MachineApi,
  MachineApiDefinition,
  MachineApiErrorClass,
  MachineJsonClient,
  MachineJsonClientOptions,
  MachineJsonOptions,
} from "./machine-provider/machine-api.js";
export { defineMachineApi, machineErrorClass } from "./machine-provider/machine-api.js";
export type { MachineFacts, StandInSeam } from "./machine-provider/machine-instance.js";
export {
  describeMachine,
  selfDestructCommand,
  standInSeam,
  statusTable,
  tagsFromWords,
  tagsToWords,
} from "./machine-provider/machine-instance.js";
export type {
  MachineEndpointAddress,
  MachineMapping,
  MappableMachine,
  MappedMachine,
} from "./machine-provider/machine-mapping.js";
export { mappedMachine } from "./machine-provider/machine-mapping.js";
export {
  CreateBudget,
  deleteUntilGone,
  listAllMachines,
  provisionAcrossMarkets,
} from "./machine-provider/machine-operations.js";
export { defineMachineProvider } from "./machine-provider/machine-provider.js";
export type {
  ContainerSettingsShape,
  MachineProviderSettings,
  MachineSettingsShape,
} from "./machine-provider/machine-settings.js";
export {
  containerSettingsShape,
  declaredImageCuda,
  machineProviderFactories,
  machineSettingsShape,
  refuseSetting,
  sshUserSchema,
} from "./machine-provider/machine-settings.js";
export {
  isMarketRefusal,
  launchAcrossMarkets,
  type MarketLaunch,
  type MarketLaunchAnswer,
  type MarketLaunched,
  type MarketLoopOptions,
  type MarketRefusal,
} from "./machine-provider/market-loop.js";
export { MARKET_REFUSALS } from "./machine-provider/market-refusals.js";
export type {
  MachineAdapterHalf,
  MachineAdapterHalfFields,
  MachineAdapterHalfOptions,
} from "./machine-provider/marketplace-machine.js";
export {
  machineAdapterHalf,
  marketListings,
  readAfterCreate,
} from "./machine-provider/marketplace-machine.js";
export type { NameTagCodec, NameTagCodecOptions, NameTags } from "./machine-provider/name-tags.js";
export { nameTagCodec, poolNamePart } from "./machine-provider/name-tags.js";
export type { NumberedPage } from "./machine-provider/numbered-pages.js";
export { nextNumberedPage, readNumberedPages } from "./machine-provider/numbered-pages.js";
export type {
  DocumentedRateLimit,
  MachineEndpoint,
  MachineRateLimits,
  PacedClient,
} from "./machine-provider/pacing.js";
export { pacedClient, rateLimitFor } from "./machine-provider/pacing.js";
export type {
  NamedPoolResources,
  NamedPoolResourcesOptions,
  PoolResourceKind,
} from "./machine-provider/pool-resources.js";
export { namedPoolResources } from "./machine-provider/pool-resources.js";
export { deletedUnlessGone, removeUnlessGone } from "./machine-provider/remove-unless-gone.js";
export type { SelfDestructHeader, SelfDestructRequest } from "./machine-provider/self-destruct-retry.js";
export {
  curlDeleteRequest,
  deleteRequest,
  pythonDeleteRequest,
  retriedPython,
  retriedShell,
  SELF_DESTRUCT_RETRY,
} from "./machine-provider/self-destruct-retry.js";
export { setUpOrDelete } from "./machine-provider/set-up-or-delete.js";
export {
  absolutePathField,
  millisecondsField,
  nonEmptyListField,
  shellSafePathField,
  textField,
  wholeNumberField,
} from "./machine-provider/setting-fields.js";
export {
  type RateLimitSettings,
  rateLimitsField,
  settingRateLimits,
} from "./machine-provider/setting-rate-limits.js";
export { type MachineSettingsObject, machineSettingsObject } from "./machine-provider/settings-object.js";
export type { GrantedToken } from "./machine-provider/token-client.js";
export { tokenClient } from "./machine-provider/token-client.js";
export {
  type LaunchableMarket,
  launchableMarkets,
  launchableMarketsByZone,
  type ZonalMarket,
} from "./machine-provider/zonal-markets.js";
// Offers and prices
export { acceleratorFromNames, type NamedAccelerator } from "./offers/accelerator-names.js";
export { type MachineOfferFacts, machineOffer, pricedOffer } from "./offers/machine-offer.js";
export type { OfferHardware } from "./offers/offer-filter.js";
export {
  filterOffers,
  fitsAllocationAndBudget,
  matchesHardware,
  requireOwnOffer,
} from "./offers/offer-filter.js";
export { type PairedListing, pairedListings } from "./offers/paired-listings.js";
export { type PerGpu, type PerGpuOfferFacts, perGpuOffer } from "./offers/per-gpu-offer.js";
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
export { workerStartedFunction } from "./worker-started.js";
