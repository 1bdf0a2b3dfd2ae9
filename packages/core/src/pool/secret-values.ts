/**
 * Reading the values of a pool's secrets on the client, when the pool starts (or is attached): each
 * spec's `secrets` sources are resolved from this process's environment and files, and a secret that
 * cannot be read refuses the pool before anything is provisioned, naming it (never its value).
 */
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { resolve } from "node:path";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { describeSecretSource, type SecretSource, type Secrets } from "../spec/secrets.js";

/** The values of a pool's secrets, read once; a spec's are looked up by its `secrets`. */
export interface SecretValues {
  /** Name → value for a spec's `secrets` (the same object the validated spec holds); empty for none. */
  of(secrets: Secrets | undefined): Readonly<Record<string, string>>;
  /** Every value, for masking. */
  readonly values: readonly string[];
}

/** Where the values are read from (this process's, unless a test gives others). */
export interface SecretReaders {
  readonly environment?: Readonly<Record<string, string | undefined>>;
  readonly readFile?: (path: string) => Promise<string>;
}

/** No secrets. */
export const NO_SECRET_VALUES: SecretValues = Object.freeze({
  of: () => Object.freeze({}),
  values: Object.freeze([]),
});

/** A file path as written: `~/` is the home directory, a relative path is from the current directory. */
function secretFilePath(path: string): string {
  return path === "~" || path.startsWith("~/") ? resolve(homedir(), path.slice(2)) : resolve(path);
}

async function readSource(source: SecretSource, readers: Required<SecretReaders>): Promise<string> {
  if ("value" in source) return source.value;
  if ("env" in source) {
    const value = readers.environment[source.env];
    if (value === undefined) throw new Error(`${describeSecretSource(source)} is not set`);
    return value;
  }
  let text: string;
  try {
    text = await readers.readFile(secretFilePath(source.file));
  } catch (error) {
    // The error's code only: its message may quote the path, never the contents, but says no more.
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
    throw new Error(`${describeSecretSource(source)} cannot be read (${code})`);
  }
  return text.replace(/\r?\n$/, "");
}

/**
 * Reads the secrets of every spec (`specs[i].secrets`, or the single spec's `secrets`); refuses with
 * a {@link ConfigurationError} naming each secret that cannot be read or is empty.
 */
export async function resolveSecretValues(
  specs: readonly { readonly secrets?: Secrets | undefined }[],
  readers: SecretReaders = {},
): Promise<SecretValues> {
  const complete: Required<SecretReaders> = {
    environment: readers.environment ?? process.env,
    readFile: readers.readFile ?? ((path) => readFile(path, "utf8")),
  };
  const bySecrets = new Map<Secrets, Readonly<Record<string, string>>>();
  const issues: ConfigurationIssue[] = [];
  for (const [index, spec] of specs.entries()) {
    const secrets = spec.secrets;
    if (!secrets || bySecrets.has(secrets)) continue;
    const prefix = specs.length > 1 ? `specs[${index}].secrets` : "secrets";
    const values: Record<string, string> = {};
    for (const [name, source] of Object.entries(secrets)) {
      try {
        const value = await readSource(source, complete);
        if (value === "") throw new Error(`${describeSecretSource(source)} is empty`);
        values[name] = value;
      } catch (error) {
        issues.push({ path: `${prefix}.${name}`, message: `secret ${name}: ${(error as Error).message}` });
      }
    }
    bySecrets.set(secrets, Object.freeze(values));
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
  const all = new Set<string>();
  for (const values of bySecrets.values()) for (const value of Object.values(values)) all.add(value);
  return Object.freeze({
    of: (secrets: Secrets | undefined) => (secrets && bySecrets.get(secrets)) || Object.freeze({}),
    values: Object.freeze([...all]),
  });
}
