/**
 * The test configuration the packages share (their `vitest.config.ts` build on it): sources read
 * through the `@skyward/source` condition (no build needed), and a JSON report in `.test-report/`
 * that `scripts/test.sh` collects; each package adds its own `test` options.
 */
import { defineConfig, mergeConfig, type ViteUserConfig } from "vitest/config";

/** The shared configuration with `test` (what the package's tests need) on top of it. */
export function packageTestConfig(test: NonNullable<ViteUserConfig["test"]>) {
  return mergeConfig(
    defineConfig({
      resolve: { conditions: ["@skyward/source"] },
      ssr: { resolve: { conditions: ["@skyward/source"] } },
      test: { reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]] },
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
