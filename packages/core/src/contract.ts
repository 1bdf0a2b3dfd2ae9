/**
 * `@skyward/core/contract` — what provider and plugin authors build on: the versioned contracts
 * (`ProviderV1`, `PluginV1`) and their types, the `Plugin` builder, `LaunchCommand`, the helpers a
 * provider or plugin needs (offer queries and prices, image extension, input validation that names
 * the field, shell quoting, the bootstrap scripts' building blocks — layout, markers, shared bash
 * functions, the `env` and `plugins` phases, the plugin-ops script — and the Python runtime's
 * location), and the hook runners the conformance suites use. Stable while the contract version is
 * `v1`; see `docs/providers.md` and `docs/plugins.md`.
 */

export { resolveComputeInput } from "./compute.js";
// Where things are on this machine
export { skywardHome } from "./config/home.js";
// Bootstrap scripts: the shared building blocks, and the plugin ops run for an environment prepared otherwise
export type {
  BootstrapInput,
  BootstrapLayout,
  BootstrapMarker,
  BootstrapPhaseMarker,
  BootstrapScriptParts,
  PluginOpsScriptOptions,
} from "./contract/bootstrap-ops.js";
export {
  assembleBootstrapScript,
  BOOTSTRAP_SHELL_LIBRARY,
  bootstrapLayout,
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderEnvPhase,
  renderPluginOpsScript,
  renderPluginsPhase,
  validateBootstrapInput,
} from "./contract/bootstrap-ops.js";
// Launch commands
export type { LaunchCommandFields, LaunchContext } from "./contract/launch-command.js";
export { LaunchCommand, shellQuote } from "./contract/launch-command.js";
// Plugin contract
export type { WorkerLayout, WorkersPerAcceleratorOptions } from "./contract/plugin.js";
export {
  acceleratorsPerNode,
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  collectPluginBootstrapOps,
  enterAroundClient,
  isPlugin,
  isWorkersPerAccelerator,
  normalizePlugin,
  PLUGIN_SPECIFICATION_VERSION,
  Plugin,
  PluginError,
  pluginSchema,
  resolveWorkerLayout,
  resolveWorkersPerNode,
  whyNotPlugin,
  workerModules,
  workersPerAccelerator,
} from "./contract/plugin.js";
// Provider contract
export {
  clusterFromInstance,
  isProvider,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  PROVIDER_METHODS,
  PROVIDER_SPECIFICATION_VERSION,
  prefersSpot,
  providerSchema,
  whyNotProvider,
} from "./contract/provider.js";
// The contracts' types: ProviderV1 and PluginV1, what their methods and hooks take, and the specs
// they receive
export type * from "./contract/types.js";
// Input validation that names the field
export { formatPath, parseInput, toConfigurationIssues } from "./errors/validation.js";
export { findPython, preparePythonEnvironment } from "./local/python-environment.js";
// Events, for providers that report their own
export type { EventHubOptions } from "./observe/events.js";
export { EventHub } from "./observe/events.js";
export { metricCollectorSchema } from "./observe/metrics.js";
// Secrets
export { isSecretEnvironmentName, REDACTED, Redactor } from "./observe/redact.js";
export { cachedOffers, OFFER_CACHE_SECONDS } from "./pool/offer-cache.js";
export { pythonRuntimeDirectory } from "./protocol/python-runtime.js";
// Specs and images, as providers and plugins read and extend them
export type { AcceleratorCatalogEntry } from "./spec/accelerators.js";
export {
  acceleratorCatalog,
  acceleratorFormFactor,
  acceleratorFromName,
  acceleratorSchema,
  canonicalAcceleratorName,
  canonicalFormFactor,
} from "./spec/accelerators.js";
export type { ResolvedCompute } from "./spec/compute-input.js";
export { containerImageSchema, imageReferenceSchema } from "./spec/containers.js";
export type { PipInstallStep } from "./spec/image.js";
export {
  contentHash,
  DEFAULT_IMAGE,
  DEFAULT_PIP_INDEX,
  envHash,
  extendImage,
  imageSchema,
  pipInstallSteps,
} from "./spec/image.js";
export { collectIncludedFiles, globToRegExp, type IncludedFile } from "./spec/includes.js";
export { logConfigSchema, optionsSchema, workerSchema } from "./spec/options.js";
export type { NodeSpec } from "./spec/spec.js";
export {
  ALLOCATION_STRATEGIES,
  nodeSpecSchema,
  resolvePoolSpec,
  SPEC_FIELDS,
  specSchema,
} from "./spec/spec.js";
export { FORBIDDEN_MOUNTS, volumeSchema } from "./spec/volume.js";
export { version } from "./version.js";
