/**
 * The bootstrap building blocks: markers, layout, failure descriptions, and the plugin-ops script
 * (the `env` and `plugins` phases), run for real with bash. The full SSH bootstrap built on them is
 * tested in `@skyward/ssh`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { image } from "../spec/image.js";
import {
  assembleBootstrapScript,
  BOOTSTRAP_SHELL_LIBRARY,
  type BootstrapMarker,
  bootstrapLayout,
  describeBootstrapFailure,
  parseBootstrapMarker,
  renderEnvPhase,
  renderPluginOpsScript,
} from "./bootstrap-ops.js";

let scratch = "";

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "skyward-bootstrap-ops-"));
});

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Runs a script as the providers do, on bash's stdin, and reads its markers. */
function run(script: string): { code: number | null; stdout: string; markers: BootstrapMarker[] } {
  const result = spawnSync("bash", ["-s"], { input: script, encoding: "utf8", timeout: 60_000 });
  const markers = result.stdout
    .split("\n")
    .map(parseBootstrapMarker)
    .filter((marker): marker is BootstrapMarker => marker !== undefined);
  return { code: result.status, stdout: result.stdout, markers };
}

describe("renderPluginOpsScript, run with bash", () => {
  it("writes env.sh, then runs each op in the working directory with the image's env and SKYWARD_ROOT", () => {
    const root = join(scratch, "ok");
    const work = join(scratch, "ok-work");
    const script = renderPluginOpsScript({
      image: image({
        env: { SKY_GIVEN: "it's $here" },
        shellVars: { SKY_DERIVED: 'printf "%s!" "$SKY_GIVEN"' },
      }),
      root,
      venv: undefined,
      work,
      pluginOps: [
        {
          plugin: "probe",
          op: 'printf "%s|%s|%s|%s" "$PWD" "$SKYWARD_ROOT" "$SKY_GIVEN" "$SKY_DERIVED" > seen',
        },
        "true",
      ],
    });
    const result = run(script);
    expect(result.code, result.stdout).toBe(0);
    expect(
      result.markers.map((marker) =>
        marker.kind === "phase" ? `${marker.name}:${marker.status}` : marker.kind,
      ),
    ).toEqual(["env:start", "env:done", "plugins:start", "plugins:done", "done"]);
    expect(readFileSync(join(work, "seen"), "utf8")).toBe(`${work}|${root}|it's $here|it's $here!`);
    expect(statSync(bootstrapLayout(root).envFile).mode & 0o777).toBe(0o600);
    expect(result.stdout).toContain('plugin "probe" op 1 of 2');
    // An op's text may carry a secret: it is never printed.
    expect(result.stdout).not.toContain("SKY_DERIVED");
  });

  it("fails the plugins phase on a failing op, which the log's tail names", () => {
    const root = join(scratch, "failing");
    const result = run(
      renderPluginOpsScript({
        image: image(),
        root,
        venv: undefined,
        work: join(scratch, "failing-work"),
        pluginOps: [{ plugin: "daemon", op: "echo starting; exit 4" }, "echo never reached"],
      }),
    );
    expect(result.code).toBe(4);
    expect(result.markers.at(-1)).toEqual({ kind: "phase", name: "plugins", status: "failed", exitCode: 4 });
    expect(result.stdout).not.toContain("never reached");
    const log = readFileSync(bootstrapLayout(root).log, "utf8");
    expect(describeBootstrapFailure(log)).toBe('plugin "daemon": bootstrap op 1 of 2 failed (exit 4)');
  });

  it("runs only the env phase without ops, with nothing but core's shared functions", () => {
    const root = join(scratch, "no-ops");
    const script = renderPluginOpsScript({
      image: image(),
      root,
      venv: "/venv/",
      work: "/work",
      pluginOps: [],
    });
    expect(script).toContain(BOOTSTRAP_SHELL_LIBRARY);
    expect(script).not.toContain("skyward_phase_plugins");
    expect(script).not.toContain("skyward_phase_python");
    expect(script).toContain("SKYWARD_VENV=/venv\n");
    const result = run(script);
    expect(result.code, result.stdout).toBe(0);
    expect(result.markers.at(-1)).toEqual({ kind: "done" });
    expect(existsSync(bootstrapLayout(root).envFile)).toBe(true);
  });

  it("refuses a path that is not absolute, naming the field", () => {
    const pathOf = (venv: string | undefined, work: string, root = "/r"): string | undefined => {
      try {
        renderPluginOpsScript({ image: image(), root, venv, work, pluginOps: [] });
      } catch (error) {
        if (ConfigurationError.isInstance(error)) return error.issues[0]?.path;
        throw error;
      }
      return undefined;
    };
    expect(pathOf("venv", "/work")).toBe("venv");
    expect(pathOf(undefined, "work")).toBe("work");
    expect(pathOf(undefined, "/work", "root")).toBe("root");
    expect(pathOf(undefined, "/work")).toBeUndefined();
  });
});

