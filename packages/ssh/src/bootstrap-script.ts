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

/**
 * The bash functions only the full bootstrap uses, appended to core's shared ones: the warm check,
 * boot ids, the summary, finding and installing Python and uv, the venv, pip and runtime phases.
 */
const SSH_LIBRARY = `
skyward_is_warm() {
  [ -f "$SKYWARD_ROOT/.content-hash" ] || return 1
  [ "$(cat "$SKYWARD_ROOT/.content-hash")" = "$SKYWARD_CONTENT_HASH" ] || return 1
  [ "$(cat "$SKYWARD_ROOT/.plugin-ops-hash" 2>/dev/null)" = "$SKYWARD_OPS_HASH" ] || return 1
  # The venv's Python must run; what it prints is the summary's first line (one start-up, not two).
  SKYWARD_PYTHON_LINE=$("$SKYWARD_VENV/bin/python" -c "$SKYWARD_PYTHON_SUMMARY" </dev/null 2>/dev/null)
}

# Prints an id of the running boot, which changes when the machine restarts: the kernel's boot id,
# else the boot time (/proc/stat's btime, or BSD's and macOS's kern.boottime), else nothing.
skyward_boot_id() {
  local id=""
  id=$(cat "$SKYWARD_BOOT_ID_FILE" 2>/dev/null) || id=""
  if [ -z "$id" ]; then
    id=$(awk '$1 == "btime" { print "boot-time " $2 }' /proc/stat 2>/dev/null) || id=""
  fi
  if [ -z "$id" ]; then
    id=$(sysctl -n kern.boottime 2>/dev/null) || id=""
    [ -z "$id" ] || id="boot-time $id"
  fi
  printf '%s\\n' "$id"
}

# Whether the plugin ops ran during this boot (false when the boot cannot be told apart).
skyward_same_boot() {
  local now
  now=$(skyward_boot_id)
  [ -n "$now" ] && [ "$(cat "$SKYWARD_ROOT/.boot-id" 2>/dev/null)" = "$now" ]
}

# Records the boot the plugin ops ran in (nothing when it cannot be told apart).
skyward_record_boot() {
  local now
  now=$(skyward_boot_id)
  rm -f "$SKYWARD_ROOT/.boot-id"
  if [ -n "$now" ]; then printf '%s\\n' "$now" >"$SKYWARD_ROOT/.boot-id"; fi
}

SKYWARD_PYTHON_SUMMARY='import sys; print("skyward: Python", sys.version.split()[0], "at", sys.executable, "(base " + getattr(sys, "_base_executable", sys.executable) + ")")'
SKYWARD_PYTHON_LINE=

skyward_summary() {
  if [ -n "$SKYWARD_PYTHON_LINE" ]; then
    printf '%s\\n' "$SKYWARD_PYTHON_LINE"
  elif [ -s "$SKYWARD_ROOT/.python-summary" ]; then
    # Written by the runtime phase's interpreter.
    cat "$SKYWARD_ROOT/.python-summary"
  else
    "$SKYWARD_VENV/bin/python" -c "$SKYWARD_PYTHON_SUMMARY" </dev/null || true
  fi
  printf 'skyward: root %s, content hash %s\\n' "$SKYWARD_ROOT" "$SKYWARD_CONTENT_HASH"
}

# Sets SKYWARD_PROBED_VERSION (major.minor.micro) and SKYWARD_PROBED_EXECUTABLE for interpreter $1.
skyward_python_probe() {
  local output
  SKYWARD_PROBED_VERSION=""
  output=$("$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); print(sys.executable)' </dev/null 2>/dev/null) || return 1
  SKYWARD_PROBED_VERSION=\${output%%$'\\n'*}
  SKYWARD_PROBED_EXECUTABLE=\${output#*$'\\n'}
  [ -n "$SKYWARD_PROBED_EXECUTABLE" ] && [ "$SKYWARD_PROBED_EXECUTABLE" != "$output" ]
}

# Whether the probed version is $1 (a "3.12" or "3.12.4" prefix), or >= 3.10 when $1 is empty.
skyward_python_satisfies() {
  local version=$SKYWARD_PROBED_VERSION major minor
  if [ -n "$1" ]; then
    case "$version" in
      "$1" | "$1".*) return 0 ;;
      *) return 1 ;;
    esac
  fi
  major=\${version%%.*}
  minor=\${version#*.}
  minor=\${minor%%.*}
  [ "$major" -gt 3 ] 2>/dev/null || { [ "$major" -eq 3 ] && [ "$minor" -ge 10 ]; } 2>/dev/null
}

# Whether interpreter $1 can run pip: found without importing it (importing pip takes most of a second).
skyward_has_pip() {
  "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("pip") is None)' </dev/null >/dev/null 2>&1
}

# Prints the uv to use: the one installed under ROOT/tools, else one on PATH.
skyward_find_uv() {
  if [ -x "$SKYWARD_ROOT/tools/uv/bin/uv" ]; then
    printf '%s\\n' "$SKYWARD_ROOT/tools/uv/bin/uv"
  else
    command -v uv 2>/dev/null
  fi
}

# Installs uv into ROOT/tools/uv: from PyPI with a pip that is there, else the standalone build.
skyward_install_uv() {
  local target="$SKYWARD_ROOT/tools/uv" python
  for python in python3 python; do
    if command -v "$python" >/dev/null 2>&1 && "$python" -m pip --version >/dev/null 2>&1; then
      echo "installing uv from PyPI with $python -m pip"
      if PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-input --target "$target" uv && [ -x "$target/bin/uv" ]; then
        return 0
      fi
    fi
  done
  echo "no pip to install uv with: installing the standalone uv"
  mkdir -p "$target/bin"
  if command -v curl >/dev/null 2>&1; then
    curl -LsSf --connect-timeout 30 --max-time 300 https://astral.sh/uv/install.sh \\
      | env UV_UNMANAGED_INSTALL="$target/bin" sh || return 1
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 60 -O - https://astral.sh/uv/install.sh | env UV_UNMANAGED_INSTALL="$target/bin" sh || return 1
  else
    echo "cannot install uv: none of pip, curl or wget is available"
    return 1
  fi
  [ -x "$target/bin/uv" ]
}

# Finds, or (when allowed) installs, a uv-managed Python $1; on success the probe variables name it.
skyward_managed_python() {
  local version=$1 uv path
  export UV_PYTHON_INSTALL_DIR="$SKYWARD_ROOT/tools/python" UV_PYTHON_BIN_DIR="$SKYWARD_ROOT/tools/bin"
  uv=$(skyward_find_uv) || uv=""
  if [ -n "$uv" ] && path=$(UV_PYTHON_DOWNLOADS=never "$uv" python find --system "$version" 2>/dev/null) &&
    skyward_python_probe "$path" && skyward_python_satisfies "$version"; then
    return 0
  fi
  if [ "$SKYWARD_ALLOW_PYTHON_DOWNLOAD" != 1 ]; then
    echo "no Python $version on this host, and downloading one is disabled"
    return 1
  fi
  if [ -z "$uv" ]; then
    skyward_install_uv || { echo "could not install uv"; return 1; }
    uv=$(skyward_find_uv) || return 1
  fi
  echo "installing Python $version with $uv"
  "$uv" python install "$version" || { echo "uv could not install Python $version"; return 1; }
  path=$(UV_PYTHON_DOWNLOADS=never "$uv" python find --system "$version") &&
    skyward_python_probe "$path" && skyward_python_satisfies "$version"
}

skyward_phase_venv() {
  local python uv
  python=$(cat "$SKYWARD_ROOT/.bootstrap-python")
  if [ "$(cat "$SKYWARD_VENV/.skyward-base-python" 2>/dev/null)" = "$python" ] &&
    "$SKYWARD_VENV/bin/python" -c '' >/dev/null 2>&1; then
    echo "reusing the virtual environment $SKYWARD_VENV (base $python)"
    return 0
  fi
  rm -rf "$SKYWARD_VENV"
  if uv=$(skyward_find_uv); then
    echo "creating $SKYWARD_VENV with $uv"
    "$uv" venv --quiet --system-site-packages --python "$python" "$SKYWARD_VENV"
  else
    # One interpreter start (each costs tens of milliseconds): the base's pip, visible through the
    # system site-packages, makes a copy needless; without it, pip comes from ensurepip, and where
    # there is no ensurepip (Debian without python3-venv) the environment is made without pip.
    "$python" - "$SKYWARD_VENV" <<'PY'
import importlib.util, shutil, sys, venv
path = sys.argv[1]
with_pip = importlib.util.find_spec("pip") is None
try:
    venv.EnvBuilder(system_site_packages=True, with_pip=with_pip).create(path)
except Exception as error:
    if not with_pip:
        raise
    print(f"python -m venv failed (no ensurepip? {error}): creating the environment without pip")
    shutil.rmtree(path, ignore_errors=True)
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(path)
print("created", path, "with Python", sys.version.split()[0])
PY
  fi
  printf '%s\\n' "$python" >"$SKYWARD_VENV/.skyward-base-python"
}

# The uv the pip phase may use: one this node already has (kept under ROOT/tools by an earlier
# bootstrap, or on PATH). A node without one installs with pip, and fetches uv afterwards for the
# next pool (skyward_fetch_uv): measured, fetching uv (a 17 MB wheel) first costs more than it saves.
skyward_usable_uv() {
  [ "\${SKYWARD_INSTALLER:-auto}" != pip ] || return 1
  skyward_find_uv
}

# Runs uv with the pip settings the image's env gives (uv does not read PIP_*): the index, extra
# indexes, find-links, no-index, trusted hosts, CA bundle and timeout, unless the same UV_* setting is given too.
skyward_uv() {
  local uv=$1
  shift
  (
    if [ -n "\${PIP_INDEX_URL:-}" ] && [ -z "\${UV_INDEX_URL:-}\${UV_DEFAULT_INDEX:-}" ]; then export UV_INDEX_URL="$PIP_INDEX_URL"; fi
    if [ -n "\${PIP_EXTRA_INDEX_URL:-}" ] && [ -z "\${UV_EXTRA_INDEX_URL:-}\${UV_INDEX:-}" ]; then export UV_EXTRA_INDEX_URL="$PIP_EXTRA_INDEX_URL"; fi
    if [ -n "\${PIP_FIND_LINKS:-}" ] && [ -z "\${UV_FIND_LINKS:-}" ]; then export UV_FIND_LINKS="$PIP_FIND_LINKS"; fi
    if [ -n "\${PIP_TRUSTED_HOST:-}" ] && [ -z "\${UV_INSECURE_HOST:-}" ]; then export UV_INSECURE_HOST="$PIP_TRUSTED_HOST"; fi
    case "\${PIP_NO_INDEX:-}" in
      1 | [Tt][Rr][Uu][Ee] | [Yy][Ee][Ss] | [Oo][Nn]) export UV_NO_INDEX=true ;;
    esac
    # pip takes the best version across every index; so does uv with this strategy.
    export UV_INDEX_STRATEGY="\${UV_INDEX_STRATEGY:-unsafe-best-match}"
    if [ -n "\${PIP_CERT:-}" ] && [ -z "\${SSL_CERT_FILE:-}" ]; then export SSL_CERT_FILE="$PIP_CERT"; fi
    if [ -n "\${PIP_DEFAULT_TIMEOUT:-\${PIP_TIMEOUT:-}}" ] && [ -z "\${UV_HTTP_TIMEOUT:-}" ]; then export UV_HTTP_TIMEOUT="\${PIP_DEFAULT_TIMEOUT:-$PIP_TIMEOUT}"; fi
    if [ -s "$SKYWARD_ROOT/.uv-cert" ] && [ -z "\${SSL_CERT_FILE:-}" ]; then export SSL_CERT_FILE="$(cat "$SKYWARD_ROOT/.uv-cert")"; fi
    exec "$uv" "$@"
  )
}

# Whether uv installs "$@" exactly as pip would: no pip setting uv cannot read (a pip.conf, a PIP_*
# variable other than those skyward_uv passes on, several find-links), and nothing it would install
# already satisfied by the base interpreter's site-packages (uv does not look there; pip does, and
# a requirement the environment satisfies is never downloaded again).
skyward_uv_fits() {
  local uv=$1 name plan clash
  shift
  for name in $(compgen -e); do
    case "$name" in
      PIP_INDEX_URL | PIP_EXTRA_INDEX_URL | PIP_FIND_LINKS | PIP_NO_INDEX | PIP_TRUSTED_HOST | PIP_CERT | PIP_DEFAULT_TIMEOUT | PIP_TIMEOUT | PIP_CACHE_DIR | PIP_ROOT_USER_ACTION | PIP_DISABLE_PIP_VERSION_CHECK | PIP_NO_INPUT | PIP_PROGRESS_BAR) ;;
      PIP_*)
        echo "$name is set, which uv does not read: installing with pip"
        return 1
        ;;
    esac
  done
  case "\${PIP_FIND_LINKS:-}" in
    *[[:space:]]*)
      echo "several PIP_FIND_LINKS: installing with pip"
      return 1
      ;;
  esac
  # pip's configuration files (uv does not read them) and the base interpreter's distributions,
  # read once by skyward_pip_precheck (started while the venv is made).
  [ -f "$SKYWARD_ROOT/.pip-precheck" ] || skyward_pip_precheck
  if [ "$(tail -n 1 "$SKYWARD_ROOT/.pip-precheck" 2>/dev/null)" != ok ]; then
    cat "$SKYWARD_ROOT/.pip-precheck" 2>/dev/null || echo "pip's configuration could not be read: installing with pip"
    return 1
  fi
  if ! plan=$(skyward_uv "$uv" pip install --dry-run --python "$SKYWARD_VENV/bin/python" "$@" 2>&1); then
    printf '%s\\n' "$plan" | tail -n 5
    echo "uv could not plan the install: installing with pip"
    return 1
  fi
  # The projects uv would install, checked against the base interpreter's own distributions (names
  # compared normalized, as PEP 503 does).
  printf '%s\\n' "$plan" | sed -n 's/^ + \\([^= ]*\\)==.*$/\\1/p' >"$SKYWARD_ROOT/.uv-plan"
  clash=$(awk 'NR == FNR { have[$0] = 1; next } { name = tolower($0); gsub(/[-_.]+/, "-", name); if (name in have) { printf "%s%s", sep, $0; sep = ", " } }' \\
    "$SKYWARD_ROOT/.base-distributions" "$SKYWARD_ROOT/.uv-plan") || return 1
  if [ -n "$clash" ]; then
    echo "the base interpreter already has $clash (uv would install it again): installing with pip"
    return 1
  fi
}

# Reads, in one interpreter start, what skyward_uv_fits checks before each install: pip's
# configuration files, which uv does not read (only a CA bundle, cert, is passed on, in
# ROOT/.uv-cert), and the base interpreter's distributions (normalized names, in
# ROOT/.base-distributions). ROOT/.pip-precheck says "ok", or why pip installs.
skyward_pip_precheck() {
  rm -f "$SKYWARD_ROOT/.uv-cert" "$SKYWARD_ROOT/.base-distributions" "$SKYWARD_ROOT/.pip-precheck.next"
  "$(cat "$SKYWARD_ROOT/.bootstrap-python")" - "$SKYWARD_ROOT" <<'PY' >"$SKYWARD_ROOT/.pip-precheck.next" 2>&1
import configparser, importlib.metadata, os, re, sys
root = sys.argv[1]
home = os.path.expanduser("~")
files = ["/etc/xdg/pip/pip.conf", "/etc/pip.conf", f"{home}/.pip/pip.conf",
         os.path.join(os.environ.get("XDG_CONFIG_HOME") or f"{home}/.config", "pip", "pip.conf"),
         os.environ.get("PIP_CONFIG_FILE", ""), os.path.join(os.environ.get("SKYWARD_VENV", "/nonexistent"), "pip.conf")]
harmless = {"cert", "cache-dir", "disable-pip-version-check", "root-user-action", "no-input", "progress-bar", "timeout"}
cert = ""
for path in files:
    if not path or not os.path.isfile(path):
        continue
    parser = configparser.RawConfigParser()
    parser.read(path)
    for section in parser.sections():
        for key, value in parser.items(section):
            if key not in harmless:
                print(f"pip reads {key} from {path}, uv does not: installing with pip")
                sys.exit(1)
            if key == "cert":
                cert = value
if cert and not os.environ.get("SSL_CERT_FILE"):
    open(os.path.join(root, ".uv-cert"), "w").write(cert)
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
have = sorted({norm(d.metadata["Name"] or "") for d in importlib.metadata.distributions()} - {""})
open(os.path.join(root, ".base-distributions"), "w").write("".join(f"{name}\\n" for name in have))
print("ok")
PY
  mv -f "$SKYWARD_ROOT/.pip-precheck.next" "$SKYWARD_ROOT/.pip-precheck"
}

# pip install "$@" into the venv: with the node's uv when it installs exactly as pip would (see
# skyward_uv_fits), else with pip (the base's, seen through the system site-packages), else with uv.
skyward_pip_install() {
  local uv
  if uv=$(skyward_usable_uv) && skyward_uv_fits "$uv" "$@"; then
    echo "installing with uv ($uv)"
    skyward_uv "$uv" pip install --python "$SKYWARD_VENV/bin/python" "$@"
    return
  fi
  if skyward_has_pip "$SKYWARD_VENV/bin/python"; then
    echo "installing with pip"
    PIP_ROOT_USER_ACTION=ignore "$SKYWARD_VENV/bin/python" -m pip install \\
      --disable-pip-version-check --no-input --progress-bar off "$@"
    return
  fi
  if ! uv=$(skyward_find_uv); then
    skyward_install_uv || { echo "no pip in $SKYWARD_VENV and uv could not be installed"; return 1; }
    uv=$(skyward_find_uv) || return 1
  fi
  echo "installing with uv ($uv): the environment has no pip"
  skyward_uv "$uv" pip install --python "$SKYWARD_VENV/bin/python" "$@"
}

# Fetches uv's wheel for this machine from the package index the image's env names (PyPI by
# default) and unpacks its executable into ROOT/tools/uv: one index page and one download, checked
# against the index's sha256, no pip run (pip's own start-up costs more than uv then saves). Exits
# non-zero, leaving nothing, where that cannot be done exactly (no index but find-links, not Linux
# glibc on x86_64 or aarch64, no uv on the index): pip installs instead.
skyward_get_uv() {
  local python
  [ "\${SKYWARD_INSTALLER:-auto}" = auto ] || return 1
  skyward_find_uv >/dev/null && return 0
  python=$(cat "$SKYWARD_ROOT/.bootstrap-python" 2>/dev/null) || return 1
  mkdir -p "$SKYWARD_ROOT/tools"
  "$python" - "$SKYWARD_ROOT/tools" <<'PY'
import hashlib, html, io, os, platform, re, shutil, ssl, sys, urllib.parse, urllib.request, zipfile
sys.excepthook = lambda kind, value, trace: print(f"uv: could not fetch it ({kind.__name__}: {value}); pip installs")
tools = sys.argv[1]
if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
    sys.exit("uv: PIP_NO_INDEX is set; pip installs")
arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine().lower())
libc, glibc = platform.libc_ver()
if sys.platform != "linux" or arch is None or libc != "glibc":
    sys.exit("uv: not Linux glibc on x86_64 or aarch64; pip installs")
have = tuple(int(part) for part in glibc.split(".")[:2])
legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
def fits(tag):
    match = re.fullmatch(r"manylinux_(\\d+)_(\\d+)_(\\w+)", tag)
    if match:
        return match.group(3) == arch and (int(match.group(1)), int(match.group(2))) <= have
    name, _, machine = tag.partition("_")
    return name in legacy and machine == arch and legacy[name] <= have
cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or None
context = ssl.create_default_context(cafile=cafile)
index = (os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/") + "/uv/"
def get(url, timeout):
    request = urllib.request.Request(url, headers={"Accept": "text/html", "User-Agent": "skyward-bootstrap"})
    return urllib.request.urlopen(request, timeout=timeout, context=context)
# A short deadline for the index page: the pip phase waits for this, and an index out of reach
# must not hold it up for long (pip then tries, and says why).
with get(index, 10) as response:
    page, base = response.read().decode("utf-8", "replace"), response.geturl()
best = None
for link in re.findall(r'href="([^"]+)"', page):
    url = urllib.parse.urljoin(base, html.unescape(link))
    name = urllib.parse.unquote(url.split("#")[0].rsplit("/", 1)[-1])
    match = re.fullmatch(r"uv-(\\d+(?:\\.\\d+)*)-py3-none-([\\w.]+)\\.whl", name)
    if match and any(fits(tag) for tag in match.group(2).split(".")):
        version = tuple(int(part) for part in match.group(1).split("."))
        if best is None or version > best[0]:
            best = (version, url)
if best is None:
    sys.exit(f"uv: no wheel for this machine at {index}; pip installs")
url = best[1]
with get(url.split("#")[0], 60) as response:
    data = response.read()
expected = dict(part.split("=", 1) for part in url.partition("#")[2].split("&") if "=" in part).get("sha256")
if expected and hashlib.sha256(data).hexdigest() != expected:
    sys.exit("uv: the wheel's sha256 does not match the index's; pip installs")
target = os.path.join(tools, f"uv.next.{os.getpid()}")
os.makedirs(os.path.join(target, "bin"), exist_ok=True)
with zipfile.ZipFile(io.BytesIO(data)) as wheel:
    member = next((n for n in wheel.namelist() if re.fullmatch(r"uv-[^/]+\\.data/scripts/uv", n)), None)
    if member is None:
        shutil.rmtree(target)
        sys.exit("uv: the wheel holds no uv executable; pip installs")
    with wheel.open(member) as source, open(os.path.join(target, "bin", "uv"), "wb") as out:
        shutil.copyfileobj(source, out)
os.chmod(os.path.join(target, "bin", "uv"), 0o755)
final = os.path.join(tools, "uv")
shutil.rmtree(final, ignore_errors=True)
os.rename(target, final)
print("uv", ".".join(map(str, best[0])), "from", url.split("#")[0])
PY
}

# Starts fetching uv from the package index (PyPI, or the one the image's env names) with pip, in the
# background and at a low priority, into ROOT/tools/uv, which later pools keep: the next bootstrap
# that installs packages on this node uses it. No binary download: without pip or an index that has
# uv, nothing happens and pip stays the installer.
skyward_fetch_uv() {
  local python
  [ "\${SKYWARD_INSTALLER:-auto}" = auto ] || return 0
  skyward_find_uv >/dev/null && return 0
  python=$(cat "$SKYWARD_ROOT/.bootstrap-python" 2>/dev/null) || return 0
  skyward_has_pip "$python" || return 0
  mkdir -p "$SKYWARD_ROOT/tools" "$SKYWARD_CACHE"
  echo "fetching uv with pip in the background, for the next bootstrap (log: $SKYWARD_CACHE/uv-fetch.log)"
  (
    cd "$SKYWARD_ROOT/tools" || exit 0
    setsid nice -n 10 sh -c '
      next="uv.next.$$"
      if PIP_ROOT_USER_ACTION=ignore "$1" -m pip install --quiet --disable-pip-version-check --no-input --no-compile --target "$next" uv && [ -x "$next/bin/uv" ] && "$next/bin/uv" --version; then
        rm -rf uv && mv "$next" uv
      else
        rm -rf "$next"
      fi
    ' skyward-fetch-uv "$python" >"$SKYWARD_CACHE/uv-fetch.log" 2>&1 </dev/null 9>&- &
  )
}

skyward_phase_runtime() {
  local file missing=0
  for file in "$SKYWARD_ROOT/runtime/skyward/__init__.py" "$SKYWARD_ROOT/runtime/skyward_worker.py"; do
    if [ ! -f "$file" ]; then
      echo "missing $file: the Skyward runtime must be uploaded to $SKYWARD_ROOT/runtime before the bootstrap"
      missing=1
    fi
  done
  [ "$missing" -eq 0 ] || return 1
  mkdir -p "$SKYWARD_ROOT/work"
  # The same interpreter start writes the summary's first line (ROOT/.python-summary).
  PYTHONPATH="$SKYWARD_ROOT/runtime" "$SKYWARD_VENV/bin/python" - "$SKYWARD_ROOT/.python-summary" <<'PY'
import sys, skyward
print("skyward runtime", skyward.__version__, "imports on Python", sys.version.split()[0])
base = getattr(sys, "_base_executable", sys.executable)
open(sys.argv[1], "w").write(f"skyward: Python {sys.version.split()[0]} at {sys.executable} (base {base})\\n")
PY
}
`;

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
          'skyward_get_uv 2>&1 | tee -a "$SKYWARD_LOG" &',
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
