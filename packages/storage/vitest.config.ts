import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["@skyward/testing/vitest-global-setup"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
  },
});
