import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let runtimeDirectory: string | undefined;

/**
 * Where this package's Python runtime (`skyward/`, `skyward_worker.py`) is: the package's `python/`
 * folder, found upwards from this module (it runs from `src/protocol/` in tests and from `dist/` built).
 */
export function pythonRuntimeDirectory(): string {
  if (runtimeDirectory) return runtimeDirectory;
  let directory = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(directory, "python");
    if (existsSync(join(candidate, "skyward_worker.py"))) {
      runtimeDirectory = candidate;
      return candidate;
    }
    const parent = dirname(directory);
    if (parent === directory)
      throw new Error("the Python runtime (python/skyward_worker.py) of @skyward/core is missing");
    directory = parent;
  }
}
