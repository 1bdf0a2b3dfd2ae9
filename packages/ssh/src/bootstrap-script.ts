/**
 * The SSH bootstrap script: one idempotent bash script, rendered from an {@link Image} and the
 * plugins' bootstrap ops, that prepares a node's Python environment under its Skyward root
 * directory. It is built from `@skyward/core/contract`'s building blocks (the shared bash functions,
 * the `env` and `plugins` phases, the assembly, the markers), adding the warm check and the `apt`,
 * `python`, `venv`, `pip` and `runtime` phases.
 *
 * The caller uploads the Python runtime to `ROOT/runtime` and the image's includes to `ROOT/work`,
 * runs the script (enforcing `image.bootstrapTimeout`), and follows its progress through the
 * markers it prints on stdout, read with `parseBootstrapMarker`:
 *
 * ```text
 * ::skyward:: phase <name> start
 * ::skyward:: phase <name> done <milliseconds>
 * ::skyward:: phase <name> failed <exit code>     (then the script exits with that code)
 * ::skyward:: warm                                (the node already had this environment)
 * ::skyward:: done                                (last line of every successful run)
 * ```
 *
 * Phases, in order: `warm-check`, `env`, `apt` (only with apt packages), `python`, `venv`, `pip`
 * (only with pip packages; the `runtime` check runs beside it), `runtime`, `plugins` (only with plugin
 * ops). A warm start stops after `warm-check` (writing `env.sh` again when it is missing), unless the
 * machine restarted since the plugin ops ran: then it runs `plugins` again. A cold one makes the venv
 * from nothing. uv, fetched from the package index while the venv is made and kept under
 * `ROOT/tools`, installs where it installs exactly as pip would; the wheel caches stay under
 * `ROOT/cache`.
 * Everything a phase prints also goes to `ROOT/bootstrap.log`, whose tail explains a failure.
 */
import { createHash } from "node:crypto";
import type { Image } from "@skyward/core";
import {
  assembleBootstrapScript,
  type BootstrapInput,
  bootstrapLayout,
  contentHash,
  DEFAULT_PIP_INDEX,
  pipInstallSteps,
  renderEnvPhase,
  renderPluginsPhase,
  shellQuote,
  validateBootstrapInput,
} from "@skyward/core/contract";
import { SSH_LIBRARY } from "./bootstrap-library.js";

/** What {@link renderBootstrapScript} renders a node's bootstrap from. */
export interface BootstrapScriptOptions extends BootstrapInput {
  /** The `@skyward/core` version whose runtime is uploaded; part of the content hash. */
  readonly skywardVersion: string;
  /**
   * Prefix system changes (creating the root, apt) with `sudo -n` when the script does not run as
   * root. Default false.
   */
  readonly sudo?: boolean;
  /**
   * Whether the `python` phase may download uv and a uv-managed Python when the host has no
   * interpreter that satisfies `image.python`. Default true; false makes that case fail at once.
   */
  readonly allowPythonDownload?: boolean;
  /**
   * The Python runtime is uploaded to `ROOT/runtime` and the includes to `ROOT/work` before the
   * script runs; the script only checks they are there. The only mode there is, stated for clarity.
   */
  readonly uploadedRuntime?: true;
}

function digest(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex").slice(0, 12);
}

function renderAptPhase(image: Image): string[] {
  const packages = image.apt.map(shellQuote).join(" ");
  const apt =
    '$SKYWARD_SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$SKYWARD_TIMEOUT"';
  return [
    "skyward_phase_apt() {",
    "  local deadline=$((SECONDS + SKYWARD_TIMEOUT))",
    "  if command -v fuser >/dev/null 2>&1; then",
    "    while $SKYWARD_SUDO fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock >/dev/null 2>&1; do",
    '      if [ "$SECONDS" -ge "$deadline" ]; then',
    '        echo "the dpkg lock is still held after $SKYWARD_TIMEOUT s (another apt-get or unattended-upgrades)"',
    "        return 1",
    "      fi",
    '      echo "waiting for the dpkg lock"',
    "      sleep 3",
    "    done",
    "  fi",
    `  ${apt} -q update`,
    `  ${apt} -q install -y ${packages}`,
    "}",
  ];
}

