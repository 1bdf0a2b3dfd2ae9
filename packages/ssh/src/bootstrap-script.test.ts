/**
 * The bootstrap script, run for real with bash in temporary root directories (the uploaded runtime
 * simulated by copying @skyward/core's Python runtime). pip runs offline: the default index points at a
 * directory that does not exist, so anything not satisfied locally fails instead of downloading.
 */
import { execFileSync, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigurationError, type Image, type ImageInput, image } from "@skyward/core";
import {
  BOOTSTRAP_SHELL_LIBRARY,
  type BootstrapMarker,
  bootstrapLayout,
  contentHash,
  describeBootstrapFailure,
  parseBootstrapMarker,
  pythonRuntimeDirectory,
  renderEnvPhase,
  renderPluginsPhase,
  shellQuote,
} from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// Core's pip tests use the same wheels; a test helper package would make a dependency cycle.
import { buildIndex, buildWheel } from "../../core/test/wheels.js";
import { type BootstrapScriptOptions, renderBootstrapScript } from "./bootstrap-script.js";

const pythonSource = pythonRuntimeDirectory();
const VERSION = "0.1.0-test";

let scratch = "";
/** The root most tests share, so its virtual environment is made once. */
let root = "";
let baseEnv: NodeJS.ProcessEnv = {};

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly markers: BootstrapMarker[];
}

function uploadRuntime(into: string): void {
  const runtime = join(into, "runtime");
  mkdirSync(runtime, { recursive: true });
  const skipCaches = (source: string) => basename(source) !== "__pycache__";
  cpSync(join(pythonSource, "skyward"), join(runtime, "skyward"), { recursive: true, filter: skipCaches });
  cpSync(join(pythonSource, "skyward_worker.py"), join(runtime, "skyward_worker.py"));
}

function newRoot(name: string): string {
  const directory = join(scratch, name);
  uploadRuntime(directory);
  return directory;
}

/** Runs a script the way the SSH transport does: on bash's stdin. */
function runBootstrap(script: string, env: NodeJS.ProcessEnv = baseEnv, timeoutMs = 150_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-s"], { env, timeout: timeoutMs, killSignal: "SIGKILL" });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      const markers = stdout
        .split("\n")
        .map(parseBootstrapMarker)
        .filter((marker): marker is BootstrapMarker => marker !== undefined);
      resolve({ code, stdout, stderr, markers });
    });
    child.stdin.end(script);
  });
}

function render(input: ImageInput, options: Partial<BootstrapScriptOptions> = {}): string {
  return renderBootstrapScript({ image: image(input), root, skywardVersion: VERSION, ...options });
}

/** The markers as `name:status` strings (`warm`, `done` as they are). */
function timeline(run: Run): string[] {
  return run.markers.map((marker) =>
    marker.kind === "phase" ? `${marker.name}:${marker.status}` : marker.kind,
  );
}

function phasesRun(run: Run): string[] {
  return run.markers.flatMap((marker) =>
    marker.kind === "phase" && marker.status === "start" ? [marker.name] : [],
  );
}

function expectSuccess(run: Run): void {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  expect(run.markers.at(-1)).toEqual({ kind: "done" });
}

/** Sources env.sh with `shell` and returns what a Python process then sees for `names`. */
function environmentSeen(shell: string, envFile: string, names: readonly string[]): Record<string, string> {
  const code = "import json, os, sys; print(json.dumps({k: os.environ.get(k) for k in sys.argv[1:]}))";
  const output = execFileSync(
    shell,
    ["-c", '. "$1" && shift && exec python3 -c "$@"', shell, envFile, code, ...names],
    {
      encoding: "utf8",
      env: baseEnv,
      timeout: 30_000,
    },
  );
  return JSON.parse(output) as Record<string, string>;
}

