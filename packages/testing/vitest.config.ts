import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    globalSetup: ["./src/vitest-global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
    projects: [
      { extends: true, test: { name: "testbed", include: ["src/**/*.test.ts"] } },
      {
        extends: true,
        test: { name: "ssh-e2e", include: ["test/**/*.test.ts"], testTimeout: 300_000, hookTimeout: 120_000 },
      },
    ],
  },
});
