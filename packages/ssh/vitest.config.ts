import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    include: ["src/**/*.test.ts"],
    // Generous: CI runs every package's suites at once on 2 cores, and these run real bash, sshd and pip.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
  },
});
