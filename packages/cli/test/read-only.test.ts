/**
 * The commands that only read — `skyward instances`, and `skyward down` when there is nothing it could
 * ask — run by a new user with no credentials set: they create nothing under `$SKYWARD_HOME` (no key
 * pair, no directory), and `down` says no provider could be asked rather than "No live instances.".
 * The built `dist/cli.js` runs without a skyward.toml, with RunPod and Vast.ai installed in the project.
 */
import { mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type CliRun, runCli } from "./run-cli.js";

const cliModules = fileURLToPath(new URL("../node_modules/@skyward", import.meta.url));

let scratch = "";
let project = "";
let home = "";
let skywardHome = "";

function run(args: readonly string[]): Promise<CliRun> {
  return runCli(args, {
    cwd: project,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: home,
      SKYWARD_HOME: skywardHome,
      AWS_EC2_METADATA_DISABLED: "true",
    },
  });
}

/** Every file and directory under `directory`, relative to it. */
async function walk(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.map((entry) => relative(directory, join(directory, entry))).sort();
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-cli-read-only-"));
  project = join(scratch, "project");
  home = join(scratch, "home");
  skywardHome = join(scratch, "skyward-home");
  await mkdir(join(project, "node_modules", "@skyward"), { recursive: true });
  for (const name of ["provider-runpod", "provider-vastai"])
    await symlink(join(cliModules, name), join(project, "node_modules", "@skyward", name), "dir");
});

beforeEach(async () => {
  for (const directory of [home, skywardHome]) {
    await rm(directory, { recursive: true, force: true });
    await mkdir(directory);
  }
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("with no credentials set", () => {
  it("skyward instances creates nothing under $SKYWARD_HOME or ~ and says no provider could be asked", async () => {
    const result = await run(["instances"]);
    expect(await walk(skywardHome)).toEqual([]);
    expect(await walk(home)).toEqual([]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("skyward: skipped runpod: ");
    expect(result.stderr).toContain("skyward: skipped vastai: ");
    expect(result.stderr).toContain("skyward: no provider could be asked for its instances\n");
  });

  it("skyward down --all (and --pool) creates nothing and says what instances says, not 'No live instances.'", async () => {
    const instances = await run(["instances"]);
    for (const args of [
      ["down", "--all", "--yes"],
      ["down", "--pool", "p1", "--yes"],
      ["down", "--all", "--yes", "--json"],
    ]) {
      const result = await run(args);
      expect(await walk(skywardHome)).toEqual([]);
      expect(await walk(home)).toEqual([]);
      expect(result).toEqual({ code: 1, stdout: "", stderr: instances.stderr });
    }
  });
});
