/**
 * The bash functions only the SSH bootstrap (`bootstrap-script.ts`) uses, appended to core's shared
 * ones: the warm check, boot ids, the summary, finding and installing Python and uv, the venv, pip and
 * runtime phases. They read the variables the script's header sets (`SKYWARD_ROOT`, `SKYWARD_VENV`…).
 */
export const SSH_LIBRARY = `
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
# Debian's venv, without python3-venv, says so and exits (SystemExit) rather than raising.
except (Exception, SystemExit) as error:
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
