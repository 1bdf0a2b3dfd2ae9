import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts", "src/contract.ts", "src/config.ts", "src/logs.ts", "src/protocol.ts"],
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node22",
  tsconfig: "tsconfig.build.json",
});
