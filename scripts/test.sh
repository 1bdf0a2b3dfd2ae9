#!/usr/bin/env bash
# Sets up everything the test suite needs (Node >= 24, pnpm, dependencies), checks the rest by using it
# (scripts/check-prerequisites.sh: under CI a missing sshd, numpy, torch… fails here) and runs the whole suite:
# lint, TSDoc check, build, type checks, unit and end-to-end tests, publint and arethetypeswrong on
# every package; then prints one closing line with the totals, the skips by reason (under CI only the
# skips scripts/allowed-skips.json explains), checks the run's output for noise
# (scripts/check-log-noise.mjs) and scans it and the test reports for secrets (scripts/scan-secrets.mjs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
# The setup's output is kept too: a fresh install must be free of warnings (checked below).
setup_log="$(mktemp)"
{
  skyward_setup
  # What these cannot install is named below, with the rest, by using each prerequisite.
  skyward_ensure_system_packages || true
  skyward_ensure_framework_packages || true
  skyward_ensure_python
  # The Kubernetes provider's real cluster: built once into its cache (outside the repository); the
  # build prints its duration, so CI shows the cost when the cache is cold.
  if [ "$(id -u)" = 0 ] && ! bash "$SKYWARD_ROOT/scripts/k8s-testbed.sh" built; then bash "$SKYWARD_ROOT/scripts/k8s-testbed.sh" build; fi
  # Under CI a machine without sshd, numpy, torch… fails here, naming each missing thing.
  bash "$SKYWARD_ROOT/scripts/check-prerequisites.sh"
} > >(tee -a "$setup_log") 2> >(tee -a "$setup_log" >&2)
cd "$SKYWARD_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
rm -rf packages/*/.test-report examples/*/.test-report .test-logs
mkdir -p .test-logs
mv "$setup_log" .test-logs/setup.log
# The tests' pools keep their Skyward home (log file, venv cache, keys, known hosts) inside the
# checkout, never in the user's own ~/.skyward; the check after the run holds the suite to that.
export SKYWARD_HOME="${SKYWARD_TEST_HOME:-$SKYWARD_ROOT/.toolchain/skyward-home}"
mkdir -p "$SKYWARD_HOME"
user_home="$HOME/.skyward"
home_marker="$(mktemp)"
# The whole run's output is kept in .test-logs/ci.log, then scanned for secrets with the reports.
# Plain text: CI=true makes vitest colour its output even into a pipe, unless NO_COLOR is set; attw's
# table (chalk) ignores NO_COLOR and colours whenever TERM names a colour terminal, unless FORCE_COLOR=0.
export NO_COLOR=1 FORCE_COLOR=0
# Each provider's fault matrix leaves its result here; one line for them all is printed after the run.
export SKYWARD_FAULT_MATRIX_RESULTS="$SKYWARD_ROOT/.test-logs/fault-matrix"
status=0
pnpm run ci 2>&1 | tee .test-logs/ci.log || status=$?
node scripts/test-summary.mjs || status=1
node scripts/fault-matrix-summary.mjs || status=1
# Skips by reason; under CI a skip that scripts/allowed-skips.json does not explain fails the run.
node scripts/check-skips.mjs || status=1
node scripts/check-log-noise.mjs .test-logs/setup.log .test-logs/ci.log || status=1
# Pools log to $SKYWARD_HOME/logs by default: those files are scanned too.
node scripts/scan-secrets.mjs .test-logs packages/*/.test-report examples/*/.test-report \
  "$SKYWARD_HOME/logs" || status=1
if [ -d "$user_home" ] && [ -n "$(find "$user_home" -newer "$home_marker" -print -quit 2>/dev/null)" ]; then
  echo "The test suite wrote into your own $user_home (it must use \$SKYWARD_HOME):" >&2
  { find "$user_home" -newer "$home_marker" -print 2>/dev/null | head -20 >&2; } || true
  status=1
fi
rm -f "$home_marker"
exit "$status"
