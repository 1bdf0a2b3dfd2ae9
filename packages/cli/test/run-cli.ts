/**
 * Runs the built CLI (`dist/cli.js`) as a user would, in `cwd` with exactly `env` (nothing of the
 * test's own environment), and collects its exit code and output.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The built CLI's entry. */
export const CLI = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

/** What one run of the CLI gave. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `skyward ARGS` in `cwd` with `env`; never rejects (a failing run has its code). */
export function runCli(
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
