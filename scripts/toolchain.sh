#!/usr/bin/env bash
# Sourced by the other scripts: makes Node >= 24 and pnpm available on PATH, installing them into
# .toolchain/ (inside the project, never globally) when the machine's own are missing or too old.
# Safe to source repeatedly; prints what it does to stderr.

SKYWARD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=ci.sh
source "$SKYWARD_ROOT/scripts/ci.sh"
SKYWARD_TOOLCHAIN="$SKYWARD_ROOT/.toolchain"
SKYWARD_NODE_VERSION="24"
SKYWARD_PNPM_VERSION="10.34.9"

skyward_log() { printf '[setup] %s\n' "$*" >&2; }

skyward_node_major() {
  command -v node >/dev/null 2>&1 || { echo 0; return; }
  node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}

# Native addons (ssh2's crypto binding) must build against the headers of the Node that runs them,
# not a machine-wide `nodedir` pointing at an older Node: the toolchain's Node package ships its own.
# Only `pnpm install` builds addons, so only it is given the setting (skyward_ensure_dependencies):
# exported, it would make every later npm command warn `Unknown env config "nodedir"`.
SKYWARD_NODEDIR=""
skyward_use_toolchain_headers() {
  local dir
  for dir in "$SKYWARD_TOOLCHAIN"/node_modules/node/node_modules/node-*; do
    if [ -f "$dir/include/node/node_api.h" ]; then
      SKYWARD_NODEDIR="$dir"
      return 0
    fi
  done
}

skyward_ensure_node() {
  if [ -x "$SKYWARD_TOOLCHAIN/node_modules/node/bin/node" ]; then
    export PATH="$SKYWARD_TOOLCHAIN/node_modules/node/bin:$SKYWARD_TOOLCHAIN/node_modules/.bin:$PATH"
    skyward_use_toolchain_headers
  fi
  # The floor is the Node that runs everything the README shows (`await using` needs 24); every
  # package's `engines` says the same, and scripts/check-engines.mjs keeps the two in step.
  if [ "$(skyward_node_major)" -ge "$SKYWARD_NODE_VERSION" ]; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || {
    skyward_log "Node.js >= $SKYWARD_NODE_VERSION is required and no npm was found to install it; install Node.js $SKYWARD_NODE_VERSION or newer."
    return 1
  }
  skyward_log "system Node.js is $(node --version 2>/dev/null || echo missing); installing Node.js $SKYWARD_NODE_VERSION into .toolchain/"
  mkdir -p "$SKYWARD_TOOLCHAIN"
  npm install --prefix "$SKYWARD_TOOLCHAIN" --no-save --no-audit --no-fund --loglevel=error \
    "node@$SKYWARD_NODE_VERSION" >&2 || return 1
  export PATH="$SKYWARD_TOOLCHAIN/node_modules/node/bin:$SKYWARD_TOOLCHAIN/node_modules/.bin:$PATH"
  hash -r
  skyward_use_toolchain_headers
  [ "$(skyward_node_major)" -ge "$SKYWARD_NODE_VERSION" ] || { skyward_log "could not install Node.js >= $SKYWARD_NODE_VERSION"; return 1; }
}

skyward_ensure_pnpm() {
  if [ -x "$SKYWARD_TOOLCHAIN/pnpm/node_modules/.bin/pnpm" ]; then
    export PATH="$SKYWARD_TOOLCHAIN/pnpm/node_modules/.bin:$PATH"
  fi
  if command -v pnpm >/dev/null 2>&1 && [ "$(pnpm --version 2>/dev/null | cut -d. -f1)" = "${SKYWARD_PNPM_VERSION%%.*}" ]; then
    return 0
  fi
  skyward_log "installing pnpm $SKYWARD_PNPM_VERSION into .toolchain/pnpm"
  mkdir -p "$SKYWARD_TOOLCHAIN/pnpm"
  npm install --prefix "$SKYWARD_TOOLCHAIN/pnpm" --no-save --no-audit --no-fund --loglevel=error \
    "pnpm@$SKYWARD_PNPM_VERSION" >&2 || return 1
  export PATH="$SKYWARD_TOOLCHAIN/pnpm/node_modules/.bin:$PATH"
  hash -r
}

# apt-get, quietly: its progress and dpkg's ("Selecting previously unselected package…", "Setting up…")
# go to .toolchain/apt.log; the terminal gets one line before and one after, or the log's end on failure.
skyward_apt_install() {
  local log="$SKYWARD_TOOLCHAIN/apt.log" started=$SECONDS
  mkdir -p "$SKYWARD_TOOLCHAIN"
  skyward_log "installing $* with apt-get (its output: .toolchain/apt.log)"
  if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } \
    >>"$log" 2>&1 </dev/null; then
    skyward_log "installed $* in $((SECONDS - started)) s"
  else
    skyward_log "apt-get could not install $*; the end of .toolchain/apt.log:"
    tail -n 20 "$log" >&2
    return 1
  fi
}

