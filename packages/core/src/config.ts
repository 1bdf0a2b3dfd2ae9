/**
 * `@skyward/core/config` — reading `skyward.toml` and `~/.skyward/defaults.toml`, for tools built on
 * Skyward (the CLI): the named pools, and each provider entry turned into a provider through its
 * package's `createProviderFromConfig`.
 */
export type {
  ConfigLocations,
  CreateProviderFromConfig,
  NamedPool,
  PoolEntry,
  ProviderEntry,
  SkywardConfig,
} from "./config/config-file.js";
export {
  createProviderFromEntry,
  installHint,
  loadConfig,
  PROVIDER_PACKAGES,
  parseConfigText,
  resolveNamedPool,
  validateConfig,
} from "./config/config-file.js";
