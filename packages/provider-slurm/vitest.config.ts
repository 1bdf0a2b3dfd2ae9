// The shared test configuration: see vitest.package.ts at the root.
import { providerTestConfig } from "../../vitest.package.ts";

// Every test here drives the real Slurm test bed; under a whole CI run's load a pool takes minutes.
export default providerTestConfig({ testTimeout: 120_000, hookTimeout: 120_000 });
