/**
 * `@skyward/core/contract` — what provider and plugin authors build on: the versioned contracts
 * (`ProviderV1`, `PluginV1`) and their types, the `Plugin` builder, `LaunchCommand`, the helpers a
 * provider or plugin needs (offer queries and prices, image extension, input validation that names
 * the field, shell quoting, the bootstrap scripts' building blocks — layout, markers, shared bash
 * functions, the `env` and `plugins` phases — and the Python runtime's location), the errors a
 * provider or plugin throws, and the hook runners the conformance suites use. Nothing else: the
 * kernel's own pieces stay inside core (`contract.test.ts` names a user outside core for every
 * export). Stable while the contract version is `v1`; see `docs/providers.md` and `docs/plugins.md`.
 */

// Where things are on this machine
export { skywardHome } from "./config/home.js";
export { collectIncludedFiles } from "./config/local-files.js";
// Bootstrap scripts: the shared building blocks
export type {
  BootstrapInput,
  BootstrapLayout,
  BootstrapMarker,
  BootstrapPhaseMarker,
  BootstrapScriptParts,
} from "./contract/bootstrap-ops.js";
export {
  assembleBootstrapScript,
  BOOTSTRAP_SHELL_LIBRARY,
  bootstrapLayout,
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderEnvPhase,
  renderPluginsPhase,
  validateBootstrapInput,
} from "./contract/bootstrap-ops.js";
export { IncompleteListingError } from "./contract/incomplete-listing.js";
// Launch commands
export type { LaunchCommandFields, LaunchContext } from "./contract/launch-command.js";
export { LaunchCommand, shellQuote } from "./contract/launch-command.js";
// Plugin contract
export type { WorkerLayout, WorkersPerAcceleratorOptions } from "./contract/plugin.js";
export {
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  collectPluginBootstrapOps,
  collectPluginSecrets,
  enterAroundClient,
  isPlugin,
  isWorkersPerAccelerator,
  normalizePlugin,
  Plugin,
  PluginError,
  pluginSchema,
  resolveWorkerLayout,
  resolveWorkersPerNode,
  whyNotPlugin,
  workerModules,
  workersPerAccelerator,
} from "./contract/plugin.js";
export { refuseElasticPool, refuseProcessExecutor } from "./contract/plugin-refusals.js";
// Provider contract
export {
  clusterFromInstance,
  isProvider,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  PROVIDER_METHODS,
  whyNotProvider,
} from "./contract/provider.js";
// The contracts' types: ProviderV1 and PluginV1, what their methods and hooks take, and the specs
// they receive
export type * from "./contract/types.js";
// The errors a provider or plugin throws
export type { ConfigurationIssue, ProvisionAttempt } from "./errors/errors.js";
export {
  BootstrapError,
  ConfigurationError,
  ConnectionError,
  NoCapacityError,
  ProvisionError,
} from "./errors/errors.js";
// Input validation that names the field
export { parseInput } from "./errors/validation.js";
// Secrets
export { REDACTED, Redactor } from "./observe/redact.js";
export { cachedOffers } from "./pool/offer-cache.js";
export { pythonRuntimeDirectory } from "./protocol/python-runtime.js";
// Specs and images, as providers and plugins read and extend them
export type { AcceleratorCatalogEntry } from "./spec/accelerators.js";
export {
  acceleratorCatalog,
  acceleratorFormFactor,
  acceleratorFromName,
  acceleratorSchema,
  canonicalAcceleratorName,
} from "./spec/accelerators.js";
export { containerImageSchema } from "./spec/containers.js";
export type { PipInstallStep } from "./spec/image.js";
export { contentHash, DEFAULT_PIP_INDEX, extendImage, pipInstallSteps } from "./spec/image.js";
export type { IncludedFile } from "./spec/includes.js";
export type { SecretInput, SecretSource, SecretsInput } from "./spec/secrets.js";
export { resolvePoolSpec } from "./spec/spec.js";
export { volumeClientKeysProblem } from "./spec/volume.js";
export { version } from "./version.js";
