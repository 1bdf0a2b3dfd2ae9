/**
 * Which providers a command talks to, and loading them the way `skyward.toml` does: each provider's
 * package (core's `PROVIDER_PACKAGES`, or `package = "…"`) is imported dynamically and its
 * `createProviderFromConfig(settings)` called. A provider that cannot be loaded or used is skipped
 * with a one-line reason; the others carry on.
 */
import { ConfigurationError, type Provider } from "@skyward/core";
import {
  createProviderFromEntry,
  installHint,
  PROVIDER_PACKAGES,
  type ProviderEntry,
  type SkywardConfig,
} from "@skyward/core/config";
import { UsageError } from "./usage-error.js";

/** A provider ready to use, under the name the user knows it by (its `[providers.NAME]`, or its type). */
export interface LoadedProvider {
  readonly name: string;
  readonly provider: Provider;
}

/** A provider left out, and why, in one line. */
export interface SkippedProvider {
  readonly name: string;
  readonly reason: string;
}

/**
 * Built-in types with no usable default settings: SSH's hosts, Slurm's login node and the Kubernetes
 * cluster to use are the user's own, never guessed (a kubeconfig on this machine is not consent).
 */
const NEEDS_SETTINGS = new Set(["kubernetes", "slurm", "ssh"]);

function builtinEntry(type: string, packageName: string): ProviderEntry {
  return Object.freeze({ name: type, type, package: packageName, settings: Object.freeze({}) });
}

/**
 * The provider entries a command uses: those named by `--provider` (a `[providers.NAME]` entry, every
 * entry of that `type`, or a built-in type), else every `[providers.*]` entry of the configuration,
 * else every built-in type that works with default settings (the clouds, credentials from the environment; not SSH, Slurm or Kubernetes).
 */
export function selectProviderEntries(
  config: SkywardConfig,
  requested: readonly string[] | undefined,
): ProviderEntry[] {
  const configured = Object.values(config.providers);
  if (requested === undefined || requested.length === 0) {
    return configured.length > 0
      ? configured
      : Object.entries(PROVIDER_PACKAGES)
          .filter(([type]) => !NEEDS_SETTINGS.has(type))
          .map(([type, packageName]) => builtinEntry(type, packageName));
  }
  const selected = new Map<string, ProviderEntry>();
  for (const name of requested) {
    const byName = config.providers[name];
    const byType = configured.filter((entry) => entry.type === name);
    const builtin = PROVIDER_PACKAGES[name];
    if (byName) selected.set(byName.name, byName);
    else if (byType.length > 0) for (const entry of byType) selected.set(entry.name, entry);
    else if (builtin) selected.set(name, builtinEntry(name, builtin));
    else {
      const known = [...new Set([...Object.keys(config.providers), ...Object.keys(PROVIDER_PACKAGES)])];
      throw new UsageError(
        `unknown provider "${name}": expected one of ${known.map((entry) => `"${entry}"`).join(", ")} ` +
          "(a [providers.NAME] of skyward.toml, or a built-in type)",
      );
    }
  }
  return [...selected.values()];
}

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && chain.length < 10; ) {
    chain.push(current);
    current = current instanceof Error ? current.cause : undefined;
  }
  return chain;
}

/** An error as one line: a configuration error's issues, else the message with its lines joined. */
export function describeError(error: unknown): string {
  if (ConfigurationError.isInstance(error)) {
    return error.issues
      .map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message))
      .join("; ");
  }
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s*\n\s*/g, " ").trim();
}

/** Why a provider entry could not be loaded, in one line. */
function whyNotLoaded(entry: ProviderEntry, error: unknown): string {
  const missing = causes(error).some((cause) => {
    const code = (cause as { code?: unknown } | undefined)?.code;
    return (
      (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") &&
      cause instanceof Error &&
      cause.message.includes(entry.package)
    );
  });
  if (missing) return `package ${entry.package} is not installed (${installHint(entry.package)})`;
  return describeError(error);
}

/** Loads the providers of `entries` concurrently; those that fail are skipped with their reason. */
export async function loadProviders(
  entries: readonly ProviderEntry[],
  cwd: string,
): Promise<{ loaded: LoadedProvider[]; skipped: SkippedProvider[] }> {
  const results = await Promise.allSettled(entries.map((entry) => createProviderFromEntry(entry, cwd)));
  const loaded: LoadedProvider[] = [];
  const skipped: SkippedProvider[] = [];
  results.forEach((result, index) => {
    const entry = entries[index] as ProviderEntry;
    if (result.status === "fulfilled") loaded.push({ name: entry.name, provider: result.value });
    else skipped.push({ name: entry.name, reason: whyNotLoaded(entry, result.reason) });
  });
  return { loaded, skipped };
}
