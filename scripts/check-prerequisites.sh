#!/usr/bin/env bash
# Checks, by using each one, what the test suite needs beyond Node: the OpenSSH server the test bed
# runs (and ssh-keygen), iproute2, tmux, s3fs, and the Python modules the end-to-end and Python tests
# import (numpy, torch, scikit-learn, joblib >= 1.4, pytest). Prints one line per missing thing,
# naming it and what needs it. Under CI (scripts/ci.sh's rule) anything missing fails; outside CI the
# suites that need it skip, saying why, and this only reports.
# Run by scripts/test.sh after setup, so a machine without them fails at once under CI, naming them.
# SKYWARD_SSHD and SKYWARD_TEST_PYTHON say where the server and the test Python are (default: the
# test bed's /usr/sbin/sshd, and python3 on PATH, the test environment once setup ran).
set -uo pipefail
# shellcheck source=ci.sh
source "$(dirname "${BASH_SOURCE[0]}")/ci.sh"

sshd="${SKYWARD_SSHD:-/usr/sbin/sshd}"
python="${SKYWARD_TEST_PYTHON:-python3}"
missing=()

# `sshd -V` prints its version and exits 0 (OpenSSH >= 9.0 at least); anything else is not a server we run.
"$sshd" -V >/dev/null 2>&1 || missing+=("sshd ($sshd: the OpenSSH server the test bed's hosts run; apt openssh-server)")
ssh-keygen -l -f /dev/null >/dev/null 2>&1
[ $? -ne 127 ] || missing+=("ssh-keygen (keys for the test bed and the SSH tests; apt openssh-client)")
ip -V >/dev/null 2>&1 || missing+=("ip (the test bed's network namespaces; apt iproute2)")
tmux -V >/dev/null 2>&1 || missing+=("tmux (a real terminal for the live console's test; apt tmux)")
s3fs --version >/dev/null 2>&1 || missing+=("s3fs (the volume tests' bucket mounts; apt s3fs)")

# One interpreter start imports every module and names those it cannot.
modules_missing="$("$python" - 2>/dev/null <<'PY'
import importlib
needs = {
    "numpy": "the NDArray round trips and the TS/Python protocol vectors",
    "torch": "the torch module round trips and the torch plugin's tests",
    "sklearn": "the model-handle round trips and the joblib plugin's tests",
    "joblib": "the joblib backend's tests",
    "pytest": "the Python tests",
}
for name, why in needs.items():
    try:
        module = importlib.import_module(name)
    except Exception:
        print(f"{name} ({why})")
        continue
    if name == "joblib" and tuple(int(p) for p in module.__version__.split(".")[:2]) < (1, 4):
        print(f"joblib >= 1.4 ({why}; found {module.__version__})")
PY
)" || modules_missing="a Python to import the test modules with ($python did not run)"
while IFS= read -r line; do
  [ -n "$line" ] && missing+=("$line")
done <<<"$modules_missing"

if [ ${#missing[@]} -eq 0 ]; then
  echo "check-prerequisites: sshd, ssh-keygen, ip, tmux, s3fs and the test Python's modules are all here."
  exit 0
fi
if skyward_is_ci; then
  echo "check-prerequisites: CI requires what is missing here:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi
echo "check-prerequisites: missing here (the suites that need them skip, saying why; under CI this fails):" >&2
printf '  %s\n' "${missing[@]}" >&2
exit 0
