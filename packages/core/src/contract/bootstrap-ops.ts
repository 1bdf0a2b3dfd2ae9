/**
 * What every bootstrap script is built from: the node's layout under its Skyward root, the markers
 * a script prints and how to read them, the shared bash functions, the `env` and `plugins` phases,
 * and the assembly into one script. `@skyward/ssh` builds the full SSH bootstrap on top of these
 * (warm check, apt, python, venv, pip, runtime); the `Local` provider runs only the `env` and
 * `plugins` phases ({@link renderPluginOpsScript}), for a Python environment it prepared itself.
 *
 * A script prints its progress as markers on stdout, read with {@link parseBootstrapMarker}:
 *
 * ```text
 * ::skyward:: phase <name> start
 * ::skyward:: phase <name> done <milliseconds>
 * ::skyward:: phase <name> failed <exit code>     (then the script exits with that code)
 * ::skyward:: warm                                (the node already had this environment)
 * ::skyward:: done                                (last line of every successful run)
 * ```
 *
 * Everything a phase prints also goes to `ROOT/bootstrap.log`, whose tail explains a failure
 * ({@link describeBootstrapFailure}).
 */
import { posix } from "node:path";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { formatPath, parseInput } from "../errors/validation.js";
import { type Image, imageSchema } from "../spec/image.js";
import { shellQuote } from "./launch-command.js";
import type { PluginBootstrapOp } from "./plugin.js";
import type { ShellOp } from "./provider.js";

/** What every bootstrap script is rendered from; checked by {@link validateBootstrapInput}. */
export interface BootstrapInput {
  /** The image after every plugin's transform. */
  readonly image: Image;
  /** The node's Skyward root directory, an absolute path (`/opt/skyward`). Created when missing. */
  readonly root: string;
  /**
   * The plugins' bootstrap ops, in plugin order; each runs as `bash -c op` after the image's phases.
   * An op given with its plugin (as `collectPluginBootstrapOps` lists them) is named after it in the
   * log, so a failure says which plugin's op failed.
   */
  readonly pluginOps?: readonly (ShellOp | PluginBootstrapOp)[];
  /**
   * The interpreter to use, in `image.python`'s forms (`"auto"`, `"3.12"`, an absolute path);
   * defaults to `image.python`, and replaces it (in the content hash too) when given.
   */
  readonly pythonRequirement?: string;
}

/** Where the bootstrap puts things under a node's root directory. */
export interface BootstrapLayout {
  /** The root directory itself. */
  readonly root: string;
  /** The virtual environment (made with access to the interpreter's system site-packages). */
  readonly venv: string;
  /** The virtual environment's Python: what the worker is started with. */
  readonly python: string;
  /** Exports the image's `env` and evaluated `shellVars`; sourced before the worker starts. Mode 0600. */
  readonly envFile: string;
  /** Everything the last bootstrap run printed. */
  readonly log: string;
  /** Where the caller uploads the Python runtime (`skyward/`, `skyward_worker.py`); goes on `PYTHONPATH`. */
  readonly runtime: string;
  /** Where the caller uploads the includes; the worker's working directory. */
  readonly work: string;
  /** Holds the content hash of the environment the last successful bootstrap made. */
  readonly contentHashFile: string;
}

/** A phase marker: a phase started, finished (with its duration) or failed (with its exit code). */
export interface BootstrapPhaseMarker {
  readonly kind: "phase";
  /** `warm-check`, `env`, `apt`, `python`, `venv`, `pip`, `runtime` or `plugins`. */
  readonly name: string;
  readonly status: "start" | "done" | "failed";
  /** How long the phase took; set when `status` is `done`. */
  readonly durationMs?: number;
  /** The phase's exit code; set when `status` is `failed`. */
  readonly exitCode?: number;
}

/** A line of bootstrap output the caller acts on. */
export type BootstrapMarker = BootstrapPhaseMarker | { readonly kind: "warm" } | { readonly kind: "done" };

const PHASE_MARKER = /^::skyward:: phase (\S+) (start|done|failed)(?: (\d+))?$/;

/**
 * Reads one line of bootstrap output: the marker it is, or undefined for any other line (phase
 * output, the summary). A trailing `\r` (output through a pty) is ignored.
 *
 * @example
 * ```ts
 * import { parseBootstrapMarker } from "@skyward/core/contract";
 *
 * parseBootstrapMarker("::skyward:: phase pip done 5120"); // { kind: "phase", name: "pip", status: "done", durationMs: 5120 }
 * ```
 */