/** A deterministic PRNG (mulberry32), so a failing property run can be replayed from its seed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SHELL_PIECES = [
  "'",
  '"',
  "\\",
  "$(",
  ")",
  "$(echo injected)",
  "`",
  "`id`",
  "\n",
  "\r\n",
  "!",
  "!!",
  "*",
  "?",
  "[a-z]",
  "-",
  "--",
  "-e",
  "$HOME",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, on purpose.
  "${PATH}",
  "$'\\n'",
  "'\\''",
  "%s",
  "%q",
  "~",
  "#",
  ";",
  "&&",
  "|",
  "<",
  ">",
  " ",
  "\t",
  "=",
  "{a,b}",
];

function randomValue(random: () => number, index: number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const byte = () => String.fromCodePoint(1 + Math.floor(random() * 255));
  const unicode = () => {
    const ranges: [number, number][] = [
      [0x00a0, 0x07ff],
      [0x0800, 0xd7ff],
      [0xe000, 0xfffd],
      [0x1f300, 0x1faff],
      [0x10000, 0x10fff],
    ];
    const [low, high] = pick(ranges);
    return String.fromCodePoint(low + Math.floor(random() * (high - low + 1)));
  };
  const run = (make: () => string) => Array.from({ length: 1 + Math.floor(random() * 12) }, make).join("");
  // The first entries cover each kind on its own; the rest mix them.
  switch (index) {
    case 0:
      return "";
    case 1:
      return run(byte);
    case 2:
      return "😀👩‍👩‍👧‍👦 ünïcødé 中文 🏳️‍🌈";
    case 3:
      return SHELL_PIECES.join("");
    case 4:
      return "--leading-dashes";
    case 5:
      return "-";
    case 6:
      return "\n\n";
  }
  const makers = [byte, unicode, () => pick(SHELL_PIECES), () => "plain"];
  return Array.from({ length: Math.floor(random() * 7) }, () => run(pick(makers))).join("");
}

function randomName(random: () => number, index: number): string {
  const first = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
  const rest = `${first}0123456789`;
  let name = first[Math.floor(random() * first.length)] ?? "_";
  const length = Math.floor(random() * 10);
  for (let i = 0; i < length; i++) name += rest[Math.floor(random() * rest.length)];
  // Prefixed so a random name cannot clobber PATH, IFS, BASH_ENV…; still any valid shape after it.
  return `SKYT${index}_${name}`;
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "skyward-bootstrap-"));
  root = newRoot("shared");
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(PIP|UV)_/.test(key) || key === "PIP_CERT") env[key] = value;
  }
  env.PIP_INDEX_URL = pathToFileURL(join(scratch, "no-default-index")).href;
  baseEnv = env;
});

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("renderBootstrapScript, run with bash", () => {
  it("exports every env value exactly as given, for bash and sh (property test)", async () => {
    const seed = Number(process.env.SKYWARD_PROPERTY_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const random = prng(seed);
    const env: Record<string, string> = {};
    for (let index = 0; index < 150; index++) env[randomName(random, index)] = randomValue(random, index);
    const names = Object.keys(env);

    const run = await runBootstrap(render({ env }));
    expect(run.code, `seed ${seed}\n${run.stdout}${run.stderr}`).toBe(0);
    expect(phasesRun(run)).toEqual(["warm-check", "env", "python", "venv", "runtime"]);

    const envFile = bootstrapLayout(root).envFile;
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    for (const shell of ["bash", "sh"]) {
      const seen = environmentSeen(shell, envFile, names);
      for (const name of names) {
        expect(seen[name], `seed ${seed} (SKYWARD_PROPERTY_SEED=${seed} replays it), ${shell}, ${name}`).toBe(
          env[name],
        );
      }
    }
  }, 180_000);

  it("evaluates shellVars once, at bootstrap, with the image's env in sight", async () => {
    const counter = join(scratch, "shell-var-runs");
    const seed = Number(process.env.SKYWARD_PROPERTY_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const random = prng(seed);
    // Snippets print random values through printf %b octal escapes (snippets are one line of
    // ASCII), so the script's own quoting of the results meets every character.
    const printed: Record<string, string> = {};
    const shellVars: Record<string, string> = {
      SKY_COUNTED: `echo run >> ${shellQuote(counter)}; echo counted; echo; echo`,
      SKY_FROM_ENV: 'printf "%s+derived" "$SKY_BASE"',
    };
    for (let index = 0; index < 40; index++) {
      const value = randomValue(random, index);
      const escaped = [...Buffer.from(value, "utf8")].map((byte) => `\\0${byte.toString(8)}`).join("");
      shellVars[`SKY_PRINTED_${index}`] = `printf '%b' '${escaped}'`;
      // "$( … )" drops trailing newlines.
      printed[`SKY_PRINTED_${index}`] = value.replace(/\n+$/, "");
    }
    const options = { env: { SKY_BASE: "base value" }, shellVars };
    const first = await runBootstrap(render(options));
    expectSuccess(first);
    const envFile = bootstrapLayout(root).envFile;
    const expected = { SKY_COUNTED: "counted", SKY_FROM_ENV: "base value+derived", ...printed };
    for (const shell of ["bash", "sh", "bash"]) {
      const seen = environmentSeen(shell, envFile, Object.keys(expected));
      for (const [name, value] of Object.entries(expected)) {
        expect(seen[name], `seed ${seed} (SKYWARD_PROPERTY_SEED=${seed} replays it), ${shell}, ${name}`).toBe(
          value,
        );
      }
    }
    const second = await runBootstrap(render(options));
    expectSuccess(second);
    expect(second.markers).toContainEqual({ kind: "warm" });
    expect(readFileSync(counter, "utf8")).toBe("run\n");
  }, 180_000);

  it("fails the env phase when a shellVars snippet fails", async () => {
    const run = await runBootstrap(render({ shellVars: { SKY_BROKEN: "echo partial; exit 3" } }));
    expect(run.code).toBe(3);
    expect(run.markers.at(-1)).toEqual({ kind: "phase", name: "env", status: "failed", exitCode: 3 });
    expect(run.stdout).toContain("shellVars.SKY_BROKEN failed (exit 3)");
  }, 180_000);

  it("starts warm when the node already has the image, and re-runs when the image changes", async () => {
    const first = await runBootstrap(render({ env: { SKY_WARM: "one" } }));
    expectSuccess(first);
    expect(first.markers).not.toContainEqual({ kind: "warm" });
    const layout = bootstrapLayout(root);
    expect(readFileSync(layout.contentHashFile, "utf8").trim()).toBe(
      contentHash(image({ env: { SKY_WARM: "one" } }), VERSION),
    );

    const again = await runBootstrap(render({ env: { SKY_WARM: "one" } }));
    expectSuccess(again);
    expect(timeline(again)).toEqual(["warm-check:start", "warm-check:done", "warm", "done"]);
    expect(again.stdout).toContain(`skyward: Python `);

    const changed = await runBootstrap(render({ env: { SKY_WARM: "two" } }));
    expectSuccess(changed);
    expect(phasesRun(changed)).toEqual(["warm-check", "env", "python", "venv", "runtime"]);
    expect(environmentSeen("bash", layout.envFile, ["SKY_WARM"])).toEqual({ SKY_WARM: "two" });

    // Other plugin ops are another environment too.
    const withOps = await runBootstrap(render({ env: { SKY_WARM: "two" } }, { pluginOps: ["true"] }));
    expectSuccess(withOps);
    expect(phasesRun(withOps)).toContain("plugins");
  }, 180_000);

  it("picks the host's python3 for auto, for its own version, and for its path", async () => {
    const [hostVersion = "", hostExecutable = ""] = execFileSync(
      "python3",
      ["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable)"],
      { encoding: "utf8", env: baseEnv },
    )
      .trim()
      .split("\n");
    const majorMinor = hostVersion.split(".").slice(0, 2).join(".");
    for (const python of ["auto", hostExecutable, majorMinor]) {
      // A fresh env value each time, so the run is never warm.
      const run = await runBootstrap(render({ python, env: { SKY_PYTHON: python } }));
      expectSuccess(run);
      // For a version, python3.X comes first: the same interpreter under another name.
      expect(run.stdout).toContain(
        python === majorMinor
          ? `using Python ${hostVersion} at /`
          : `using Python ${hostVersion} at ${hostExecutable}\n`,
      );
      const venvBase = execFileSync(
        bootstrapLayout(root).python,
        ["-c", "import sys; print(sys.version.split()[0]); print(sys.prefix != sys.base_prefix)"],
        { encoding: "utf8" },
      );
      expect(venvBase).toBe(`${hostVersion}\nTrue\n`);
    }
  }, 180_000);

  it("fails the python phase, without hanging, when no interpreter fits and downloads are off", async () => {
    const fresh = newRoot("no-python");
    for (const python of ["3.99", "/nonexistent/bin/python3"]) {
      const script = renderBootstrapScript({
        image: image({ python }),
        root: fresh,
        skywardVersion: VERSION,
        allowPythonDownload: false,
      });
      const run = await runBootstrap(script, baseEnv, 30_000);
      expect(run.code).not.toBe(0);
      expect(run.code).not.toBeNull();
      expect(run.markers.at(-1)).toEqual({
        kind: "phase",
        name: "python",
        status: "failed",
        exitCode: run.code,
      });
      expect(phasesRun(run)).not.toContain("venv");
      expect(existsSync(join(fresh, ".content-hash"))).toBe(false);
    }
  }, 180_000);

  it("installs a local wheel and a scoped index's package, and does not reinstall what is satisfied", async () => {
    const wheels = join(scratch, "wheels");
    const local = buildWheel(wheels, "skyward-local-probe", "skyward_local_probe", 42);
    const scoped = buildWheel(join(wheels, "scoped"), "skyward-index-probe", "skyward_index_probe", 7);
    const indexUrl = buildIndex(join(scratch, "index"), "skyward-index-probe", scoped);
    const script = render({
      // `pip` is in the base interpreter, seen through the system site-packages.
      pip: [local, "skyward-index-probe", "pip"],
      pipIndexes: [{ url: indexUrl, packages: ["skyward_index_probe"] }],
    });
    const run = await runBootstrap(script);
    expectSuccess(run);
    expect(run.stdout).toMatch(/Requirement already satisfied: pip in /);

    const python = bootstrapLayout(root).python;
    const report = JSON.parse(
      execFileSync(
        python,
        [
          "-c",
          [
            "import json, sys, sysconfig, pip, skyward_local_probe, skyward_index_probe",
            "print(json.dumps({'values': [skyward_local_probe.VALUE, skyward_index_probe.VALUE],",
            "  'venv_site': sysconfig.get_paths()['purelib'], 'pip': pip.__file__, 'prefix': sys.prefix}))",
          ].join("\n"),
        ],
        { encoding: "utf8", env: baseEnv },
      ),
    ) as { values: number[]; venv_site: string; pip: string; prefix: string };
    expect(report.values).toEqual([42, 7]);
    expect(report.pip.startsWith(report.prefix)).toBe(false);
    expect(existsSync(join(report.venv_site, "pip"))).toBe(false);
    expect(existsSync(join(report.venv_site, "skyward_local_probe"))).toBe(true);

    // Another image (a new env value) makes the environment again from nothing: the packages come
    // back, and what the system site-packages satisfies (pip) is still not installed into it.
    const again = await runBootstrap(
      render({
        pip: [local, "skyward-index-probe", "pip"],
        pipIndexes: [{ url: indexUrl, packages: ["skyward_index_probe"] }],
        env: { SKY_AGAIN: "1" },
      }),
    );
    expectSuccess(again);
    expect(again.stdout).toMatch(/Requirement already satisfied: pip in /);
    expect(again.stdout).toMatch(/Successfully installed skyward-local-probe-0\.1/);
    expect(existsSync(join(report.venv_site, "pip"))).toBe(false);
  }, 180_000);

  it("runs the pip phase with the image's env: an index (or a proxy) given there is the one pip uses", async () => {
    const wheel = buildWheel(join(scratch, "wheels-env"), "skyward-env-probe", "skyward_env_probe", 5);
    const indexUrl = buildIndex(join(scratch, "index-env"), "skyward-env-probe", wheel);
    const fresh = newRoot("env-pip");
    // The runner's PIP_INDEX_URL points nowhere: only the image's value can find the package.
    const run = await runBootstrap(
      renderBootstrapScript({
        image: image({ pip: ["skyward-env-probe"], env: { PIP_INDEX_URL: indexUrl } }),
        root: fresh,
        skywardVersion: VERSION,
      }),
    );
    expectSuccess(run);
    expect(
      execFileSync(bootstrapLayout(fresh).python, ["-c", "import skyward_env_probe as m; print(m.VALUE)"], {
        encoding: "utf8",
        env: baseEnv,
      }).trim(),
    ).toBe("5");
  }, 180_000);

  it("takes a scoped index's packages' missing dependencies from the default index only when the index says so", async () => {
    const scopedWheel = buildWheel(
      join(scratch, "wheels-deps", "scoped"),
      "skyward-rapids-probe",
      "skyward_rapids_probe",
      11,
      "skyward-dep-probe",
    );
    const dependency = buildWheel(
      join(scratch, "wheels-deps", "default"),
      "skyward-dep-probe",
      "skyward_dep_probe",
      3,
    );
    const scopedIndex = buildIndex(join(scratch, "index-scoped"), "skyward-rapids-probe", scopedWheel);
    // The "default" index (PyPI's stand-in) holds the dependency; the scoped one does not.
    const defaultIndex = buildIndex(join(scratch, "index-default"), "skyward-dep-probe", dependency);
    const attempt = (dependenciesFromDefault: boolean, name: string) => {
      const fresh = newRoot(name);
      const script = renderBootstrapScript({
        image: image({
          pip: ["skyward-rapids-probe"],
          pipIndexes: [{ url: scopedIndex, packages: ["skyward-rapids-probe"], dependenciesFromDefault }],
          env: { PIP_INDEX_URL: defaultIndex },
        }),
        root: fresh,
        skywardVersion: VERSION,
      });
      return { fresh, script };
    };

    const strict = attempt(false, "deps-strict");
    expect(strict.script).not.toContain("--extra-index-url");
    // FORCE_COLOR set (as scripts/test.sh sets it for CI) makes pip colour its output and end it with
    // a colour reset and no newline: the marker after it must still start a line of its own.
    const refused = await runBootstrap(strict.script, { ...baseEnv, FORCE_COLOR: "0" });
    expect(refused.code).not.toBe(0);
    // The runtime phase runs beside pip and may end after it: the pip phase failed, whichever came last.
    expect(refused.markers).toContainEqual(
      expect.objectContaining({ kind: "phase", name: "pip", status: "failed" }),
    );
    expect(`${refused.stdout}${refused.stderr}`).toMatch(/skyward-dep-probe/);

    const open = attempt(true, "deps-default");
    const run = await runBootstrap(open.script);
    expectSuccess(run);
    expect(
      execFileSync(
        bootstrapLayout(open.fresh).python,
        ["-c", "import skyward_rapids_probe as a, skyward_dep_probe as b; print(a.VALUE, b.VALUE)"],
        { encoding: "utf8", env: baseEnv },
      ).trim(),
    ).toBe("11 3");
  }, 180_000);

  it("runs the plugin ops again on a warm start after a reboot, and not again within one boot", async () => {
    const fresh = newRoot("reboot");
    const bootIdFile = join(scratch, "fake-boot-id");
    const env = { ...baseEnv, SKYWARD_BOOT_ID_FILE: bootIdFile };
    const runs = join(fresh, "op-runs");
    const script = renderBootstrapScript({
      image: image({ env: { SKY_REBOOT: "1" } }),
      root: fresh,
      skywardVersion: VERSION,
      pluginOps: [
        {
          plugin: "daemon",
          op: '[ ! -e "$SKYWARD_ROOT/break" ] || { echo "daemon did not start"; exit 5; }',
        },
        { plugin: "daemon", op: 'echo ran >> "$SKYWARD_ROOT/op-runs"' },
      ],
    });
    const opRuns = () => readFileSync(runs, "utf8").split("\n").filter(Boolean).length;
    const recordedBoot = () => readFileSync(join(fresh, ".boot-id"), "utf8").trim();
    const warmOnly = ["warm-check:start", "warm-check:done", "warm", "done"];
    const warmWithOps = [
      "warm-check:start",
      "warm-check:done",
      "warm",
      "plugins:start",
      "plugins:done",
      "done",
    ];

    writeFileSync(bootIdFile, "boot-one\n");
    const cold = await runBootstrap(script, env);
    expectSuccess(cold);
    expect(phasesRun(cold)).toContain("plugins");
    expect(opRuns()).toBe(1);
    expect(recordedBoot()).toBe("boot-one");

    // The same boot: a warm start does not redo the ops.
    const sameBoot = await runBootstrap(script, env);
    expectSuccess(sameBoot);
    expect(timeline(sameBoot)).toEqual(warmOnly);
    expect(opRuns()).toBe(1);

    // After a reboot the environment is still warm, but what the ops set up is gone: they run again.
    writeFileSync(bootIdFile, "boot-two\n");
    const rebooted = await runBootstrap(script, env);
    expectSuccess(rebooted);
    expect(timeline(rebooted)).toEqual(warmWithOps);
    expect(rebooted.stdout).toContain("the machine restarted since the plugin ops ran");
    expect(opRuns()).toBe(2);
    expect(recordedBoot()).toBe("boot-two");
    expect(timeline(await runBootstrap(script, env))).toEqual(warmOnly);
    expect(opRuns()).toBe(2);

    // An op failing after a reboot fails the node, and the next start in that boot tries again.
    writeFileSync(bootIdFile, "boot-three\n");
    writeFileSync(join(fresh, "break"), "");
    const broken = await runBootstrap(script, env);
    expect(broken.code).toBe(5);
    expect(broken.markers.at(-1)).toEqual({ kind: "phase", name: "plugins", status: "failed", exitCode: 5 });
    const log = readFileSync(bootstrapLayout(fresh).log, "utf8");
    expect(log).toContain('plugin "daemon" op 1 of 2 failed (exit 5)');
    // What the SSH node and the Local provider put in their BootstrapError's message.
    expect(describeBootstrapFailure(log)).toBe('plugin "daemon": bootstrap op 1 of 2 failed (exit 5)');
    rmSync(join(fresh, "break"));
    const mended = await runBootstrap(script, env);
    expectSuccess(mended);
    expect(timeline(mended)).toEqual(warmWithOps);
    expect(opRuns()).toBe(3);

    // No kernel boot id: the boot time stands in for it, and is as stable within a boot.
    const noBootId = { ...baseEnv, SKYWARD_BOOT_ID_FILE: join(scratch, "no-such-boot-id") };
    const fallback = await runBootstrap(script, noBootId);
    expectSuccess(fallback);
    expect(timeline(fallback)).toEqual(warmWithOps);
    expect(recordedBoot()).toMatch(/^boot-time \d+$/);
    expect(timeline(await runBootstrap(script, noBootId))).toEqual(warmOnly);
    expect(opRuns()).toBe(4);
  }, 180_000);

  it("fails the plugins phase on a failing op, its output in bootstrap.log", async () => {
    const ops = [
      // The venv is activated and env.sh sourced for the ops.
      '[ "$(command -v python)" = "$SKYWARD_VENV/bin/python" ] && [ "$SKY_OP_ENV" = "from env" ] || exit 9',
      "echo first op ran",
      "echo 'op output before failing'; echo 'op error output' >&2; exit 7",
      "echo never reached",
    ];
    const script = render({ env: { SKY_OP_ENV: "from env" } }, { pluginOps: ops });
    for (let attempt = 0; attempt < 2; attempt++) {
      const run = await runBootstrap(script);
      expect(run.code).toBe(7);
      expect(run.markers.at(-1)).toEqual({ kind: "phase", name: "plugins", status: "failed", exitCode: 7 });
      expect(run.stdout).toContain("first op ran");
      expect(run.stdout).not.toContain("never reached");
      const log = readFileSync(bootstrapLayout(root).log, "utf8");
      expect(log).toContain("op output before failing");
      expect(log).toContain("op error output");
      expect(log).toContain("plugin op 3 of 4 failed (exit 7)");
      expect(log).toContain("::skyward:: phase plugins failed 7");
      // A failed bootstrap never counts as warm: the second attempt runs (and fails) again.
      expect(existsSync(bootstrapLayout(root).contentHashFile)).toBe(false);
    }
  }, 180_000);

  it("works in a root whose path needs quoting", async () => {
    const awkward = newRoot("it's a $(root) `dir` with * and \\ and\nnewline");
    const script = renderBootstrapScript({
      image: image({ env: { SKY_AWKWARD: "yes" } }),
      root: awkward,
      skywardVersion: VERSION,
      pluginOps: ['test "$(pwd)" = "$SKYWARD_ROOT/work"'],
    });
    const run = await runBootstrap(script);
    expectSuccess(run);
    expect(environmentSeen("bash", join(awkward, "env.sh"), ["SKY_AWKWARD"])).toEqual({ SKY_AWKWARD: "yes" });
    expect(existsSync(join(awkward, "venv", "bin", "python"))).toBe(true);
    expect(readFileSync(join(awkward, "bootstrap.log"), "utf8")).toContain("::skyward:: phase runtime done");
  }, 180_000);

  it("fails the runtime phase when the runtime was not uploaded", async () => {
    const bare = join(scratch, "bare");
    const run = await runBootstrap(
      renderBootstrapScript({
        image: image({ env: { SKY_BARE: "1" } }),
        root: bare,
        skywardVersion: VERSION,
      }),
    );
    expect(run.code).not.toBe(0);
    expect(run.markers.at(-1)).toMatchObject({ kind: "phase", name: "runtime", status: "failed" });
    expect(run.stdout).toContain(`missing ${bare}/runtime/skyward/__init__.py`);
  }, 180_000);
});

describe("renderBootstrapScript, rendered", () => {
  const rendered = (input: ImageInput, options: Partial<BootstrapScriptOptions> = {}) =>
    renderBootstrapScript({ image: image(input), root: "/opt/skyward", skywardVersion: VERSION, ...options });

  it("renders the apt phase: dpkg lock wait, update, then a quoted non-interactive install", () => {
    const packages = ["ffmpeg", "libsm6=2:1.2.3-1", "libc6:amd64", "g++"];
    const script = rendered({ apt: packages }, { sudo: true });
    const install = script.split("\n").find((line) => line.includes("apt-get") && line.includes(" install "));
    expect(install?.trim()).toBe(
      `$SKYWARD_SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$SKYWARD_TIMEOUT" -q install -y ${packages.map(shellQuote).join(" ")}`,
    );
    expect(install).toContain("'libsm6=2:1.2.3-1'");
    const update = script.indexOf("-q update");
    expect(update).toBeGreaterThan(script.indexOf("fuser /var/lib/dpkg/lock-frontend"));
    expect(update).toBeLessThan(script.indexOf("-q install -y"));
    expect(script).toContain("SKYWARD_TIMEOUT=300\n");
    expect(script).toContain('if [ "$(id -u)" -ne 0 ]; then SKYWARD_SUDO="sudo -n"; fi');
    expect(script).toContain("skyward_phase apt skyward_phase_apt");
    expect(script.indexOf("skyward_phase apt")).toBeLessThan(script.indexOf("skyward_phase python "));

    expect(rendered({ apt: ["ffmpeg"] })).not.toContain('SKYWARD_SUDO="sudo -n"');
    const none = rendered({});
    expect(none).not.toContain("apt-get");
    expect(none).not.toContain("skyward_phase pip");
    expect(none).not.toContain("skyward_phase plugins");
  });

  it("renders scoped pip indexes as their own --index-url commands", () => {
    const script = rendered({
      pip: ["numpy", "torch>=2.1", "Torch_Vision", "jax[cpu]"],
      pipIndexes: [
        { url: "https://download.pytorch.org/whl/cu121?a=1&b=2", packages: ["torch", "torch-vision"] },
      ],
    });
    const installs = script
      .split("\n")
      .filter((line) => line.trim().startsWith("skyward_pip_install "))
      .map((line) => line.trim());
    expect(installs).toEqual([
      "skyward_pip_install numpy 'jax[cpu]'",
      "skyward_pip_install --index-url 'https://download.pytorch.org/whl/cu121?a=1&b=2' 'torch>=2.1' Torch_Vision",
    ]);
    expect(script).not.toMatch(/--force-reinstall|--upgrade|\s-U\s/);
  });

  it("refuses what it cannot render, naming the field", () => {
    const attempt = (options: Partial<BootstrapScriptOptions>) => () =>
      renderBootstrapScript({ image: image(), root: "/opt/skyward", skywardVersion: VERSION, ...options });
    const pathOf = (run: () => unknown): string | undefined => {
      try {
        run();
      } catch (error) {
        if (ConfigurationError.isInstance(error)) return error.issues[0]?.path;
        throw error;
      }
      return undefined;
    };
    expect(pathOf(attempt({ root: "relative/dir" }))).toBe("root");
    expect(pathOf(attempt({ pluginOps: ["ok", "bad\0op"] }))).toBe("pluginOps[1]");
    expect(pathOf(attempt({ image: image({ env: { NUL: "a\0b" } }) }))).toBe("image.env.NUL");
    const handBuilt: Image = { ...image(), env: { "NOT-A-NAME": "x" } };
    expect(pathOf(attempt({ image: handBuilt }))).toBe("image.env.NOT-A-NAME");
    expect(pathOf(attempt({ skywardVersion: " " }))).toBe("skywardVersion");
    expect(pathOf(attempt({ pythonRequirement: "2.7" }))).toBe("pythonRequirement");
  });

  it("takes pythonRequirement over image.python, in the content hash too", () => {
    const script = rendered({ python: "auto" }, { pythonRequirement: "3.12" });
    expect(script).toContain("local candidates=(python3.12 python3) want=3.12 managed=3.12");
    expect(script).toContain(`SKYWARD_CONTENT_HASH=${contentHash(image({ python: "3.12" }), VERSION)}\n`);
    expect(rendered({ python: "3.12" })).toBe(script);
  });

  it("sets the root without a trailing slash", () => {
    expect(rendered({}, { root: "/opt/skyward/" })).toContain("SKYWARD_ROOT=/opt/skyward\n");
  });

  it("is core's shared functions and phases, assembled, with the SSH phases added", () => {
    const script = rendered({ env: { SKY_A: "1" } }, { pluginOps: [{ plugin: "p", op: "true" }] });
    expect(script).toContain(BOOTSTRAP_SHELL_LIBRARY);
    expect(script).toContain(renderEnvPhase(image({ env: { SKY_A: "1" } })).join("\n"));
    expect(script).toContain(renderPluginsPhase([{ plugin: "p", op: "true" }]).join("\n"));
    expect(script.endsWith("skyward_main </dev/null\n")).toBe(true);
  });
});
