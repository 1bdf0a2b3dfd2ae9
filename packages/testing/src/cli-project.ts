/**
 * A user's project for running the built Skyward CLI against a fake provider API: a scratch directory
 * with a `skyward.toml`, the provider packages installed (linked) in its `node_modules`, and a HOME and
 * SKYWARD_HOME of its own. The CLI runs as a child process with exactly the environment given —
 * nothing of the test's own — so a credential reaches it only where the test puts it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** What one run of the CLI gave. */
export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options of {@link createCliProject}. */
export interface CliProjectOptions {
  /** The built CLI's entry (`@skyward/cli`'s `dist/cli.js`). */
  readonly cli: string;
  /** The scratch directory's name prefix (`skyward-verda-cli-`). */
  readonly prefix: string;
  /** Packages installed in the project, as `node_modules/@skyward/<name>` → the package's directory. */
  readonly packages: Readonly<Record<string, string>>;
  /** The project's `skyward.toml`. */
  readonly toml: string;
  /** What every run's environment holds besides PATH, HOME and SKYWARD_HOME (credentials, NO_COLOR). */
  readonly env?: Readonly<Record<string, string>>;
  /** How long one run may take, ms. Default 60000. */
  readonly timeoutMs?: number;
}

/** A project the CLI runs in; disposing it removes its scratch directory. */
export interface CliProject extends AsyncDisposable {
  /** The project directory (the runs' working directory). */
  readonly directory: string;
  /** The scratch directory holding the project, HOME (`home`) and SKYWARD_HOME (`skyward-home`). */
  readonly scratch: string;
  /** Runs `skyward ARGS` in the project; `env` replaces the options' `env` for this run. Never rejects. */
  run(args: readonly string[], env?: Readonly<Record<string, string>>): Promise<CliRun>;
}

/** Makes the project: `skyward.toml`, the packages linked into `node_modules/@skyward`, an empty HOME. */
export async function createCliProject(options: CliProjectOptions): Promise<CliProject> {
  const scratch = await mkdtemp(join(tmpdir(), options.prefix));
  const directory = join(scratch, "project");
  await mkdir(join(directory, "node_modules", "@skyward"), { recursive: true });
  await mkdir(join(scratch, "home"));
  for (const [name, source] of Object.entries(options.packages))
    await symlink(source, join(directory, "node_modules", "@skyward", name), "dir");
  await writeFile(join(directory, "skyward.toml"), options.toml);
  return {
    directory,
    scratch,
    run: (args, env = options.env ?? {}) =>
      new Promise((resolve) => {
        execFile(
          process.execPath,
          [options.cli, ...args],
          {
            cwd: directory,
            env: {
              PATH: process.env.PATH ?? "",
              HOME: join(scratch, "home"),
              SKYWARD_HOME: join(scratch, "skyward-home"),
              ...env,
            },
            timeout: options.timeoutMs ?? 60_000,
          },
          (error, stdout, stderr) => {
            const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
            resolve({ code, stdout, stderr });
          },
        );
      }),
    [Symbol.asyncDispose]: () => rm(scratch, { recursive: true, force: true }),
  };
}

/** The data lines of a table the CLI printed (its first line is the header), as arrays of cells. */
export function tableRows(stdout: string): string[][] {
  return stdout
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s{2,}/));
}

/** The built CLI as a provider package's tests use it: {@link builtCli}. */
export interface BuiltCli {
  /** `@skyward/cli`'s `dist/cli.js`. */
  readonly cli: string;
  /** The provider package's directory (linked into every project). */
  readonly packageDirectory: string;
  /** Whether the CLI and the provider package are both built (`dist/`): the CLI loads the built package. */
  readonly built: boolean;
  /** A project with the provider package installed: {@link createCliProject} with the CLI and package given. */
  project(options: Omit<CliProjectOptions, "cli" | "packages">): Promise<CliProject>;
}

/**
 * The built CLI for the tests of one provider package: `testFileUrl` is a test file's
 * `import.meta.url` in the package's `test/` directory (its parent is the package), `packageName` the
 * name the package is installed under (`provider-slurm` → `node_modules/@skyward/provider-slurm`).
 */
export function builtCli(testFileUrl: string, packageName: string): BuiltCli {
  const packageDirectory = fileURLToPath(new URL("..", testFileUrl));
  const cli = join(
    dirname(createRequire(testFileUrl).resolve("@skyward/cli/package.json")),
    "dist",
    "cli.js",
  );
  return {
    cli,
    packageDirectory,
    built: existsSync(cli) && existsSync(join(packageDirectory, "dist", "index.js")),
    project: (options) =>
      createCliProject({ ...options, cli, packages: { [packageName]: packageDirectory } }),
  };
}
