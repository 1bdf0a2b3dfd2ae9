// The shared test configuration: see vitest.package.ts at the root.
import { packageTestConfig } from "../../vitest.package.ts";

export default packageTestConfig({
  include: ["src/**/*.test.ts", "test/**/*.test.ts"],
  testTimeout: 120_000,
  hookTimeout: 180_000,
});
