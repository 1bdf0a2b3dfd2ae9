#!/usr/bin/env bash
# Sets up everything the test suite needs (Node >= 24, pnpm, dependencies) and runs the whole suite:
# lint, TSDoc check, build, type checks, unit and end-to-end tests, publint and arethetypeswrong on
# every package; then prints one closing line with the totals, and scans the run's output and test
# reports for secrets (scripts/scan-secrets.mjs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
skyward_setup
skyward_ensure_system_packages
skyward_ensure_framework_packages
skyward_ensure_python
cd "$SKYWARD_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
rm -rf packages/*/.test-report examples/*/.test-report .test-logs
mkdir -p .test-logs
# The whole run's output is kept in .test-logs/ci.log, then scanned for secrets with the reports.
status=0
pnpm run ci 2>&1 | tee .test-logs/ci.log || status=$?
node scripts/test-summary.mjs || status=1
# Pools log to ~/.skyward/logs (or $SKYWARD_HOME/logs) by default: those files are scanned too.
node scripts/scan-secrets.mjs .test-logs packages/*/.test-report examples/*/.test-report \
  "${SKYWARD_HOME:-$HOME/.skyward}/logs" || status=1
exit "$status"
