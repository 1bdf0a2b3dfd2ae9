// The shared test configuration: see vitest.package.ts at the root.
import { packageTestConfig } from "../../vitest.package.ts";

export default packageTestConfig({ include: ["src/**/*.test.ts"], testTimeout: 60_000, hookTimeout: 60_000 });
