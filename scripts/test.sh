#!/usr/bin/env bash
# Sets up everything the test suite needs (Node >= 22, pnpm, dependencies) and runs the whole suite:
# lint, TSDoc check, build, type checks, unit and end-to-end tests, publint and arethetypeswrong on
# every package; then prints one closing line with the totals.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
skyward_setup
skyward_ensure_system_packages
skyward_ensure_framework_packages
skyward_ensure_python
cd "$SKYWARD_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
rm -rf packages/*/.test-report examples/*/.test-report
pnpm run ci
node scripts/test-summary.mjs
