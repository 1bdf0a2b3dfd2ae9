#!/usr/bin/env bash
# The one rule for "under CI", sourced by the other scripts: CI set to anything but empty, 0 or false
# (any case) — the same rule as isCi() in @skyward/testing and is_ci() in the Python tests, which
# packages/testing/src/prerequisites.test.ts holds together. Under CI a missing prerequisite fails.
skyward_is_ci() {
  local value="${CI:-}"
  value="$(printf '%s' "$value" | tr '[:upper:]' '[:lower:]')"
  [ -n "$value" ] && [ "$value" != "0" ] && [ "$value" != "false" ]
}