export function parseBootstrapMarker(line: string): BootstrapMarker | undefined {
  const text = line.replace(/[\r\n]+$/, "");
  if (text === "::skyward:: warm") return { kind: "warm" };
  if (text === "::skyward:: done") return { kind: "done" };
  const match = PHASE_MARKER.exec(text);
  if (!match) return undefined;
  const [, name = "", status, number] = match;
  if (status === "start") return number === undefined ? { kind: "phase", name, status } : undefined;
  if (number === undefined) return undefined;
  return status === "done"
    ? { kind: "phase", name, status, durationMs: Number(number) }
    : { kind: "phase", name, status: "failed", exitCode: Number(number) };
}

function normalizeRoot(root: string): string {
  const normalized = posix.normalize(root);
  return normalized.length > 1 ? normalized.replace(/\/+$/, "") : normalized;
}

/** The paths under `root` the bootstrap script uses (`root` normalized: no trailing slash). */
export function bootstrapLayout(root: string): BootstrapLayout {
  const base = normalizeRoot(root);
  const under = (name: string) => posix.join(base, name);
  return {
    root: base,
    venv: under("venv"),
    python: under("venv/bin/python"),
    envFile: under("env.sh"),
    log: under("bootstrap.log"),
    runtime: under("runtime"),
    work: under("work"),
    contentHashFile: under(".content-hash"),
  };
}

/**
 * The bash functions every bootstrap script shares: the clock, markers, running a phase (output
 * teed to the log, a failure marked and fatal), POSIX quoting, and taking the root and its lock
 * (`skyward_prepare_root`). They read `SKYWARD_ROOT`, `SKYWARD_LOG`, `SKYWARD_LOGGING`,
 * `SKYWARD_SUDO` and `SKYWARD_TIMEOUT`, set by the script's header. No user data in here: everything
 * specific to one render comes in through those variables and the phase functions rendered after it.
 * {@link assembleBootstrapScript} puts it in every script.
 */
export const BOOTSTRAP_SHELL_LIBRARY = `
skyward_now_ms() {
  local now=\${EPOCHREALTIME:-}
  if [ -n "$now" ]; then
    now=\${now/[.,]/}
    printf '%s\\n' "$((10#$now / 1000))"
  else
    printf '%s\\n' "$(($(date +%s) * 1000))"
  fi
}

skyward_mark() {
  printf '::skyward:: %s\\n' "$1"
  if [ -n "$SKYWARD_LOGGING" ]; then printf '::skyward:: %s\\n' "$1" >>"$SKYWARD_LOG"; fi
}

# Ends every line a phase prints, its last one included, one line at a time. Output that ends
# without a newline (pip's closing colour reset when FORCE_COLOR is set, as CI sets it) would glue
# the next marker to it, and a marker not at the start of its line is not read as one.
skyward_whole_lines() {
  awk '{ print; fflush() }'
}

# Runs one phase in a subshell with errexit, its output (stdout and stderr) teed to the log.
# The lock's descriptor is closed for the phase, so a daemon a plugin op starts does not hold it.
skyward_phase() {
  local name=$1 started status
  shift
  started=$(skyward_now_ms)
  skyward_mark "phase $name start"
  (
    set -euo pipefail
    "$@"
  ) </dev/null 9>&- 2>&1 | skyward_whole_lines | tee -a "$SKYWARD_LOG"
  status=\${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    skyward_mark "phase $name failed $status"
    exit "$status"
  fi
  skyward_mark "phase $name done $(($(skyward_now_ms) - started))"
}

# Prints $1 as one POSIX shell word (single-quoted), for files sourced by any shell.
skyward_quote() {
  local rest=$1 quoted=""
  while [[ $rest == *"'"* ]]; do
    quoted+="\${rest%%"'"*}'\\\\''"
    rest=\${rest#*"'"}
  done
  printf "'%s%s'" "$quoted" "$rest"
}

skyward_prepare_root() {
  if ! mkdir -p "$SKYWARD_ROOT" 2>/dev/null || [ ! -w "$SKYWARD_ROOT" ]; then
    if [ -z "$SKYWARD_SUDO" ]; then
      echo "cannot create or write $SKYWARD_ROOT" >&2
      return 1
    fi
    $SKYWARD_SUDO mkdir -p "$SKYWARD_ROOT" || return 1
    $SKYWARD_SUDO chown "$(id -u):$(id -g)" "$SKYWARD_ROOT" || return 1
  fi
  exec 9>>"$SKYWARD_ROOT/.bootstrap.lock" || return 1
  if command -v flock >/dev/null 2>&1 && ! flock -w "$SKYWARD_TIMEOUT" 9; then
    echo "another bootstrap of $SKYWARD_ROOT is still running" >&2
    return 1
  fi
  : >"$SKYWARD_LOG" || return 1
  SKYWARD_LOGGING=1
}
`;

