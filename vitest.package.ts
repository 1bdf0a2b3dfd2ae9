/**
 * The test configuration the packages share (their `vitest.config.ts` build on it): sources read
 * through the `@skyward/source` condition (no build needed), and a JSON report in `.test-report/`
 * that `scripts/test.sh` collects; each package adds its own `test` options.
 */
import { fileURLToPath } from "node:url";
import { defineConfig, mergeConfig, type ViteUserConfig } from "vitest/config";

/**
 * Where tests keep Skyward's files (venvs, pools, keys, offers, logs): `SKYWARD_HOME` as
 * `scripts/test.sh` sets it, else the repository's own `.toolchain/skyward-home` — never the
 * user's `~/.skyward`, even when vitest is run by hand.
 */
const skywardHome =
  process.env.SKYWARD_HOME ?? fileURLToPath(new URL(".toolchain/skyward-home", import.meta.url));

/** The environment every package's tests get (`test.env`): {@link skywardHome} as `SKYWARD_HOME`. */
export const testEnv = Object.freeze({ SKYWARD_HOME: skywardHome });

/** The shared configuration with `test` (what the package's tests need) on top of it. */
export function packageTestConfig(test: NonNullable<ViteUserConfig["test"]>) {
  return mergeConfig(
    defineConfig({
      resolve: { conditions: ["@skyward/source"] },
      ssr: { resolve: { conditions: ["@skyward/source"] } },
      test: {
        reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
        env: { ...testEnv },
      },
    }),
    defineConfig({ test }),
  );
}

/** A provider package's: unit tests and end-to-end tests on the test bed (its global setup). */
export function providerTestConfig(timeouts: { testTimeout: number; hookTimeout: number }) {
  return packageTestConfig({
    globalSetup: ["@skyward/testing/vitest-global-setup"],
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    ...timeouts,
  });
}
