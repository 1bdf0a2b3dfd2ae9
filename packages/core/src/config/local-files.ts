/**
 * The pool's inputs that are files on this machine, read here and judged by `spec/` (which never
 * reads a file): the files an image's `includes` ship (`spec/includes.ts` says which), and the
 * check run before any provider is called — a typo in a path should not cost a cloud instance's
 * boot before it is reported.
 */
import { constants, type Stats } from "node:fs";
import { access, lstat, readdir, stat } from "node:fs/promises";
import { basename, join, relative, resolve, sep } from "node:path";
import { normalizePlugin } from "../contract/plugin.js";
import type { PluginWorker } from "../contract/types.js";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { formatPath } from "../errors/validation.js";
import {
  ALWAYS_EXCLUDED,
  excludeMatcher,
  type FoundPath,
  type IncludedFile,
  includeProblem,
  landingClash,
} from "../spec/includes.js";
import type { PoolSpec } from "../spec/spec.js";

/** An include that can be shipped: where it is here, the name it lands on, and whether it is a file. */
export interface InspectedInclude {
  readonly source: string;
  readonly name: string;
  readonly file: { readonly size: number; readonly mode: number } | undefined;
}

/** What is at `source`: its kind and whether this process can read it (undefined: nothing). */
async function findPath(source: string): Promise<(FoundPath & { size: number; mode: number }) | undefined> {
  let stats: Stats;
  try {
    stats = await lstat(source);
  } catch {
    return undefined;
  }
  const kind = stats.isDirectory()
    ? "directory"
    : stats.isFile()
      ? "file"
      : stats.isSymbolicLink()
        ? "symbolic link"
        : "other";
  const readable = await access(
    source,
    kind === "directory" ? constants.R_OK | constants.X_OK : constants.R_OK,
  )
    .then(() => true)
    .catch(() => false);
  return { kind, readable, size: stats.size, mode: stats.mode & 0o777 };
}

/**
 * Checks one path that is shipped to the nodes (an `includes` entry, a plugin's worker module): it
 * must be a readable directory or `.py` file. Relative paths resolve against `cwd`. Returns what it
 * is, or the problem in the words of a configuration issue.
 */
export async function inspectInclude(
  include: string,
  cwd: string = process.cwd(),
): Promise<InspectedInclude | { readonly problem: string }> {
  const source = resolve(cwd, include);
  const found = await findPath(source);
  const problem = includeProblem(include, source, cwd, found);
  if (problem !== undefined) return { problem };
  const file = found?.kind === "file" ? { size: found.size, mode: found.mode } : undefined;
  return { source, name: basename(source), file };
}

/**
 * Lists the files `includes` ship, relative to `cwd`, honouring `excludes`. Throws a configuration
 * error naming `image.includes[i]` for a path {@link inspectInclude} refuses, and for two includes
 * that would land on the same name.
 */
export async function collectIncludedFiles(
  includes: readonly string[],
  excludes: readonly string[],
  cwd: string = process.cwd(),
): Promise<IncludedFile[]> {
  const isUserExcluded = excludeMatcher(excludes);
  const isAlwaysExcluded = excludeMatcher(ALWAYS_EXCLUDED);
  const files: IncludedFile[] = [];
  const roots = new Map<string, string>();
  for (const [index, include] of includes.entries()) {
    const path = `image.includes[${index}]`;
    const inspected = await inspectInclude(include, cwd);
    if ("problem" in inspected)
      throw new ConfigurationError({ issues: [{ path, message: inspected.problem }] });
    const { source, name, file } = inspected;
    const previous = roots.get(name);
    if (previous !== undefined) {
      throw new ConfigurationError({ issues: [{ path, message: landingClash(include, name, previous) }] });
    }
    roots.set(name, include);
    if (file !== undefined) {
      files.push({ source, target: name, size: file.size, mode: file.mode });
      continue;
    }
    const walk = async (directory: string): Promise<void> => {
      const entries = await readdir(directory, { withFileTypes: true });
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const entry of entries) {
        const full = join(directory, entry.name);
        const inside = relative(source, full).split(sep).join("/");
        if (isAlwaysExcluded(inside) || isUserExcluded(inside)) continue;
        if (entry.isDirectory()) await walk(full);
        else if (entry.isFile()) {
          const entryStats = await lstat(full);
          files.push({
            source: full,
            target: `${name}/${inside}`,
            size: entryStats.size,
            mode: entryStats.mode & 0o777,
          });
        }
      }
    };
    await walk(source);
  }
  return files;
}

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
        issues.push({ path: field, message: landingClash(include, inspected.name, previous) });
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