describe("assembleBootstrapScript", () => {
  it("puts the header, the shared and given functions, the phases and skyward_main together", () => {
    const root = join(scratch, "assembled");
    const script = assembleBootstrapScript({
      header: [
        "#!/usr/bin/env bash",
        "set -uo pipefail",
        `SKYWARD_ROOT='${root}'`,
        "SKYWARD_TIMEOUT=60",
        'SKYWARD_LOG="$SKYWARD_ROOT/bootstrap.log"',
        "SKYWARD_LOGGING=",
        "SKYWARD_SUDO=",
      ],
      library: "\nsay_hello() {\n  echo hello from the library\n}\n",
      phases: renderEnvPhase(image({ env: { SKY_A: "1" } })),
      main: [
        "skyward_prepare_root || exit 1",
        "skyward_phase env skyward_phase_env",
        "skyward_phase hello say_hello",
        "skyward_mark done",
      ],
    });
    expect(script.startsWith("#!/usr/bin/env bash\n")).toBe(true);
    expect(script.endsWith("\nskyward_main </dev/null\n")).toBe(true);
    const result = run(script);
    expect(result.code, result.stdout).toBe(0);
    expect(result.stdout).toContain("hello from the library");
    expect(
      result.markers.filter((marker) => marker.kind === "phase" && marker.status === "done"),
    ).toHaveLength(2);
    expect(readFileSync(bootstrapLayout(root).log, "utf8")).toContain("::skyward:: phase hello done");
  });
});

describe("bootstrapLayout", () => {
  it("lays out the root's paths, without a trailing slash", () => {
    expect(bootstrapLayout("/opt/skyward/")).toEqual({
      root: "/opt/skyward",
      venv: "/opt/skyward/venv",
      python: "/opt/skyward/venv/bin/python",
      envFile: "/opt/skyward/env.sh",
      log: "/opt/skyward/bootstrap.log",
      runtime: "/opt/skyward/runtime",
      work: "/opt/skyward/work",
      contentHashFile: "/opt/skyward/.content-hash",
    });
  });
});

describe("describeBootstrapFailure", () => {
  it("names the failed op, and its plugin when the script knew it", () => {
    expect(describeBootstrapFailure('x\nplugin "daemon" op 1 of 2 failed (exit 5)\n')).toBe(
      'plugin "daemon": bootstrap op 1 of 2 failed (exit 5)',
    );
    expect(describeBootstrapFailure("plugin op 3 of 4 failed (exit 7)\n")).toBe(
      "plugin bootstrap op 3 of 4 failed (exit 7)",
    );
    expect(describeBootstrapFailure("pip failed\n")).toBeUndefined();
  });
});

describe("parseBootstrapMarker", () => {
  it("reads every marker form", () => {
    expect(parseBootstrapMarker("::skyward:: phase env start")).toEqual({
      kind: "phase",
      name: "env",
      status: "start",
    });
    expect(parseBootstrapMarker("::skyward:: phase warm-check done 12")).toEqual({
      kind: "phase",
      name: "warm-check",
      status: "done",
      durationMs: 12,
    });
    expect(parseBootstrapMarker("::skyward:: phase plugins failed 7")).toEqual({
      kind: "phase",
      name: "plugins",
      status: "failed",
      exitCode: 7,
    });
    expect(parseBootstrapMarker("::skyward:: warm")).toEqual({ kind: "warm" });
    expect(parseBootstrapMarker("::skyward:: done\r")).toEqual({ kind: "done" });
    expect(parseBootstrapMarker("::skyward:: phase pip done 3\r\n")).toMatchObject({ durationMs: 3 });
  });

  it("ignores other lines and malformed markers", () => {
    for (const line of [
      "",
      "Requirement already satisfied: pip",
      "  ::skyward:: done",
      "::skyward:: done later",
      "::skyward:: phase env",
      "::skyward:: phase env start 5",
      "::skyward:: phase env done",
      "::skyward:: phase env failed",
      "::skyward:: phase env done soon",
      "::skyward:: phase env finished 5",
    ]) {
      expect(parseBootstrapMarker(line), line).toBeUndefined();
    }
  });
});
