import build from "../../tsup.package.ts";

// The shared build (tsup.package.ts at the root), with the vitest global setup as a second entry.
export default { ...build, entry: ["src/index.ts", "src/vitest-global-setup.ts"] };
