/**
 * `@skyward/core/internal` — building blocks for Skyward's own provider and plugin packages and for
 * third parties writing their own: the zod schemas behind the public types, input parsing that raises
 * path-naming configuration errors, shell quoting, and the plugin hook runners. Not part of the
 * stable user API.
 */

export { acceleratorSchema } from "./accelerators.js";
export { createProviderFromEntry, parseConfigText, validateConfig } from "./config-file.js";
export { imageSchema } from "./image.js";
export { shellQuote } from "./launch-command.js";
export { metricCollectorSchema } from "./metrics.js";
export { logConfigSchema, optionsSchema, workerSchema } from "./options.js";
export {
  applyImageTransforms,
  applyLaunchers,
  collectBootstrapOps,
  enterAroundClient,
  pluginSchema,
  workerModules,
} from "./plugin.js";
export { providerSchema, whyNotProvider } from "./provider.js";
export { nodeSpecSchema, SPEC_FIELDS, specSchema } from "./spec.js";
export { formatPath, parseInput, toConfigurationIssues } from "./validation.js";
export { volumeSchema } from "./volume.js";