/** The candidates, the version they must match (empty: >= 3.10) and the uv-managed fallback (empty: none). */
function pythonPlan(requirement: string): { candidates: string[]; want: string; managed: string } {
  if (requirement === "auto") return { candidates: ["python3"], want: "", managed: "3.12" };
  if (requirement.startsWith("/")) return { candidates: [requirement], want: "", managed: "" };
  const [major, minor] = requirement.split(".");
  return { candidates: [`python${major}.${minor}`, "python3"], want: requirement, managed: requirement };
}

function renderPythonPhase(image: Image): string[] {
  const plan = pythonPlan(image.python);
  const wanted = plan.want === "" ? "Python >= 3.10" : `Python ${plan.want}`;
  return [
    "skyward_phase_python() {",
    `  local candidates=(${plan.candidates.map(shellQuote).join(" ")}) want=${shellQuote(plan.want)} managed=${shellQuote(plan.managed)} candidate found=""`,
    `  echo ${shellQuote(`looking for ${wanted} (image.python = ${image.python})`)}`,
    `  for candidate in "\${candidates[@]}"; do`,
    '    command -v "$candidate" >/dev/null 2>&1 || continue',
    '    if skyward_python_probe "$candidate" && skyward_python_satisfies "$want"; then',
    "      found=$SKYWARD_PROBED_EXECUTABLE",
    "      break",
    "    fi",
    `    echo "$candidate is not suitable (version \${SKYWARD_PROBED_VERSION:-unknown})"`,
    "  done",
    '  if [ -z "$found" ]; then',
    '    if [ -z "$managed" ]; then',
    `      echo ${shellQuote(`no ${wanted} at ${plan.candidates.join(", ")}`)}`,
    "      return 1",
    "    fi",
    `    echo ${shellQuote(`no ${wanted} on PATH (looked for ${plan.candidates.join(", ")}): trying a uv-managed Python ${plan.managed}`)}`,
    '    skyward_managed_python "$managed" || return 1',
    "    found=$SKYWARD_PROBED_EXECUTABLE",
    "  fi",
    '  echo "using Python $SKYWARD_PROBED_VERSION at $found"',
    `  printf '%s\\n' "$found" >"$SKYWARD_ROOT/.bootstrap-python"`,
    "}",
  ];
}

function renderPipPhase(image: Image): string[] {
  const lines = ["skyward_phase_pip() {"];
  for (const step of pipInstallSteps(image)) {
    const options: string[] = [];
    if (step.index) {
      options.push(`--index-url ${shellQuote(step.index.url)}`);
      if (step.index.trustedHost !== undefined)
        options.push(`--trusted-host ${shellQuote(step.index.trustedHost)}`);
      // The default index as this node's pip sees it (the image's env is exported by now).
      if (step.index.dependenciesFromDefault)
        options.push(`--extra-index-url "\${PIP_INDEX_URL:-${DEFAULT_PIP_INDEX}}"`);
    }
    lines.push(`  skyward_pip_install ${[...options, ...step.requirements.map(shellQuote)].join(" ")}`);
  }
  // uv for the next bootstrap on this node, fetched once this one's packages are in.
  lines.push("  skyward_fetch_uv || true", "}");
  return lines;
}

