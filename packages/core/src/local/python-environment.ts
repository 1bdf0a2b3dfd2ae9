/**
 * The Python environment on this machine, for the `Local` provider: the interpreter `image.python`
 * names (checked to be >= 3.10), and, when the image installs packages, a virtual environment cached
 * by the image's `envHash` — created with uv when it is on PATH, else with `venv`; packages installed with pip. The virtual
 * environment sees the interpreter's system site-packages, so what is installed already is used as it
 * is and never downloaded again.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { skywardHome } from "../config/home.js";
import { BootstrapError, ConfigurationError } from "../errors/errors.js";
import { DEFAULT_PIP_INDEX, envHash, type Image, pipInstallSteps } from "../spec/image.js";
import { processAlive } from "./process-alive.js";

/** The lowest Python the runtime supports. */
export const MINIMUM_PYTHON: readonly [number, number] = [3, 10];

/** A Python interpreter found on this machine. */
export interface PythonInterpreter {
  /** Absolute path of the executable. */
  readonly bin: string;
  /** `major.minor.micro`. */
  readonly version: string;
}

/** What tasks run with: the interpreter, and the virtual environment when the image installs packages. */
export interface PythonEnvironment {
  /** The Python to start workers with (inside the venv when there is one). */
  readonly pythonBin: string;
  /** The virtual environment, or undefined when the image installs nothing. */
  readonly venvDir: string | undefined;
  readonly version: string;
}

/**
 * Takes the lock to build an environment, or returns undefined when another process finished
 * building it while we waited. A lock whose owner died is taken over.
 */
