/** What a package would publish, for tests that check its tarball. */
import { execFileSync } from "node:child_process";

/**
 * The paths (`python/x.py`, `src/index.ts`…) `npm pack` would put in the tarball of the package in
 * `packageDirectory`: a dry run, lifecycle scripts ignored.
 */
export function packedFiles(packageDirectory: string): string[] {
  const [packed] = JSON.parse(
    execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: packageDirectory,
      encoding: "utf8",
    }),
  ) as [{ files: { path: string }[] }];
  return packed.files.map((file) => file.path);
}
