import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    include: ["src/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
  },
});
