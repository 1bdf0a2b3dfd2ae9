/**
 * A scan of logs for secrets: the literal secrets a test suite plants (API keys, tokens) and the
 * shapes real ones have (private key blocks, Hugging Face and GitHub tokens, AWS access key ids).
 * Findings name the file, the line and which secret it was, never the secret itself.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/** A literal secret to look for, and the name findings report it by. */
export interface PlantedSecret {
  /** Where it comes from (`packages/cli/test/cli.test.ts: TOML_KEY`). Printed in findings. */
  readonly name: string;
  /** The secret itself. Never printed. */
  readonly value: string;
}

/** A shape of secret to look for. */
export interface SecretPattern {
  /** What it is (`private key block`). */
  readonly name: string;
  /** The pattern; the scan adds the `g` flag. */
  readonly pattern: RegExp;
}

/** One place a secret was found. */
export interface SecretFinding {
  /** The file it is in. */
  readonly file: string;
  /** Its 1-based line. */
  readonly line: number;
  /** The planted secret's or the pattern's name. */
  readonly secret: string;
}

/** What {@link scanForSecrets} looked at and found. */
export interface SecretScanReport {
  /** Files read. */
  readonly files: number;
  /** Bytes read. */
  readonly bytes: number;
  /** Everything found, in file order. */
  readonly findings: readonly SecretFinding[];
}

/** Shapes of real secrets that must never reach a log. */
export const DEFAULT_SECRET_PATTERNS: readonly SecretPattern[] = Object.freeze([
  { name: "private key block", pattern: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----/ },
  { name: "Hugging Face token", pattern: /\bhf_[A-Za-z0-9]{30,}\b/ },
  { name: "GitHub token", pattern: /\bgh[pousr]_[A-Za-z0-9]{36,}\b/ },
  { name: "AWS access key id", pattern: /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/ },
]);

/** Options of {@link scanForSecrets}. */
export interface SecretScanOptions {
  /** Literal secrets to look for. */
  readonly secrets?: readonly PlantedSecret[];
  /** Shapes to look for. Default {@link DEFAULT_SECRET_PATTERNS}. */
  readonly patterns?: readonly SecretPattern[];
}

async function filesUnder(path: string): Promise<string[]> {
  const info = await stat(path);
  if (info.isFile()) return [path];
  if (!info.isDirectory()) return [];
  const files: string[] = [];
  for (const entry of await readdir(path, { withFileTypes: true })) {
    files.push(...(await filesUnder(join(path, entry.name))));
  }
  return files;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let at = text.indexOf("\n"); at !== -1 && at < index; at = text.indexOf("\n", at + 1)) line++;
  return line;
}

/**
 * Reads every file in `paths` (directories recursively; missing paths are skipped) and reports each
 * occurrence of a planted secret or a secret-shaped string.
 */
export async function scanForSecrets(
  paths: readonly string[],
  options: SecretScanOptions = {},
): Promise<SecretScanReport> {
  const secrets = (options.secrets ?? []).filter((secret) => secret.value.length > 0);
  const patterns = options.patterns ?? DEFAULT_SECRET_PATTERNS;
  const files: string[] = [];
  for (const path of paths) {
    try {
      files.push(...(await filesUnder(path)));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  const findings: SecretFinding[] = [];
  let bytes = 0;
  for (const file of files) {
    const text = await readFile(file, "utf8");
    bytes += Buffer.byteLength(text);
    const found: { index: number; secret: string }[] = [];
    for (const secret of secrets) {
      for (let at = text.indexOf(secret.value); at !== -1; at = text.indexOf(secret.value, at + 1)) {
        found.push({ index: at, secret: secret.name });
      }
    }
    for (const { name, pattern } of patterns) {
      const global = new RegExp(
        pattern.source,
        pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`,
      );
      for (const match of text.matchAll(global)) found.push({ index: match.index, secret: name });
    }
    found.sort((a, b) => a.index - b.index);
    for (const { index, secret } of found) findings.push({ file, line: lineOf(text, index), secret });
  }
  return { files: files.length, bytes, findings };
}

/** A process whose command line holds a planted secret. */
export interface CommandLineFinding {
  readonly pid: number;
  /** The planted secret's name. */
  readonly secret: string;
}

/**
 * The processes of this machine (`/proc/<pid>/cmdline`) whose command line holds a planted secret,
 * each named by pid and the secret's name; processes that end while being read are skipped.
 */
export async function scanCommandLinesForSecrets(
  secrets: readonly PlantedSecret[],
): Promise<CommandLineFinding[]> {
  const findings: CommandLineFinding[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const commandLine = await readFile(`/proc/${entry}/cmdline`).catch(() => undefined);
    for (const secret of secrets) {
      if (secret.value.length > 0 && commandLine?.includes(secret.value)) {
        findings.push({ pid: Number(entry), secret: secret.name });
      }
    }
  }
  return findings;
}

const plantedSecretPattern =
  /\b([a-z_]*(?:api_?key|_key|token|secret|password|passphrase)[a-z_]*)\s*[:=]\s*(["'`])([^"'`\s$]{8,})\2/gi;

/**
 * The literal secrets a test source plants: string literals of 8 characters or more assigned to a
 * name or property that says it holds a key, token, secret or password (`apiKey: "rp_test_…"`,
 * `const HF_TOKEN = "hf_…"`, `TOML_KEY = "…"`). Names of variables that hold one (`apiKeyEnv:
 * "RUNPOD_API_KEY"`) are not secrets and are left out.
 */
export function plantedSecretsIn(source: string, origin: string): PlantedSecret[] {
  const secrets: PlantedSecret[] = [];
  for (const match of source.matchAll(plantedSecretPattern)) {
    const [, name = "", , value = ""] = match;
    // `apiKeyEnv: "FIXTURE_KEY"` names the variable that holds a secret: the name is no secret.
    if (/(?:env|variable|var)$/i.test(name) || /^[A-Z][A-Z0-9_]*$/.test(value)) continue;
    // `collectPluginSecrets: "packages/…/index.test.ts"` (a table of who uses an export) names a file.
    if (/^(?:packages|examples|scripts|docs)\/[\w./-]+\.\w+$/.test(value)) continue;
    secrets.push({ name: `${origin}: ${name}`, value });
  }
  return secrets;
}
