import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parse as parseToml, TomlError } from "smol-toml";
import { z } from "zod";
import { isProvider, type Provider } from "../contract/provider.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { toConfigurationIssues } from "../errors/validation.js";
import { acceleratorFromName } from "../spec/accelerators.js";
import type { ConfigLocations, NamedPool } from "../spec/compute-input.js";
import type { OptionsInput } from "../spec/options.js";
import type { SpecInput } from "../spec/spec.js";

export type { ConfigLocations, NamedPool } from "../spec/compute-input.js";

/**
 * Provider `type`s Skyward knows, and the package each resolves to. A third-party provider is named
 * with `package = "…"` instead (its `type` is then free).
 */
export const PROVIDER_PACKAGES: Readonly<Record<string, string>> = Object.freeze({
  aws: "@skyward/provider-aws",
  gcp: "@skyward/provider-gcp",
  hyperstack: "@skyward/provider-hyperstack",
  kubernetes: "@skyward/provider-kubernetes",
  novita: "@skyward/provider-novita",
  runpod: "@skyward/provider-runpod",
  slurm: "@skyward/provider-slurm",
  ssh: "@skyward/provider-ssh",
  tensordock: "@skyward/provider-tensordock",
  vastai: "@skyward/provider-vastai",
  verda: "@skyward/provider-verda",
});

/**
 * How to install a provider package, in words: `npm install NAME`, or, for Skyward's own packages
 * while they are not on a registry, packing it from the repository (see `@skyward/core`'s README).
 */
export function installHint(packageName: string): string {
  return packageName.startsWith("@skyward/")
    ? `Skyward's packages are not on a registry yet: pack ${packageName} from the Skyward repository and npm install the tarball, as @skyward/core's README shows`
    : `npm install ${packageName}`;
}

/**
 * What a provider package exports so that `skyward.toml` can create it: a function from the TOML
 * table's settings (every key but `type`/`package`, converted to camelCase) to a provider.
 */
export type CreateProviderFromConfig = (settings: Record<string, unknown>) => Provider | Promise<Provider>;

/** A `[providers.NAME]` table, validated: its type, the package it loads from, and its settings. */
export interface ProviderEntry {
  readonly name: string;
  readonly type: string;
  readonly package: string;
  readonly settings: Readonly<Record<string, unknown>>;
}

/** A `[pools.NAME]` table, validated, with the accelerator still as written. */
export interface PoolEntry {
  readonly name: string;
  /** The name of a `[providers.*]` entry; undefined means the built-in `Local` provider. */
  readonly provider: string | undefined;
  /** The spec fields (camelCase), without `provider`; `accelerator` already resolved from its string. */
  readonly spec: Omit<SpecInput, "provider">;
  /** The `[pools.NAME.options]` table, camelCase. */
  readonly options: OptionsInput;
}

/** The merged configuration: `~/.skyward/defaults.toml` overlaid by the project's `skyward.toml`. */
export interface SkywardConfig {
  readonly providers: Readonly<Record<string, ProviderEntry>>;
  readonly pools: Readonly<Record<string, PoolEntry>>;
  /** The files read, global first. */
  readonly files: readonly string[];
}

type TomlTable = Record<string, unknown>;

function isTable(value: unknown): value is TomlTable {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** `min_reliability` → `minReliability`; already-camelCase keys stay as they are. */
function camelCase(key: string): string {
  return key.replace(/[_-]([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

/** Converts a table's keys to camelCase, reporting a key written in both spellings. */
function camelKeys(table: TomlTable, path: string, issues: ConfigurationIssue[]): TomlTable {
  const out: TomlTable = {};
  const origin: Record<string, string> = {};
  for (const [key, value] of Object.entries(table)) {
    const camel = camelCase(key);
    if (camel in out) {
      issues.push({ path: `${path}.${key}`, message: `given twice (also as "${origin[camel]}")` });
      continue;
    }
    out[camel] = value;
    origin[camel] = key;
  }
  return out;
}

/**
 * The nested tables of built-in providers' settings whose keys are field names, camelCased like the
 * top-level ones (a table, or an array of tables). Other nested tables are data (AWS `tags`,
 * `on_demand_prices`): their keys are kept as written.
 */
const PROVIDER_NESTED_TABLES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  aws: ["credentials"],
  slurm: ["login"],
  ssh: ["hosts"],
});

/** `settings[field]` with its keys camelCased, when it is a table or an array of tables. */
function camelNested(settings: TomlTable, field: string, path: string, issues: ConfigurationIssue[]): void {
  const value = settings[field];
  if (isTable(value)) settings[field] = camelKeys(value, `${path}.${field}`, issues);
  else if (Array.isArray(value))
    settings[field] = value.map((entry, index) =>
      isTable(entry) ? camelKeys(entry, `${path}.${field}[${index}]`, issues) : entry,
    );
}

/** True for `pools.NAME.nodes`: a node topology is one value, replaced whole, never merged key by key. */
function isAtomicTable(path: readonly string[]): boolean {
  return path.length === 3 && path[0] === "pools" && path[2] === "nodes";
}

function mergeTables(base: TomlTable, over: TomlTable, path: readonly string[] = []): TomlTable {
  const out: TomlTable = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    const keyPath = [...path, key];
    out[key] =
      isTable(current) && isTable(value) && !isAtomicTable(keyPath)
        ? mergeTables(current, value, keyPath)
        : value;
  }
  return out;
}

async function readToml(file: string): Promise<TomlTable | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigurationError({
      issues: [{ path: "", message: `cannot read ${file}: ${(error as Error).message}` }],
      cause: error,
    });
  }
  return parseConfigText(text, file);
}

