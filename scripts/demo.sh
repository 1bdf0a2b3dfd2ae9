#!/usr/bin/env bash
# Sets up what the demo needs (Node >= 24, pnpm, dependencies), builds the packages and runs the
# quickstart example on this machine (with --testbed: on 4 SSH hosts of a local test bed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
skyward_setup
case " $* " in *" --testbed "*) skyward_ensure_system_packages ;; esac
cd "$SKYWARD_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
skyward_build --filter @skyward/example-quickstart...
pnpm --silent demo "$@"
