/**
 * The inputs of a pool that are files on this machine, checked before any provider is called: a
 * typo in a path should not cost a cloud instance's boot before it is reported.
 */
import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { normalizePlugin } from "../contract/plugin.js";
import type { PluginWorker } from "../contract/types.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { formatPath } from "../errors/validation.js";
import { inspectInclude } from "./includes.js";
import type { PoolSpec } from "./spec.js";

/** One resolved spec and the field path its issues are reported under (`specs[1]`, or "" for the flat form). */
export interface LocatedSpec {
  readonly spec: PoolSpec;
  readonly path: string;
}

async function checkInterpreter(python: string): Promise<string | undefined> {
  try {
    if (!(await stat(python)).isFile()) return `expected a Python interpreter, but ${python} is not a file`;
    await access(python, constants.X_OK);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT"
      ? `expected a Python interpreter that exists on this machine (the Local provider runs it), but ${python} does not exist`
      : `expected a Python interpreter this process can run, but ${python} is not executable`;
  }
}

/**
 * Checks every local path of the specs: each `image.includes` entry and each plugin's `worker.path`
 * must be a readable directory or `.py` file (relative paths resolve against `cwd`), two includes
 * must not land on the same name, and for the `Local` provider an interpreter path in `image.python`
 * must exist and be executable.
 *
 * @throws {ConfigurationError} listing every problem, each naming its field (`image.includes[1]`,
 *   `specs[0].plugins[2].worker.path`).
 */
export async function checkLocalInputs(
  specs: readonly LocatedSpec[],
  cwd: string = process.cwd(),
): Promise<void> {
  const issues: ConfigurationIssue[] = [];
  for (const { spec, path } of specs) {
    const names = new Map<string, string>();
    for (const [index, include] of spec.image.includes.entries()) {
      const field = formatPath(["image", "includes", index], path);
      const inspected = await inspectInclude(include, cwd);
      if ("problem" in inspected) {
        issues.push({ path: field, message: inspected.problem });
        continue;
      }
      const previous = names.get(inspected.name);
      if (previous !== undefined) {
        issues.push({
          path: field,
          message: `${include} would land on "${inspected.name}", already taken by ${previous}`,
        });
      }
      names.set(inspected.name, include);
    }
    for (const [index, plugin] of spec.plugins.entries()) {
      const modulePath = (normalizePlugin(plugin).worker as PluginWorker | undefined)?.path;
      if (modulePath === undefined) continue;
      const inspected = await inspectInclude(modulePath, cwd);
      if ("problem" in inspected) {
        issues.push({
          path: formatPath(["plugins", index, "worker", "path"], path),
          message: inspected.problem,
        });
      }
    }
    const local = spec.provider === undefined || spec.provider.name === "local";
    if (local && spec.image.python.startsWith("/")) {
      const problem = await checkInterpreter(spec.image.python);
      if (problem) issues.push({ path: formatPath(["image", "python"], path), message: problem });
    }
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
}