/** Parses TOML text, turning a syntax error into a {@link ConfigurationError} naming the file and line. */
export function parseConfigText(text: string, file = "skyward.toml"): TomlTable {
  try {
    return parseToml(text) as TomlTable;
  } catch (error) {
    if (error instanceof TomlError) {
      const where = `${file}:${error.line}:${error.column}`;
      throw new ConfigurationError({
        issues: [{ path: "", message: `TOML syntax error at ${where}: ${error.message.split("\n")[0]}` }],
        message: `Invalid TOML in ${where}: ${error.message}`,
        cause: error,
      });
    }
    throw error;
  }
}

const providerTableSchema = z.looseObject({
  type: z
    .string({ error: `expected a provider type: one of ${Object.keys(PROVIDER_PACKAGES).join(", ")}` })
    .min(1, { message: "expected a provider type" }),
  package: z.string().min(1, { message: "expected a package name" }).optional(),
});

const POOL_KEYS = [
  "provider",
  "accelerator",
  "nodes",
  "vcpus",
  "memoryGb",
  "diskGb",
  "architecture",
  "allocation",
  "image",
  "region",
  "maxHourlyCost",
  "ttl",
  "volumes",
  "secrets",
  "options",
] as const;

/**
 * A `[pools.NAME.secrets]` table names where each value is read (`{ env = "…" }`, `{ file = "…" }`):
 * a value written in the file itself would be a secret kept in a file, so it is refused.
 */
function secretsTableIssues(secrets: unknown, path: string): ConfigurationIssue[] {
  if (!isTable(secrets)) return [{ path, message: "expected a table of secret names" }];
  return Object.entries(secrets).flatMap(([name, source]) =>
    isTable(source) && !("value" in source)
      ? []
      : [
          {
            path: `${path}.${name}`,
            message:
              'expected { env = "NAME" } or { file = "path" }: a secret\'s value is never written in skyward.toml',
          },
        ],
  );
}

/**
 * Validates the merged TOML document. Provider and pool tables are checked for shape here; their
 * field values are checked by the spec schema when a pool is used, with the same paths.
 */