/** `export NAME=value` as one line of env.sh, written by the script with printf. */
function envLine(name: string, value: string): string {
  return `printf '%s\\n' ${shellQuote(`export ${name}=${shellQuote(value)}`)} >>"$next"`;
}

/**
 * The `env` phase's function, `skyward_phase_env`: writes `ROOT/env.sh` (mode 0600) with
 * `image.env` exported as given, then each `shellVars` snippet evaluated once, now, as
 * `NAME="$(snippet)"` (the image's env visible to it; a failing snippet fails the phase), its result
 * exported. Run it as `skyward_phase env skyward_phase_env`. Values are quoted with `shellQuote`.
 */
export function renderEnvPhase(image: Image): string[] {
  const lines = [
    "skyward_phase_env() {",
    '  local next="$SKYWARD_ROOT/env.sh.next" value status',
    '  rm -f "$next"',
    '  (umask 077 && : >"$next")',
    `  printf '%s\\n' ${shellQuote("# The image's environment, written by the Skyward bootstrap; sourced before the worker starts.")} >>"$next"`,
  ];
  for (const [name, value] of Object.entries(image.env)) {
    lines.push(`  ${envLine(name, value)}`);
    // Exported here too, so the shellVars snippets below see the image's env.
    lines.push(`  export ${shellQuote(name)}=${shellQuote(value)}`);
  }
  for (const [name, snippet] of Object.entries(image.shellVars)) {
    const label = shellQuote(`shellVars.${name}`);
    lines.push(
      `  value=$(eval ${shellQuote(snippet)}) || { status=$?; echo ${label} "failed (exit $status)"; return "$status"; }`,
      `  printf 'export %s=%s\\n' ${shellQuote(name)} "$(skyward_quote "$value")" >>"$next"`,
      `  export ${shellQuote(name)}="$value"`,
    );
  }
  const count = Object.keys(image.env).length + Object.keys(image.shellVars).length;
  lines.push(
    '  mv -f "$next" "$SKYWARD_ROOT/env.sh"',
    `  echo "wrote $SKYWARD_ROOT/env.sh (${count} ${count === 1 ? "variable" : "variables"})"`,
    "}",
  );
  return lines;
}

/** Plugin ops with their plugin, when known (a plain string's plugin is not). */
function labelledOps(ops: readonly (ShellOp | PluginBootstrapOp)[]): { plugin?: string; op: ShellOp }[] {
  return ops.map((entry) =>
    typeof entry === "string" ? { op: entry } : { plugin: entry.plugin, op: entry.op },
  );
}

/**
 * The `plugins` phase's function, `skyward_phase_plugins`: each op as `bash -c op`, with
 * `SKYWARD_VENV` activated (when set), `env.sh` sourced and `SKYWARD_WORK` as the working
 * directory; the first failing op fails the phase, its plugin named in the log (read back by
 * {@link describeBootstrapFailure}). An op's text is never printed: it may carry a token. Run it as
 * `skyward_phase plugins skyward_phase_plugins`.
 */
export function renderPluginsPhase(pluginOps: readonly (ShellOp | PluginBootstrapOp)[]): string[] {
  const ops = labelledOps(pluginOps);
  const lines = [
    "skyward_phase_plugins() {",
    "  local status",
    // No virtual environment (the Local provider with an image that installs nothing): the ops
    // run with the PATH they were given.
    '  if [ -n "$SKYWARD_VENV" ]; then export VIRTUAL_ENV="$SKYWARD_VENV" PATH="$SKYWARD_VENV/bin:$PATH"; fi',
    '  . "$SKYWARD_ROOT/env.sh"',
    '  mkdir -p "$SKYWARD_WORK"',
    '  cd "$SKYWARD_WORK"',
  ];
  ops.forEach(({ plugin, op }, index) => {
    // The op's text is not echoed: it may carry a token (`huggingface-cli login --token …`).
    const label =
      plugin === undefined
        ? `plugin op ${index + 1} of ${ops.length}`
        : `plugin "${plugin}" op ${index + 1} of ${ops.length}`;
    lines.push(
      `  echo ${shellQuote(label)}`,
      `  bash -c ${shellQuote(op)} || { status=$?; echo ${shellQuote(label)} "failed (exit $status)"; return "$status"; }`,
    );
  });
  lines.push("}");
  return lines;
}

