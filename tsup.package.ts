/**
 * The build most packages share (their `tsup.config.ts` re-exports it): `src/index.ts` as an ES module
 * for Node 22, with declarations and source maps, compiled with the package's `tsconfig.build.json`.
 */
import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node22",
  tsconfig: "tsconfig.build.json",
});