export function validateConfig(document: TomlTable, files: readonly string[] = []): SkywardConfig {
  const issues: ConfigurationIssue[] = [];
  for (const key of Object.keys(document)) {
    if (key !== "providers" && key !== "pools") {
      issues.push({ path: key, message: 'unknown field (expected "providers" or "pools")' });
    }
  }
  const providers: Record<string, ProviderEntry> = {};
  const pools: Record<string, PoolEntry> = {};

  const providerTables = document.providers ?? {};
  if (!isTable(providerTables)) issues.push({ path: "providers", message: "expected a table of providers" });
  else {
    for (const [name, raw] of Object.entries(providerTables)) {
      const path = `providers.${name}`;
      if (!isTable(raw)) {
        issues.push({ path, message: "expected a table" });
        continue;
      }
      const parsed = providerTableSchema.safeParse(raw);
      if (!parsed.success) {
        issues.push(...toConfigurationIssues(parsed.error.issues, path, raw));
        continue;
      }
      const { type, package: packageName, ...rest } = parsed.data;
      const resolvedPackage = packageName ?? PROVIDER_PACKAGES[type];
      if (!resolvedPackage) {
        issues.push({
          path: `${path}.type`,
          message: `unknown provider type "${type}": expected one of ${Object.keys(PROVIDER_PACKAGES)
            .map((known) => `"${known}"`)
            .join(", ")}, or set package = "…" for a third-party provider`,
        });
        continue;
      }
      const settings = camelKeys(rest, path, issues);
      // A third-party package (package = …) under a built-in type's name reads its own settings.
      if (packageName === undefined || packageName === PROVIDER_PACKAGES[type])
        for (const field of PROVIDER_NESTED_TABLES[type] ?? []) camelNested(settings, field, path, issues);
      providers[name] = Object.freeze({
        name,
        type,
        package: resolvedPackage,
        settings: Object.freeze(settings),
      });
    }
  }

  const poolTables = document.pools ?? {};
  if (!isTable(poolTables)) issues.push({ path: "pools", message: "expected a table of pools" });
  else {
    for (const [name, raw] of Object.entries(poolTables)) {
      const path = `pools.${name}`;
      if (!isTable(raw)) {
        issues.push({ path, message: "expected a table" });
        continue;
      }
      const table = camelKeys(raw, path, issues);
      for (const key of Object.keys(table)) {
        if (!(POOL_KEYS as readonly string[]).includes(key)) {
          issues.push({
            path: `${path}.${key}`,
            message: `unknown field (expected one of ${POOL_KEYS.join(", ")})`,
          });
        }
      }
      const { provider, accelerator, image, volumes, options, secrets, ...scalars } = table;
      if (provider !== undefined && (typeof provider !== "string" || !(provider in providers))) {
        issues.push({
          path: `${path}.provider`,
          message:
            typeof provider === "string"
              ? `no provider named "${provider}" in [providers] (defined: ${Object.keys(providers).join(", ") || "none"})`
              : "expected the name of a [providers.*] entry",
        });
      }
      const spec: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(scalars)) {
        if ((POOL_KEYS as readonly string[]).includes(key)) spec[key] = value;
      }
      if (accelerator !== undefined) {
        if (typeof accelerator !== "string") {
          issues.push({
            path: `${path}.accelerator`,
            message: 'expected an accelerator name such as "A100"',
          });
        } else {
          try {
            spec.accelerator = acceleratorFromName(accelerator, `${path}.accelerator`);
          } catch (error) {
            if (!ConfigurationError.isInstance(error)) throw error;
            issues.push(...error.issues);
          }
        }
      }
      if (image !== undefined) {
        if (isTable(image)) {
          // Its env and shell_vars tables are variable names, kept as written; pip_indexes' are fields.
          const converted = camelKeys(image, `${path}.image`, issues);
          camelNested(converted, "pipIndexes", `${path}.image`, issues);
          spec.image = converted;
        } else issues.push({ path: `${path}.image`, message: "expected a table" });
      }
      if (volumes !== undefined) {
        if (Array.isArray(volumes)) {
          spec.volumes = volumes.map((volume, index) => {
            if (!isTable(volume)) return volume;
            const volumePath = `${path}.volumes[${index}]`;
            const converted = camelKeys(volume, volumePath, issues);
            if (isTable(converted.storage)) {
              converted.storage = camelKeys(converted.storage, `${volumePath}.storage`, issues);
            }
            return converted;
          });
        } else
          issues.push({ path: `${path}.volumes`, message: "expected an array of tables ([[…volumes]])" });
      }
      if (secrets !== undefined) {
        issues.push(...secretsTableIssues(secrets, `${path}.secrets`));
        spec.secrets = secrets;
      }
      let poolOptions: TomlTable = {};
      if (options !== undefined) {
        if (isTable(options)) {
          poolOptions = camelKeys(options, `${path}.options`, issues);
          if (isTable(poolOptions.worker)) {
            poolOptions.worker = camelKeys(poolOptions.worker, `${path}.options.worker`, issues);
          }
          if (isTable(poolOptions.logging)) {
            poolOptions.logging = camelKeys(poolOptions.logging, `${path}.options.logging`, issues);
          }
          if (isTable(poolOptions.budget)) {
            poolOptions.budget = camelKeys(poolOptions.budget, `${path}.options.budget`, issues);
          }
        } else issues.push({ path: `${path}.options`, message: "expected a table" });
      }
      pools[name] = Object.freeze({
        name,
        provider: typeof provider === "string" ? provider : undefined,
        spec: spec as Omit<SpecInput, "provider">,
        options: poolOptions as OptionsInput,
      });
    }
  }

  if (issues.length > 0) {
    throw new ConfigurationError({
      issues,
      message: `Invalid configuration${files.length ? ` in ${files.join(" + ")}` : ""}:\n${issues
        .map((issue) => `  - ${issue.path || "(root)"}: ${issue.message}`)
        .join("\n")}`,
    });
  }
  return Object.freeze({ providers: Object.freeze(providers), pools: Object.freeze(pools), files });
}