const FAILED_OP = /^plugin (?:"([^"]+)" )?op (\d+) of (\d+) failed \(exit (\d+)\)$/m;

/**
 * What failed, read from the tail of a failed bootstrap's log: `plugin "accelerate" op 1 of 2 failed
 * (exit 3)` when a plugin op failed (the plugin named when the script knew it), else undefined.
 */
export function describeBootstrapFailure(logTail: string): string | undefined {
  const match = FAILED_OP.exec(logTail.replaceAll("\r", ""));
  if (!match) return undefined;
  const [, plugin, index, count, status] = match;
  return `${plugin === undefined ? "plugin" : `plugin "${plugin}":`} bootstrap op ${index} of ${count} failed (exit ${status})`;
}

/**
 * Checks what a bootstrap script is rendered from, and gives the image to render: re-parsed (a
 * hand-built image could hold anything, and the script relies on valid names and requirements),
 * with `python` replaced by `pythonRequirement` when given.
 *
 * @throws {ConfigurationError} naming the field when the root is not absolute, an op or an env
 *   value holds a NUL character, the python requirement or the image is invalid.
 */
export function validateBootstrapInput(options: BootstrapInput): Image {
  const issues: ConfigurationIssue[] = [];
  if (typeof options.root !== "string" || !options.root.startsWith("/") || options.root.includes("\0")) {
    issues.push({
      path: "root",
      message: `expected an absolute path without NUL characters, received ${JSON.stringify(options.root)}`,
    });
  }
  labelledOps(options.pluginOps ?? []).forEach(({ op }, index) => {
    if (typeof op !== "string" || op.includes("\0")) {
      issues.push({
        path: `pluginOps[${index}]`,
        message: "expected a shell command string without NUL characters",
      });
    }
  });
  for (const [name, value] of Object.entries(options.image.env)) {
    if (value.includes("\0")) {
      issues.push({
        path: formatPath(["env", name], "image"),
        message: "expected a value without NUL characters (no environment variable can hold one)",
      });
    }
  }
  if (options.pythonRequirement !== undefined) {
    try {
      parseInput(imageSchema, { python: options.pythonRequirement });
    } catch (error) {
      if (!ConfigurationError.isInstance(error)) throw error;
      issues.push(...error.issues.map((issue) => ({ ...issue, path: "pythonRequirement" })));
    }
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
  const python = options.pythonRequirement ?? options.image.python;
  // Re-checked: the script relies on valid names, requirements and python values, and a hand-built
  // image could hold anything.
  return parseInput(imageSchema, { ...options.image, python }, "image");
}

/** The pieces {@link assembleBootstrapScript} puts together, in this order. */
export interface BootstrapScriptParts {
  /** The shebang, comments, shell options and the `SKYWARD_*` variables, one line each. */
  readonly header: readonly string[];
  /**
   * More bash functions, appended to {@link BOOTSTRAP_SHELL_LIBRARY} as they are (a text that
   * starts with a newline, like the library).
   */
  readonly library?: string;
  /** The phase functions (`renderEnvPhase`, `renderPluginsPhase`, …), one line each. */
  readonly phases: readonly string[];
  /** The body of `skyward_main`, one line each (indented by the assembly). */
  readonly main: readonly string[];
}

/**
 * Puts a script together: the header, the shared functions ({@link BOOTSTRAP_SHELL_LIBRARY} and
 * `library`), the phase functions and `skyward_main`. Everything runs from that one function,
 * called on the last line, so bash has read the whole script before it runs any of it (the script
 * may arrive on stdin: `bash -s`), and no command can read the rest of the script as its input.
 *
 * @example
 * ```ts
 * import { image } from "@skyward/core";
 * import { assembleBootstrapScript, renderEnvPhase } from "@skyward/core/contract";
 *
 * const script = assembleBootstrapScript({
 *   header: ["#!/usr/bin/env bash", "SKYWARD_ROOT=/opt/skyward", "SKYWARD_TIMEOUT=60", 'SKYWARD_LOG="$SKYWARD_ROOT/bootstrap.log"', "SKYWARD_LOGGING=", "SKYWARD_SUDO="],
 *   phases: renderEnvPhase(image({ env: { HF_HOME: "/data/hf" } })),
 *   main: ["skyward_prepare_root || exit 1", "skyward_phase env skyward_phase_env", "skyward_mark done"],
 * });
 * ```
 */
export function assembleBootstrapScript(parts: BootstrapScriptParts): string {
  return `${[
    ...parts.header,
    BOOTSTRAP_SHELL_LIBRARY + (parts.library ?? ""),
    ...parts.phases,
    "",
    "skyward_main() {",
    ...parts.main.map((line) => `  ${line}`),
    "}",
    "",
    "skyward_main </dev/null",
  ].join("\n")}\n`;
}

/** What {@link renderPluginOpsScript} renders from. */
export interface PluginOpsScriptOptions {
  /** The image after every plugin's transform: its `env` and `shellVars` are written to `ROOT/env.sh`. */
  readonly image: Image;
  /** The Skyward root the ops see as `$SKYWARD_ROOT` (an absolute path); holds `env.sh` and `bootstrap.log`. */
  readonly root: string;
  /** The virtual environment the ops run in (`$SKYWARD_VENV`, activated), or undefined for none. */
  readonly venv: string | undefined;
  /** The working directory of the ops (the worker's working directory), an absolute path. */
  readonly work: string;
  /** The plugins' bootstrap ops, in plugin order. */
  readonly pluginOps: readonly (ShellOp | PluginBootstrapOp)[];
}

/**
 * Renders a script that runs only the `env` and `plugins` phases of the bootstrap (`@skyward/ssh`'s
 * `renderBootstrapScript`), with the same functions, variables, log and markers: for a provider that
 * prepares the Python environment itself (the `Local` provider) but runs the plugins' ops as a
 * bootstrap would. The ops see `SKYWARD_ROOT`, `SKYWARD_VENV` (activated, when there is one) and
 * the image's env, and run in `work`; their text is never printed. Hand the script over on stdin: it
 * carries `image.env`.
 *
 * @throws {ConfigurationError} naming the field when a path is not absolute, the image is
 *   invalid, or a value holds a NUL character.
 */
export function renderPluginOpsScript(options: PluginOpsScriptOptions): string {
  const image = validateBootstrapInput({
    image: options.image,
    root: options.root,
    pluginOps: options.pluginOps,
  });
  const issues: ConfigurationIssue[] = [];
  for (const [field, value] of [
    ["venv", options.venv],
    ["work", options.work],
  ] as const) {
    if (field === "venv" && value === undefined) continue;
    if (typeof value !== "string" || !value.startsWith("/") || value.includes("\0")) {
      issues.push({
        path: field,
        message: `expected an absolute path without NUL characters, received ${JSON.stringify(value)}`,
      });
    }
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
  const layout = bootstrapLayout(options.root);
  const hasOps = options.pluginOps.length > 0;
  const header = [
    "#!/usr/bin/env bash",
    "# Skyward plugin ops: the env and plugins phases of the bootstrap, for an environment prepared otherwise.",
    "set -uo pipefail",
    "umask 022",
    `SKYWARD_ROOT=${shellQuote(layout.root)}`,
    `SKYWARD_TIMEOUT=${shellQuote(String(image.bootstrapTimeout))}`,
    `SKYWARD_VENV=${shellQuote(options.venv === undefined ? "" : normalizeRoot(options.venv))}`,
    `SKYWARD_WORK=${shellQuote(normalizeRoot(options.work))}`,
    'SKYWARD_LOG="$SKYWARD_ROOT/bootstrap.log"',
    "SKYWARD_LOGGING=",
    "SKYWARD_SUDO=",
    "export SKYWARD_ROOT SKYWARD_VENV SKYWARD_SUDO",
  ];
  const main = [
    'if ! skyward_prepare_root; then skyward_mark "phase env failed 1"; exit 1; fi',
    "skyward_phase env skyward_phase_env",
    // The later phases run with the image's env (a proxy for apt, uv and pip: HTTPS_PROXY).
    '. "$SKYWARD_ROOT/env.sh"',
    ...(hasOps ? ["skyward_phase plugins skyward_phase_plugins"] : []),
    "skyward_mark done",
  ];
  return assembleBootstrapScript({
    header,
    phases: [...renderEnvPhase(image), ...(hasOps ? renderPluginsPhase(options.pluginOps) : [])],
    main,
  });
}
