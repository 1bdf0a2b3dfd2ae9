// The shared test configuration: see vitest.package.ts at the root.
import { providerTestConfig } from "../../vitest.package.ts";

export default providerTestConfig({ testTimeout: 30_000, hookTimeout: 120_000 });
