/**
 * Vitest global setup of the end-to-end tests: they run the built `dist/cli.js`, so build it when it is
 * missing or older than a source file (turbo builds it before `pnpm test` anyway).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));

function newestSource(): number {
  const sources = readdirSync(join(packageDirectory, "src")).map((name) =>
    join(packageDirectory, "src", name),
  );
  return Math.max(
    ...[...sources, join(packageDirectory, "tsup.config.ts")].map((file) => statSync(file).mtimeMs),
  );
}

/** Builds `dist/cli.js` when it is stale; fails early when `@skyward/core` is not built. */
export function setup(): void {
  const core = join(packageDirectory, "node_modules", "@skyward", "core", "dist", "index.js");
  if (!existsSync(core)) throw new Error("@skyward/core is not built: run `pnpm turbo run build` first");
  const cli = join(packageDirectory, "dist", "cli.js");
  if (existsSync(cli) && statSync(cli).mtimeMs >= newestSource()) return;
  execFileSync(join(packageDirectory, "node_modules", ".bin", "tsup"), [], {
    cwd: packageDirectory,
    stdio: "inherit",
  });
}
