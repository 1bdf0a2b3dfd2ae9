#!/usr/bin/env bash
# Sets up what the demo needs (Node >= 22, pnpm, dependencies), builds the packages and runs the
# quickstart example on this machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
skyward_setup
cd "$SKYWARD_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
pnpm exec turbo run build --output-logs=errors-only >&2
pnpm --silent demo "$@"
