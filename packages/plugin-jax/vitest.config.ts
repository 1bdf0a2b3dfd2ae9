// The shared test configuration: see vitest.package.ts at the root.
import { packageTestConfig } from "../../vitest.package.ts";

export default packageTestConfig({
  projects: [
    { extends: true, test: { name: "unit", include: ["src/**/*.test.ts"] } },
    {
      extends: true,
      test: { name: "e2e", include: ["test/**/*.test.ts"], testTimeout: 300_000, hookTimeout: 600_000 },
    },
  ],
});
