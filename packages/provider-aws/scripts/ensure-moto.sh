#!/usr/bin/env bash
# Makes moto's server (PyPI `moto[server]`) available to this package's tests, in a virtual
# environment of the package's own: packages/provider-aws/.venv (ignored by git). Idempotent and
# quick when it is already there. The tests find it there, or at $SKYWARD_MOTO_PYTHON.
# Outside CI a failed install only warns (the moto suites then skip, saying why); under CI it fails.
set -uo pipefail
package_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$package_dir/.venv"
# Other packages' tests (@skyward/storage, core's Python tests) run this too, maybe at the same time:
# one at a time, so that none removes the environment another is installing.
if [ -z "${SKYWARD_MOTO_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
  exec env SKYWARD_MOTO_LOCKED=1 flock "${TMPDIR:-/tmp}/skyward-ensure-moto.lock" bash "${BASH_SOURCE[0]}" "$@"
fi
moto_version="${SKYWARD_MOTO_VERSION:-5.2.5}"
# shellcheck source=../../../scripts/ci.sh
source "$package_dir/../../scripts/ci.sh"

fail() {
  printf '[provider-aws] %s\n' "$*" >&2
  if skyward_is_ci; then exit 1; fi
  exit 0
}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import moto.server, flask" 2>/dev/null; then
  exit 0
fi
if [ -x /usr/bin/python3 ]; then base=/usr/bin/python3; else base="$(command -v python3 || true)"; fi
[ -n "$base" ] || fail "python3 (>= 3.9) is needed to run moto; the moto tests will be skipped"
printf '[provider-aws] installing moto[server]==%s into %s\n' "$moto_version" "$venv" >&2
rm -rf "$venv"
"$base" -m venv "$venv" >&2 || fail "could not create $venv (install python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$moto_version" >&2 ||
  fail "could not install moto[server] into $venv"
