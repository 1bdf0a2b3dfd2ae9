import { defineConfig } from "vitest/config";
import { testEnv } from "../../vitest.package.ts";

export default defineConfig({
  resolve: { conditions: ["@skyward/source"] },
  ssr: { resolve: { conditions: ["@skyward/source"] } },
  test: {
    reporters: ["default", ["json", { outputFile: ".test-report/vitest.json" }]],
    env: { ...testEnv },
    projects: [
      // Generous timeouts: CI runs every package's suites at once on 2 cores, and some of these run
      // real shells, Python and 64 MiB frames.
      {
        extends: true,
        test: { name: "unit", include: ["src/**/*.test.ts"], testTimeout: 60_000, hookTimeout: 120_000 },
      },
      // Type-level tests (`*.test-d.ts`): checked by tsc, never run.
      {
        extends: true,
        test: {
          name: "types",
          include: [],
          typecheck: {
            enabled: true,
            only: true,
            include: ["src/**/*.test-d.ts"],
            tsconfig: "tsconfig.test-d.json",
          },
        },
      },
      {
        extends: true,
        test: { name: "e2e", include: ["test/**/*.test.ts"], testTimeout: 120_000, hookTimeout: 120_000 },
      },
    ],
  },
});