/**
 * Renders the bootstrap script for one node. Every user string (root, env names and values,
 * packages, index URLs, the python requirement, plugin ops) is quoted with {@link shellQuote}, so
 * the host sees exactly the value given. Plugin ops themselves are shell text, run as `bash -c op`.
 *
 * What the phases do:
 * - `warm-check`: takes the root's lock; when `ROOT/.content-hash` equals the image's
 *   {@link contentHash} (and the plugin ops are the ones that ran) and `ROOT/venv/bin/python` runs,
 *   prints `warm`, the summary and `done`, and exits 0. Before that, when the machine restarted
 *   since the plugin ops ran (the kernel's boot id, recorded in `ROOT/.boot-id`, differs; the boot
 *   time stands in where there is no boot id, and when neither can be read the ops always rerun),
 *   the `plugins` phase runs again: every op, since what ops set up (a daemon, GPU partitions) may
 *   not survive a restart.
 * - `env`: writes `ROOT/env.sh` (mode 0600): `image.env` exported as given, then each `shellVars`
 *   snippet evaluated ONCE, now, as `NAME="$(snippet)"` (trailing newlines dropped, as `$(…)`
 *   does; the image's env visible to it; a failing snippet fails the phase), its result exported.
 *   The script then sources `env.sh` itself: the phases below run with the image's env, so
 *   `HTTPS_PROXY`, `PIP_INDEX_URL` or `UV_*` given there reach apt-get (without `sudo`), uv and pip.
 * - `apt`: waits for the dpkg lock (up to `image.bootstrapTimeout`), then `apt-get update` and
 *   `apt-get install -y` the packages, non-interactively.
 * - `python`: `"auto"` takes the host's `python3` when >= 3.10; `"3.12"` takes `python3.12` or a
 *   `python3` of that version; a path takes that interpreter. Else (not for a path) uv, from PyPI or
 *   its standalone build, installs a managed Python under `ROOT/tools`.
 * - `venv`: `ROOT/venv` with `--system-site-packages`, made again from nothing whenever the content
 *   hash or the plugin ops changed (a package the image no longer names is gone).
 * - `pip`: the packages, with plain `pip install` semantics (what is satisfied, the system
 *   site-packages included, is not reinstalled); a package named by a pip index comes from that
 *   index only, in its own command. With uv when the node has it (its wheel is read from the index
 *   the image's env names while the venv is made, no binary download) and uv installs exactly as pip
 *   would: no `PIP_*` setting or `pip.conf` key uv cannot be given, nothing it would install already in
 *   the base interpreter. Else with pip; `SKYWARD_INSTALLER=pip` in the image's env always uses pip.
 *   Caches: `PIP_CACHE_DIR` / `UV_CACHE_DIR` default to `ROOT/cache/pip` and `ROOT/cache/uv`.
 * - `runtime`: checks the uploaded runtime is there and imports.
 * - `plugins`: each op with the venv activated and `env.sh` sourced, in `ROOT/work`; the first
 *   failing op fails the phase.
 *
 * The script carries `image.env` values: hand it over on stdin or in a 0600 file.
 *
 * @throws {ConfigurationError} naming the field when the root is not absolute, the image is
 *   invalid, or a value holds a NUL character.
 */
