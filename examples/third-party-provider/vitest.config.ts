import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  test: {
    // The test bed (sshd hosts in network namespaces) is made and removed by the tests themselves;
    // this sweeps what a killed run left.
    globalSetup: ["@skyward/testing/vitest-global-setup"],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
  },
});
