import build from "../../tsup.package.ts";

// The shared build (tsup.package.ts at the root), with the package's other entry points.
export default {
  ...build,
  entry: ["src/index.ts", "src/contract.ts", "src/config.ts", "src/logs.ts", "src/protocol.ts"],
};
