/** What every command receives: where it runs, how it writes, and the providers it may use. */
import { loadConfig, type SkywardConfig } from "@skyward/core/config";
import {
  type LoadedProvider,
  loadProviders,
  type SkippedProvider,
  selectProviderEntries,
} from "./providers.js";
import type { Redactor } from "./redact.js";

/** The environment of one command run. */
export interface CommandContext {
  /** The project directory: `skyward.toml` is read here and provider packages resolved from here. */
  readonly cwd: string;
  /** The home directory holding `.skyward/defaults.toml`; undefined for the user's own. */
  readonly home: string | undefined;
  /** Aborted on Ctrl-C and when `--timeout` runs out. */
  readonly signal: AbortSignal;
  /** Masks secrets; every setting of a loaded provider is registered with it. */
  readonly redactor: Redactor;
  /** Writes to stdout. */
  readonly out: (text: string) => void;
  /** Writes to stderr. */
  readonly err: (text: string) => void;
  /** True when a person can answer a question (stdin is a terminal). */
  readonly interactive: boolean;
  /** Asks a question on stderr and resolves with the answered line. */
  readonly ask: (question: string) => Promise<string>;
}

/** Reads the configuration, loads the providers `--provider` names (or every configured one), and reports those skipped. */
export async function useProviders(
  context: CommandContext,
  requested: readonly string[] | undefined,
): Promise<{
  config: SkywardConfig;
  loaded: LoadedProvider[];
  skipped: SkippedProvider[];
  /** The providers' names in the order asked for (`--provider`'s, else skyward.toml's). */
  order: readonly string[];
}> {
  const config = await loadConfig({
    cwd: context.cwd,
    ...(context.home !== undefined ? { home: context.home } : {}),
  });
  for (const entry of Object.values(config.providers)) context.redactor.addSettings(entry.settings);
  const entries = selectProviderEntries(config, requested);
  const { loaded, skipped } = await loadProviders(entries, context.cwd);
  return { config, loaded, skipped, order: entries.map((entry) => entry.name) };
}

/**
 * `entries` in the order the providers were asked for (`order`, from {@link useProviders}), not the
 * order they failed in: the same output on every run, and the one the user wrote.
 */
export function inAskedOrder(
  order: readonly string[],
  entries: readonly SkippedProvider[],
): SkippedProvider[] {
  const rank = new Map(order.map((name, index) => [name, index]));
  return [...entries].sort((a, b) => (rank.get(a.name) ?? order.length) - (rank.get(b.name) ?? order.length));
}

/** Prints one line per skipped provider, on stderr. */
export function reportSkipped(context: CommandContext, skipped: readonly SkippedProvider[]): void {
  for (const entry of skipped) context.err(`skyward: skipped ${entry.name}: ${entry.reason}\n`);
}
