/** What a package would publish, for tests that check its tarball. */
import { spawnSync } from "node:child_process";

/**
 * The paths (`python/x.py`, `src/index.ts`…) `npm pack` would put in the tarball of the package in
 * `packageDirectory`: a dry run, lifecycle scripts ignored.
 */
export function packedFiles(packageDirectory: string): string[] {
  // npm's stderr is kept, not inherited: its warnings about settings it does not know (pnpm's own
  // `npm_config_*` variables, a machine's `nodedir`) would only be noise in the test log.
  const pack = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: packageDirectory,
    encoding: "utf8",
  });
  if (pack.error) throw pack.error;
  if (pack.status !== 0) {
    throw new Error(
      `npm pack --dry-run failed in ${packageDirectory} (exit ${pack.status}):\n${pack.stderr}`,
    );
  }
  const [packed] = JSON.parse(pack.stdout) as [{ files: { path: string }[] }];
  return packed.files.map((file) => file.path);
}
