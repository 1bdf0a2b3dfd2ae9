/**
 * A provider package's `skyward.toml` entry point, tested as the core's loader uses it: a
 * `[providers.NAME]` table validated, the package imported from a project directory, and its
 * `createProviderFromConfig` called with the table's settings.
 */

import {
  createProviderFromEntry,
  type ProviderEntry,
  parseConfigText,
  validateConfig,
} from "@skyward/core/config";
import { ConfigurationError, type ConfigurationIssue, type Provider } from "@skyward/core/contract";

/** The `[providers.<name>]` entry of a `skyward.toml` text, validated as the core's loader does it. */
export function tomlProviderEntry(toml: string, name = "cloud"): ProviderEntry {
  const entry = validateConfig(parseConfigText(toml)).providers[name];
  if (!entry) throw new Error(`no providers.${name}`);
  return entry;
}

/**
 * The provider the core's loader makes of `[providers.<name>]` in `toml`, its package imported as
 * an installed package is from `packageDirectory`; with the entry it came from.
 */
export async function providerFromToml(
  toml: string,
  packageDirectory: string,
  name = "cloud",
): Promise<{ entry: ProviderEntry; provider: Provider }> {
  const entry = tomlProviderEntry(toml, name);
  return { entry, provider: await createProviderFromEntry(entry, packageDirectory) };
}

/**
 * The issues of the `ConfigurationError` the loader reports for `[providers.<name>]` in `toml`; any
 * other outcome is an error ("expected a ConfigurationError", or the error itself).
 */
export async function tomlProviderIssues(
  toml: string,
  packageDirectory: string,
  name = "cloud",
): Promise<readonly ConfigurationIssue[]> {
  const error = await createProviderFromEntry(tomlProviderEntry(toml, name), packageDirectory).then(
    () => new Error("expected a ConfigurationError"),
    (caught: unknown) => caught,
  );
  if (ConfigurationError.isInstance(error)) return error.issues;
  throw error;
}