export function renderBootstrapScript(options: BootstrapScriptOptions): string {
  const image = validateBootstrapInput(options);
  const layout = bootstrapLayout(options.root);
  const ops = options.pluginOps ?? [];
  const opTexts = ops.map((entry) => (typeof entry === "string" ? entry : entry.op));
  const hash = contentHash(image, options.skywardVersion);
  const header = [
    "#!/usr/bin/env bash",
    `# Skyward bootstrap, rendered by @skyward/core ${options.skywardVersion.replaceAll(/\s+/g, " ")} (content hash ${hash}).`,
    "# Idempotent: a node that already has this environment stops at the warm check.",
    "set -uo pipefail",
    "umask 022",
    `SKYWARD_ROOT=${shellQuote(layout.root)}`,
    `SKYWARD_CONTENT_HASH=${shellQuote(hash)}`,
    `SKYWARD_OPS_HASH=${shellQuote(digest(JSON.stringify(opTexts)))}`,
    `SKYWARD_TIMEOUT=${shellQuote(String(image.bootstrapTimeout))}`,
    `SKYWARD_ALLOW_PYTHON_DOWNLOAD=${options.allowPythonDownload === false ? 0 : 1}`,
    // Where the boot id is read; the variable is for tests, which fake a reboot with it.
    `SKYWARD_BOOT_ID_FILE="\${SKYWARD_BOOT_ID_FILE:-/proc/sys/kernel/random/boot_id}"`,
    'SKYWARD_VENV="$SKYWARD_ROOT/venv"',
    'SKYWARD_CACHE="$SKYWARD_ROOT/cache"',
    'SKYWARD_WORK="$SKYWARD_ROOT/work"',
    'SKYWARD_LOG="$SKYWARD_ROOT/bootstrap.log"',
    "SKYWARD_LOGGING=",
    "SKYWARD_SUDO=",
    ...(options.sudo ? ['if [ "$(id -u)" -ne 0 ]; then SKYWARD_SUDO="sudo -n"; fi'] : []),
    "export SKYWARD_ROOT SKYWARD_VENV SKYWARD_CACHE SKYWARD_SUDO",
  ];
  const phases = [
    ...renderEnvPhase(image),
    ...(image.apt.length > 0 ? renderAptPhase(image) : []),
    ...renderPythonPhase(image),
    ...(image.pip.length > 0 ? renderPipPhase(image) : []),
    ...(ops.length > 0 ? renderPluginsPhase(ops) : []),
  ];
  const main = [
    "skyward_started=$(skyward_now_ms)",
    'skyward_mark "phase warm-check start"',
    'if ! skyward_prepare_root; then skyward_mark "phase warm-check failed 1"; exit 1; fi',
    'printf \'::skyward:: %s\\n\' "phase warm-check start" >>"$SKYWARD_LOG"',
    "if skyward_is_warm; then",
    '  skyward_mark "phase warm-check done $(($(skyward_now_ms) - skyward_started))"',
    "  skyward_mark warm",
    // A pool's self-destruct removes env.sh (it holds the image's env) but keeps the environment.
    '  if [ ! -f "$SKYWARD_ROOT/env.sh" ]; then skyward_phase env skyward_phase_env; fi',
    ...(ops.length > 0
      ? [
          // Plugin ops set up what a restart loses (the MPS daemon, MIG instances): after one, they
          // run again, all of them (they are idempotent: a cold bootstrap reruns them anyway).
          "  if ! skyward_same_boot; then",
          '    echo "skyward: the machine restarted since the plugin ops ran: running them again" | tee -a "$SKYWARD_LOG"',
          "    skyward_phase plugins skyward_phase_plugins",
          "    skyward_record_boot",
          "  fi",
        ]
      : []),
    '  skyward_summary 2>&1 | tee -a "$SKYWARD_LOG"',
    "  skyward_mark done",
    "  exit 0",
    "fi",
    'rm -f "$SKYWARD_ROOT/.content-hash" "$SKYWARD_ROOT/.plugin-ops-hash" "$SKYWARD_ROOT/.boot-id" "$SKYWARD_ROOT/.pip-precheck" "$SKYWARD_ROOT/.python-summary"',
    // Another image (or other plugin ops): the environment is made again from nothing, so a package
    // the image no longer names is gone too; the wheel cache under ROOT/cache makes that quick.
    'rm -rf "$SKYWARD_VENV"',
    'skyward_mark "phase warm-check done $(($(skyward_now_ms) - skyward_started))"',
    "skyward_phase env skyward_phase_env",
    // The later phases run with the image's env (a proxy for apt, uv and pip: HTTPS_PROXY).
    '. "$SKYWARD_ROOT/env.sh"',
    // The node's wheel caches, which later pools reuse (unless the image's env names others).
    `export PIP_CACHE_DIR="\${PIP_CACHE_DIR:-$SKYWARD_CACHE/pip}" UV_CACHE_DIR="\${UV_CACHE_DIR:-$SKYWARD_CACHE/uv}"`,
    ...(image.apt.length > 0 ? ["skyward_phase apt skyward_phase_apt"] : []),
    "skyward_phase python skyward_phase_python",
    ...(image.pip.length > 0
      ? [
          // uv's wheel is fetched while the venv is made; the pip phase uses it when it came.
          'skyward_get_uv 2>&1 | skyward_whole_lines | tee -a "$SKYWARD_LOG" &',
          "skyward_uv_pid=$!",
          // So is what the pip phase checks before installing with uv (pip's configuration files,
          // the base interpreter's distributions), in one interpreter start.
          "skyward_pip_precheck </dev/null 9>&- &",
          "skyward_precheck_pid=$!",
        ]
      : []),
    "skyward_phase venv skyward_phase_venv",
    ...(image.pip.length > 0
      ? [
          // Independent phases at once: the runtime check (an import of the uploaded runtime, which
          // needs only the standard library) runs while pip installs.
          "skyward_phase runtime skyward_phase_runtime &",
          "skyward_runtime_pid=$!",
          'wait "$skyward_uv_pid" || true',
          'wait "$skyward_precheck_pid" || true',
          "skyward_phase pip skyward_phase_pip",
          'wait "$skyward_runtime_pid" || exit "$?"',
        ]
      : ["skyward_phase runtime skyward_phase_runtime"]),
    ...(ops.length > 0 ? ["skyward_phase plugins skyward_phase_plugins", "skyward_record_boot"] : []),
    'printf \'%s\\n\' "$SKYWARD_OPS_HASH" >"$SKYWARD_ROOT/.plugin-ops-hash"',
    'printf \'%s\\n\' "$SKYWARD_CONTENT_HASH" >"$SKYWARD_ROOT/.content-hash.next"',
    'mv -f "$SKYWARD_ROOT/.content-hash.next" "$SKYWARD_ROOT/.content-hash"',
    'skyward_summary 2>&1 | tee -a "$SKYWARD_LOG"',
    "skyward_mark done",
  ];
  return assembleBootstrapScript({ header, library: SSH_LIBRARY, phases, main });
}
