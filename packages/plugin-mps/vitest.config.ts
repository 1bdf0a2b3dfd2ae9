import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    include: ["src/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
  },
});
