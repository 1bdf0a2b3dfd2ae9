import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
    projects: [
      { extends: true, test: { name: "unit", include: ["src/**/*.test.ts"] } },
      {
        extends: true,
        test: {
          name: "cli-e2e",
          include: ["test/**/*.test.ts"],
          // The end-to-end tests run the built dist/cli.js: build it first when the sources are newer.
          globalSetup: ["./test/build-cli.ts"],
        },
      },
    ],
  },
});