# A Python environment for the test suite: the system's python3 (Debian's, where frameworks such as
# python3-torch are installed) with its site-packages visible, plus pytest and numpy from PyPI.
SKYWARD_PYTHON_ENV="$SKYWARD_TOOLCHAIN/python"
skyward_ensure_python() {
  local base
  if [ -x /usr/bin/python3 ]; then base=/usr/bin/python3; else base="$(command -v python3 || true)"; fi
  if [ -z "$base" ]; then
    skyward_log "python3 (>= 3.10) is required and was not found"
    return 1
  fi
  if [ ! -x "$SKYWARD_PYTHON_ENV/bin/python" ]; then
    skyward_log "creating the test Python environment in .toolchain/python from $base"
    if ! "$base" -m venv --system-site-packages "$SKYWARD_PYTHON_ENV" >&2; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        skyward_apt_install python3-venv || return 1
        rm -rf "$SKYWARD_PYTHON_ENV"
        "$base" -m venv --system-site-packages "$SKYWARD_PYTHON_ENV" >&2 || return 1
      else
        skyward_log "could not create a virtual environment with $base (install python3-venv)"
        return 1
      fi
    fi
  fi
  # joblib 1.4 for the joblib backend's tests (return_as="generator_unordered" is new in 1.4; Debian 12
  # ships 1.2); it still serves Debian's scikit-learn 1.2, which the environment sees through the
  # system site-packages.
  if ! "$SKYWARD_PYTHON_ENV/bin/python" -c "import pytest, numpy, joblib, sys; sys.exit(tuple(map(int, joblib.__version__.split('.')[:2])) < (1, 4))" 2>/dev/null; then
    skyward_log "installing pytest, numpy and joblib 1.4 into the test Python environment"
    "$SKYWARD_PYTHON_ENV/bin/python" -m pip install --quiet --disable-pip-version-check pytest numpy "joblib>=1.4,<1.5" >&2 || return 1
  fi
  export PATH="$SKYWARD_PYTHON_ENV/bin:$PATH"
  hash -r
}

# System packages the end-to-end tests use: a real OpenSSH server and client, iproute2 for the
# test bed's network namespaces, and tmux (a real terminal for the live console's test). Installed with apt when missing and we are root; otherwise the
# suites that need them say what is missing (and fail under CI).
skyward_ensure_system_packages() {
  local missing=()
  command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
  command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing+=(iproute2)
  command -v tmux >/dev/null 2>&1 || missing+=(tmux)
  # The volume tests mount buckets with s3fs on the test bed's hosts (they share this machine's files).
  command -v s3fs >/dev/null 2>&1 || missing+=(s3fs)
  # The Slurm provider's tests start a real Slurm (slurmctld, slurmd, munged) in the test bed's namespaces.
  [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] || missing+=(slurm-wlm)
  [ -x /usr/sbin/munged ] || missing+=(munge)
  # Their environment-modules test loads a module file with Lmod's `module` on the compute nodes.
  [ -f /usr/share/lmod/lmod/init/bash ] || missing+=(lmod)
  # The dashboard's browser tests drive Debian's headless Chromium (playwright-core, no bundled browser).
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    skyward_apt_install "${missing[@]}"
  else
    skyward_log "not installed: ${missing[*]} (the SSH, Slurm, volume and dashboard end-to-end tests need them)"
    ! skyward_is_ci
  fi
}

# Real frameworks for the plugin tests, for the system's python3 (Debian's builds): PyTorch (DDP over
# gloo), scikit-learn and joblib, and pytest for that Python; and its pip, with which the test bed's
# hosts install JAX and accelerate from PyPI (through the test bed's PyPI proxy). Installed before the
# test environment is made, so that it sees Debian's numpy rather than pulling a newer one that
# Debian's scipy and scikit-learn cannot load.
skyward_ensure_framework_packages() {
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch, sklearn, joblib, pytest, pip" 2>/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    skyward_apt_install python3-torch python3-sklearn python3-joblib python3-pytest python3-pip
  else
    skyward_log "not installed: python3-torch, python3-sklearn, python3-joblib, python3-pip (the plugin tests need them)"
    ! skyward_is_ci
  fi
}

skyward_ensure_dependencies() {
  (cd "$SKYWARD_ROOT" && env ${SKYWARD_NODEDIR:+npm_config_nodedir="$SKYWARD_NODEDIR"} \
    pnpm install --frozen-lockfile --reporter=append-only >&2)
}

# Builds with turbo (and its cache): one line per package as its build starts, rather than tsup's
# dozen each or silence; when one fails, it runs once more with the failing build's output shown
# (what did build is cached by then). Arguments go to turbo, e.g. --filter @skyward/example-hello...
skyward_build() {
  (cd "$SKYWARD_ROOT" && TURBO_TELEMETRY_DISABLED=1 pnpm exec turbo run build --output-logs=hash-only "$@" >&2) && return 0
  skyward_log "the build failed; once more, with its output:"
  (cd "$SKYWARD_ROOT" && TURBO_TELEMETRY_DISABLED=1 pnpm exec turbo run build --output-logs=errors-only "$@" >&2)
}

skyward_setup() {
  skyward_ensure_node && skyward_ensure_pnpm && skyward_ensure_dependencies
}
