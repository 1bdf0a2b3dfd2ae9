// The shared test configuration: see vitest.package.ts at the root.
import { fileURLToPath } from "node:url";
import { mergeConfig } from "vitest/config";
import { packageTestConfig } from "../../vitest.package.ts";

export default mergeConfig(
  packageTestConfig({
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 180_000,
  }),
  {
    // core loads this package by name for `options.dashboard`; core does not depend on it, so its
    // own resolution cannot find it from its sources: point the name at this package's.
    resolve: { alias: { "@skyward/dashboard": fileURLToPath(new URL("./src/index.ts", import.meta.url)) } },
  },
);
