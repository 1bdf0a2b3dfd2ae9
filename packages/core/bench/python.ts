/**
 * Running the benchmark's Python helpers: finding the interpreter the `Local` provider uses, running a
 * helper script that prints one JSON object, and the benchmark-only virtual environment the peers
 * (Ray, Dask) are installed into.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** This directory: the helpers live beside this file. */
export const benchDirectory = dirname(fileURLToPath(import.meta.url));

/** The benchmark's own virtual environment (gitignored), used only for the peers. */
export const peerVenv = join(benchDirectory, ".venv");

/** What a finished child process left behind. */
export interface ProcessOutput {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `file args…`, collecting its output. With `echo`, its stderr is passed through as it comes
 * (for long installs). Never rejects on a non-zero exit: the caller reads `code`.
 */
export function runProcess(
  file: string,
  args: readonly string[],
  options: { timeoutMs?: number; echo?: boolean; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<ProcessOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: options.cwd ?? benchDirectory,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      if (options.echo) process.stderr.write(chunk);
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      if (options.echo) process.stderr.write(chunk);
    });
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            stderr += `\n(killed after ${options.timeoutMs} ms)`;
            child.kill("SIGKILL");
          }, options.timeoutMs);
    child.once("error", (error) => {
      if (timer) clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The last lines of `text`, for error messages. */
export function tail(text: string, lines = 12): string {
  return text.trim().split("\n").slice(-lines).join("\n");
}

/**
 * The interpreter `python3` on PATH resolves to — the one the `Local` provider starts workers with
 * when `image.python` is `"auto"` — with its version.
 */
export async function hostPython(): Promise<{ bin: string; version: string }> {
  const output = await runProcess("python3", [
    "-c",
    "import sys; print(sys.executable); print('%d.%d.%d' % sys.version_info[:3])",
  ]);
  const [bin, version] = output.stdout.trim().split("\n");
  if (output.code !== 0 || !bin || !version) throw new Error(`python3 did not run: ${tail(output.stderr)}`);
  return { bin, version };
}

/**
 * Runs the helper `script` (a file in this directory) with `python` and returns the JSON object it
 * prints as its last line of stdout. Rejects with the helper's stderr when it fails.
 */
export async function runJsonHelper(
  python: string,
  script: string,
  args: readonly string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<unknown> {
  const output = await runProcess(python, [join(benchDirectory, script), ...args], options);
  const last = output.stdout.trim().split("\n").at(-1) ?? "";
  if (output.code !== 0 || !last.startsWith("{")) {
    throw new Error(`${script} failed (exit ${output.code}):\n${tail(`${output.stderr}\n${output.stdout}`)}`);
  }
  return JSON.parse(last) as unknown;
}

let venvReady: Promise<string> | undefined;

function ensureVenv(basePython: string): Promise<string> {
  venvReady ??= (async () => {
    const python = join(peerVenv, "bin", "python");
    if (existsSync(python)) return python;
    process.stderr.write(`[bench] creating ${peerVenv} (python3 -m venv)\n`);
    const venv = await runProcess(basePython, ["-m", "venv", peerVenv], { timeoutMs: 120_000 });
    if (venv.code !== 0) throw new Error(`python3 -m venv failed: ${tail(venv.stderr)}`);
    return python;
  })();
  return venvReady;
}

/**
 * Installs `requirement` (`"ray"`, `"dask[distributed]"`) from PyPI into the benchmark's own virtual
 * environment, made with `python3 -m venv` on first use; later runs find it installed. Returns the
 * environment's interpreter, or throws saying why the peer cannot be installed here.
 */
export async function preparePeer(basePython: string, name: string, requirement: string): Promise<string> {
  const python = await ensureVenv(basePython);
  const marker = join(peerVenv, `.installed-${name}`);
  if (existsSync(marker)) return python;
  process.stderr.write(`[bench] pip install ${requirement} into ${peerVenv} (once)\n`);
  const pip = await runProcess(
    python,
    ["-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", requirement],
    { timeoutMs: 20 * 60_000, echo: true },
  );
  if (pip.code !== 0) throw new Error(`pip install ${requirement} failed:\n${tail(pip.stderr)}`);
  await writeFile(marker, `${new Date().toISOString()}\n`);
  return python;
}
