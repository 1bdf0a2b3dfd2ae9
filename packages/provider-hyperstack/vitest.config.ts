// The shared test configuration: see vitest.package.ts at the root.
import { providerTestConfig } from "../../vitest.package.ts";

// 120 s a test: CLI starts and pools on a CI machine under a whole run's load took past 30 s.
export default providerTestConfig({ testTimeout: 120_000, hookTimeout: 120_000 });
