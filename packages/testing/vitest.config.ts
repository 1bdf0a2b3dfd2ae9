import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    include: ["src/**/*.test.ts"],
    globalSetup: ["./src/vitest-global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
  },
});