/** Reads `~/.skyward/defaults.toml` and `./skyward.toml` (either may be missing), project over global. */
export async function loadConfig(locations: ConfigLocations = {}): Promise<SkywardConfig> {
  const globalFile = join(locations.home ?? homedir(), ".skyward", "defaults.toml");
  const projectFile = resolve(locations.cwd ?? process.cwd(), "skyward.toml");
  const files: string[] = [];
  let merged: TomlTable = {};
  for (const file of [globalFile, projectFile]) {
    const table = await readToml(file);
    if (table) {
      files.push(file);
      merged = mergeTables(merged, table);
    }
  }
  return validateConfig(merged, files);
}

/**
 * The file URL of package `name` as installed for the project in `cwd`, or undefined when it is not
 * found there (Node's own resolution then tries, and reports).
 */
export function resolveFromProject(name: string, cwd: string): string | undefined {
  const require = createRequire(join(resolve(cwd), "skyward.toml"));
  try {
    return pathToFileURL(require.resolve(name)).href;
  } catch {
    // require.resolve cannot see an ESM-only package (exports with only an "import" condition):
    // find its directory on the same search path and read its exports with the import conditions.
  }
  for (const directory of require.resolve.paths(name) ?? []) {
    const packageDirectory = join(directory, name);
    let manifest: unknown;
    try {
      manifest = JSON.parse(readFileSync(join(packageDirectory, "package.json"), "utf8"));
    } catch {
      continue;
    }
    if (!isTable(manifest)) continue;
    const target =
      importTarget(manifest.exports) ?? (typeof manifest.main === "string" ? manifest.main : undefined);
    return target === undefined ? undefined : pathToFileURL(join(packageDirectory, target)).href;
  }
  return undefined;
}

/** The file a package's `exports` gives for `import` of its root, under the conditions Node's `import()` uses. */
function importTarget(exports: unknown): string | undefined {
  if (typeof exports === "string") return exports;
  if (Array.isArray(exports)) {
    for (const candidate of exports) {
      const target = importTarget(candidate);
      if (target !== undefined) return target;
    }
    return undefined;
  }
  if (!isTable(exports)) return undefined;
  if (Object.keys(exports).some((key) => key.startsWith("."))) return importTarget(exports["."]);
  for (const [condition, value] of Object.entries(exports)) {
    if (condition === "import" || condition === "node" || condition === "default") {
      const target = importTarget(value);
      if (target !== undefined) return target;
    }
  }
  return undefined;
}

/** Loads a provider package and creates the provider a `[providers.NAME]` entry describes. */
export async function createProviderFromEntry(entry: ProviderEntry, cwd = process.cwd()): Promise<Provider> {
  const path = `providers.${entry.name}`;
  let module: Record<string, unknown>;
  try {
    const target = resolveFromProject(entry.package, cwd);
    module = (await import(target ?? entry.package)) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigurationError({
      issues: [
        {
          path: `${path}.${PROVIDER_PACKAGES[entry.type] === entry.package ? "type" : "package"}`,
          message: `provider package "${entry.package}" could not be loaded (is it installed? ${installHint(entry.package)}): ${(error as Error).message}`,
        },
      ],
      cause: error,
    });
  }
  const factory = module.createProviderFromConfig;
  if (typeof factory !== "function") {
    throw new ConfigurationError({
      issues: [
        { path, message: `package "${entry.package}" does not export createProviderFromConfig(settings)` },
      ],
    });
  }
  let provider: unknown;
  try {
    provider = await (factory as CreateProviderFromConfig)(entry.settings as Record<string, unknown>);
  } catch (error) {
    if (ConfigurationError.isInstance(error)) {
      throw new ConfigurationError({
        issues: error.issues.map((issue) => ({
          path: issue.path ? `${path}.${issue.path}` : path,
          message: issue.message,
        })),
        cause: error,
      });
    }
    throw error;
  }
  if (!isProvider(provider)) {
    throw new ConfigurationError({
      issues: [{ path, message: `package "${entry.package}" returned something that is not a v1 provider` }],
    });
  }
  return provider;
}

/** Finds `[pools.NAME]` and creates its provider. */
export async function resolveNamedPool(
  name: string,
  config: SkywardConfig,
  cwd = process.cwd(),
): Promise<NamedPool> {
  const pool = config.pools[name];
  if (!pool) {
    const known = Object.keys(config.pools);
    throw new ConfigurationError({
      issues: [
        {
          path: "name",
          message: `no pool named "${name}" in ${config.files.length ? config.files.join(" or ") : "skyward.toml (no configuration file found)"}${known.length ? ` (defined: ${known.join(", ")})` : ""}`,
        },
      ],
    });
  }
  const entry = pool.provider === undefined ? undefined : config.providers[pool.provider];
  const provider = entry ? await createProviderFromEntry(entry, cwd) : undefined;
  return Object.freeze({
    spec: provider ? { ...pool.spec, provider } : { ...pool.spec },
    options: pool.options,
    path: `pools.${name}`,
  });
}
