import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    globalSetup: ["@skyward/testing/vitest-global-setup"],
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
    projects: [
      { extends: true, test: { name: "unit", include: ["src/**/*.test.ts"] } },
      {
        extends: true,
        test: { name: "e2e", include: ["test/**/*.test.ts"], testTimeout: 300_000, hookTimeout: 180_000 },
      },
    ],
  },
});
