import build from "../../tsup.package.ts";

// The shared build (tsup.package.ts at the root), with the executable as a second entry (no types).
export default { ...build, entry: ["src/index.ts", "src/cli.ts"], dts: { entry: "src/index.ts" } };
