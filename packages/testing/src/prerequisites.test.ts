import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { isCi, requirePrerequisite, requireSystemPython } from "./prerequisites.js";

const ciScript = fileURLToPath(new URL("../../../scripts/ci.sh", import.meta.url));
const prerequisitesScript = fileURLToPath(
  new URL("../../../scripts/check-prerequisites.sh", import.meta.url),
);
const pythonTests = fileURLToPath(new URL("../../core/python/tests", import.meta.url));
const ciValues = [undefined, "", "0", "false", "FALSE", "False", "true", "TRUE", "1", "yes"];

/** The environment of a child process with CI set to `value` (or unset). */
function withCi(value: string | undefined): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.CI;
  return value === undefined ? env : { ...env, CI: value };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("isCi", () => {
  it.each([
    [undefined, false],
    ["", false],
    ["0", false],
    ["false", false],
    ["FALSE", false],
    ["true", true],
    ["1", true],
    ["yes", true],
  ])("CI=%j is %s", (value, expected) => {
    vi.stubEnv("CI", value);
    expect(isCi()).toBe(expected);
  });
});

describe("one rule for 'under CI' in TypeScript, the shell scripts and the Python tests", () => {
  it.each(ciValues)("CI=%j: scripts/ci.sh and prerequisites.is_ci() agree with isCi()", (value) => {
    vi.stubEnv("CI", value);
    const expected = isCi();
    const shell = spawnSync("bash", ["-c", `source "${ciScript}" && skyward_is_ci`], { env: withCi(value) });
    expect(shell.status === 0).toBe(expected);
    const python = spawnSync(
      "python3",
      ["-c", "import sys; from prerequisites import is_ci; sys.exit(0 if is_ci() else 1)"],
      { cwd: pythonTests, env: withCi(value), encoding: "utf8" },
    );
    expect(python.stderr).toBe("");
    expect(python.status === 0).toBe(expected);
  });
});

describe("scripts/check-prerequisites.sh (scripts/test.sh runs it first)", () => {
  // A machine without sshd, numpy or torch: the server's path leads nowhere, and the test Python is
  // one that sees no site-packages (where numpy and torch live).
  let scratch = "";
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), "skyward-prerequisites-"));
    writeFileSync(join(scratch, "bare-python"), '#!/bin/sh\nexec python3 -I -S "$@"\n', { mode: 0o755 });
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const bareMachine = (ci: string | undefined) => ({
    ...withCi(ci),
    SKYWARD_SSHD: join(scratch, "no-sshd"),
    SKYWARD_TEST_PYTHON: join(scratch, "bare-python"),
  });

  it.each(["true", "1"])("CI=%s: fails, naming sshd, numpy and torch", (ci) => {
    const run = spawnSync("bash", [prerequisitesScript], { env: bareMachine(ci), encoding: "utf8" });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/CI requires what is missing here/);
    for (const name of ["sshd", "numpy", "torch"])
      expect(run.stderr).toMatch(new RegExp(`^  ${name} \\(`, "m"));
  });

  it("outside CI: names what is missing and goes on (the suites that need it skip)", () => {
    const run = spawnSync("bash", [prerequisitesScript], { env: bareMachine(undefined), encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stderr).toMatch(/^ {2}sshd \(/m);
    expect(run.stderr).toMatch(/^ {2}numpy \(/m);
  });
});

describe("requirePrerequisite", () => {
  it("passes the skip reason through outside CI", () => {
    vi.stubEnv("CI", "");
    expect(requirePrerequisite("no torch", "PyTorch for the tests")).toBe("no torch");
    expect(requirePrerequisite(undefined, "PyTorch for the tests")).toBeUndefined();
  });

  it("throws under CI when the prerequisite is missing, and only then", () => {
    vi.stubEnv("CI", "true");
    expect(() => requirePrerequisite("no torch", "PyTorch for the tests")).toThrow(
      "CI requires PyTorch for the tests: no torch",
    );
    expect(requirePrerequisite(undefined, "PyTorch for the tests")).toBeUndefined();
  });
});

describe("requireSystemPython", () => {
  const python = "/usr/bin/python3";

  it("is undefined when the interpreter imports the module", async () => {
    vi.stubEnv("CI", "true");
    expect(
      await requireSystemPython("json.decoder", { purpose: "json", install: "python3", python }),
    ).toBeUndefined();
  });

  it("names the module and the package to install when the import fails, and throws under CI", async () => {
    vi.stubEnv("CI", "");
    const options = { purpose: "a module nobody has", install: "python3-nonexistent", python };
    expect(await requireSystemPython("skyward_no_such_module.sub", options)).toBe(
      `${python} cannot import skyward_no_such_module (apt-get install python3-nonexistent)`,
    );
    vi.stubEnv("CI", "1");
    await expect(requireSystemPython("skyward_no_such_module", options)).rejects.toThrow(
      /^CI requires a module nobody has: \/usr\/bin\/python3 cannot import skyward_no_such_module/,
    );
  });
});