async function acquireBuildLock(
  lock: string,
  readyMarker: string,
  signal?: AbortSignal,
): Promise<{ release: () => Promise<void> } | undefined> {
  for (;;) {
    signal?.throwIfAborted();
    try {
      await stat(readyMarker);
      return undefined;
    } catch {
      // not built (yet)
    }
    try {
      await mkdir(lock);
      await writeFile(join(lock, "pid"), String(process.pid));
      return { release: () => rm(lock, { recursive: true, force: true }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const owner = Number(await readFile(join(lock, "pid"), "utf8").catch(() => "0"));
    if (owner > 0 && !processAlive(owner)) {
      await rm(lock, { recursive: true, force: true });
      continue;
    }
    await new Promise((done) => setTimeout(done, 250));
  }
}

/** Progress of one step of setting up the environment. */
export type EnvironmentProgress = (phase: string, status: "started" | "finished", detail?: string) => void;

interface RunResult {
  stdout: string;
  stderr: string;
}

function run(
  file: string,
  args: readonly string[],
  options: { signal?: AbortSignal; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      file,
      args,
      {
        signal: options.signal,
        env: options.env ?? process.env,
        timeout: options.timeoutMs ?? 0,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        if (error) reject(Object.assign(error, { stdout: String(stdout), stderr: String(stderr) }));
        else resolvePromise({ stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

async function onPath(name: string): Promise<string | undefined> {
  for (const directory of (process.env.PATH ?? "").split(delimiter)) {
    if (!directory) continue;
    const candidate = join(directory, name);
    try {
      const stats = await stat(candidate);
      if (stats.isFile() && (stats.mode & 0o111) !== 0) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

async function probe(bin: string, signal?: AbortSignal): Promise<PythonInterpreter | undefined> {
  try {
    const { stdout } = await run(
      bin,
      ["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable)"],
      {
        signal,
        timeoutMs: 30_000,
      },
    );
    const [version, executable] = stdout.trim().split("\n");
    if (!version || !executable) return undefined;
    return { bin: executable, version };
  } catch {
    return undefined;
  }
}

function atLeastMinimum(version: string): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return major > MINIMUM_PYTHON[0] || (major === MINIMUM_PYTHON[0] && minor >= MINIMUM_PYTHON[1]);
}

function matchesRequested(version: string, requested: string): boolean {
  return version === requested || version.startsWith(`${requested}.`);
}

function pythonError(message: string): ConfigurationError {
  return new ConfigurationError({ issues: [{ path: "image.python", message }] });
}

/**
 * Finds the interpreter `image.python` asks for: `"auto"` (the `python3` on PATH), a version
 * (`"3.12"`: `python3.12` on PATH, a matching `python3`, or one uv manages) or an absolute path.
 */
export function findPython(requested: string, signal?: AbortSignal): Promise<PythonInterpreter> {
  // Probing an interpreter costs a process start (more behind a pyenv shim): once per process is enough.
  let found = foundInterpreters.get(requested);
  if (!found) {
    found = searchPython(requested, signal);
    foundInterpreters.set(requested, found);
    found.catch(() => foundInterpreters.delete(requested));
  }
  return found;
}

const foundInterpreters = new Map<string, Promise<PythonInterpreter>>();

async function searchPython(requested: string, signal?: AbortSignal): Promise<PythonInterpreter> {
  const minimum = `${MINIMUM_PYTHON[0]}.${MINIMUM_PYTHON[1]}`;
  if (requested === "auto") {
    const bin = await onPath("python3");
    const found = bin ? await probe(bin, signal) : undefined;
    if (!found)
      throw pythonError(
        "no python3 found on PATH; install Python >= 3.10 or set image.python to an interpreter path",
      );
    if (!atLeastMinimum(found.version)) {
      throw pythonError(
        `python3 on PATH (${found.bin}) is ${found.version}, Skyward needs >= ${minimum}; set image.python to a newer interpreter`,
      );
    }
    return found;
  }
  if (requested.startsWith("/")) {
    const found = await probe(requested, signal);
    if (!found) throw pythonError(`${requested} is not a working Python interpreter`);
    if (!atLeastMinimum(found.version))
      throw pythonError(`${requested} is Python ${found.version}, Skyward needs >= ${minimum}`);
    return found;
  }
  const [major, minor] = requested.split(".");
  const candidates = [`python${major}.${minor}`, "python3"];
  for (const name of candidates) {
    const bin = await onPath(name);
    const found = bin ? await probe(bin, signal) : undefined;
    if (found && matchesRequested(found.version, requested)) return found;
  }
  const uv = await onPath("uv");
  if (uv) {
    try {
      const { stdout } = await run(uv, ["python", "find", requested], { signal, timeoutMs: 60_000 });
      const found = await probe(stdout.trim(), signal);
      if (found && matchesRequested(found.version, requested)) return found;
    } catch {
      // uv does not have it either
    }
  }
  throw pythonError(
    `no Python ${requested} found (looked for ${candidates.join(", ")} on PATH${uv ? " and asked uv" : ""}); install it or set image.python to "auto" or an interpreter path`,
  );
}

function describeFailure(error: unknown): string {
  const failure = error as { stderr?: string; stdout?: string; message?: string };
  const output = `${failure.stdout ?? ""}${failure.stderr ?? ""}`.trim();
  return output ? output.split("\n").slice(-30).join("\n") : String(failure.message ?? error);
}

/**
 * Makes the environment an image asks for on this machine. With no pip packages it is the
 * interpreter itself; otherwise a virtual environment under `~/.skyward/venvs/`, reused while the
 * image's `envHash` and the interpreter's version stay the same.
 */
export async function preparePythonEnvironment(
  image: Image,
  options: { signal?: AbortSignal; progress?: EnvironmentProgress } = {},
): Promise<PythonEnvironment> {
  const { signal, progress } = options;
  progress?.("python", "started", image.python);
  const interpreter = await findPython(image.python, signal);
  progress?.("python", "finished", `${interpreter.bin} (${interpreter.version})`);
  if (image.pip.length === 0) {
    return { pythonBin: interpreter.bin, venvDir: undefined, version: interpreter.version };
  }
  const venvs = join(skywardHome(), "venvs");
  const venvDir = join(venvs, `${envHash(image)}-py${interpreter.version}`);
  const venvPython = join(venvDir, "bin", "python");
  const readyMarker = join(venvDir, ".skyward-ready");
  try {
    await stat(readyMarker);
    progress?.("venv", "finished", `reused ${venvDir}`);
    return { pythonBin: venvPython, venvDir, version: interpreter.version };
  } catch {
    // not built yet
  }
  await mkdir(venvs, { recursive: true });
  const lock = await acquireBuildLock(`${venvDir}.lock`, readyMarker, signal);
  if (!lock) {
    progress?.("venv", "finished", `reused ${venvDir}`);
    return { pythonBin: venvPython, venvDir, version: interpreter.version };
  }
  const uv = await onPath("uv");
  try {
    progress?.("venv", "started", venvDir);
    await rm(venvDir, { recursive: true, force: true });
    if (uv)
      await run(uv, ["venv", "--quiet", "--system-site-packages", "--python", interpreter.bin, venvDir], {
        signal,
      });
    else await run(interpreter.bin, ["-m", "venv", "--system-site-packages", venvDir], { signal });
    progress?.("venv", "finished");
    progress?.("pip", "started", image.pip.join(" "));
    // pip, not `uv pip`: uv does not count what the system site-packages hold as installed, and
    // would download it again.
    // pip sees the image's env, as over SSH (a proxy or PIP_INDEX_URL given there reaches it).
    const pipEnv = { ...process.env, ...image.env };
    const defaultIndex = pipEnv.PIP_INDEX_URL ?? DEFAULT_PIP_INDEX;
    for (const step of pipInstallSteps(image)) {
      const indexArgs = step.index
        ? [
            "--index-url",
            step.index.url,
            ...(step.index.trustedHost !== undefined ? ["--trusted-host", step.index.trustedHost] : []),
            ...(step.index.dependenciesFromDefault ? ["--extra-index-url", defaultIndex] : []),
          ]
        : [];
      await run(
        venvPython,
        [
          "-m",
          "pip",
          "install",
          "--quiet",
          "--disable-pip-version-check",
          ...indexArgs,
          ...step.requirements,
        ],
        { signal, env: pipEnv },
      );
    }
    progress?.("pip", "finished");
    await writeFile(readyMarker, `${new Date().toISOString()}\n`);
  } catch (error) {
    await rm(venvDir, { recursive: true, force: true });
    if (signal?.aborted) throw signal.reason;
    throw new BootstrapError({
      node: 0,
      phase: "pip",
      logTail: describeFailure(error),
      message: `Could not prepare the Python environment (${image.pip.join(" ")})`,
      cause: error,
    });
  } finally {
    await lock.release();
  }
  return { pythonBin: venvPython, venvDir, version: interpreter.version };
}
