/**
 * What a test of a pool's secrets on `Local` shares: a fresh directory for its nodes' roots (with,
 * for a suite that fakes GPUs, a directory of fake tools first on `PATH` meanwhile), and the search,
 * while the pool runs, of every process's command line and every file under those roots for the
 * planted values.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type CommandLineFinding,
  type PlantedSecret,
  type SecretScanReport,
  scanCommandLinesForSecrets,
  scanForSecrets,
} from "./secret-scan.js";

/** Where planted secrets were found while a Local pool ran. */
export interface LocalSecretLeaks {
  /** Processes of this machine whose command line holds one. */
  readonly commandLines: readonly CommandLineFinding[];
  /** The files under the nodes' root, and those that hold one. */
  readonly files: SecretScanReport;
}

/**
 * Runs `body` with a fresh directory named `<prefix>XXXXXX` to give `Local({ workRoot })`, removed
 * afterwards; `toolsFirst` (a directory holding a fake `nvidia-smi`, say) leads `PATH` meanwhile, so
 * the client and the workers it starts find it.
 */
export async function withLocalNodeRoot<T>(
  prefix: string,
  body: (workRoot: string) => Promise<T>,
  options: { readonly toolsFirst?: string } = {},
): Promise<T> {
  const workRoot = await mkdtemp(join(tmpdir(), prefix));
  const path = process.env.PATH;
  if (options.toolsFirst) process.env.PATH = `${options.toolsFirst}:${path}`;
  try {
    return await body(workRoot);
  } finally {
    process.env.PATH = path;
    await rm(workRoot, { recursive: true, force: true });
  }
}

/** Searches, now, every process's command line and every file under `workRoot` for `secrets`. */
export async function localSecretLeaks(
  workRoot: string,
  secrets: readonly PlantedSecret[],
): Promise<LocalSecretLeaks> {
  return {
    commandLines: await scanCommandLinesForSecrets(secrets),
    files: await scanForSecrets([workRoot], { secrets, patterns: [] }),
  };
}
