/**
 * Code shipping: which local files an image's `includes` send to the nodes, and where they land.
 * A directory goes under its own name; a `.py` file keeps its name (so it imports by its stem).
 * `excludes` are glob patterns matched inside each include; caches, `.git` and virtual
 * environments are always left out.
 */
import { constants, type Stats } from "node:fs";
import { access, lstat, readdir } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve, sep } from "node:path";
import { ConfigurationError } from "../errors/errors.js";

/** One file to ship: where it is here, and its path relative to the node's work directory. */
export interface IncludedFile {
  readonly source: string;
  readonly target: string;
  readonly size: number;
  readonly mode: number;
}

/** Names never shipped, wherever they are. */
const ALWAYS_EXCLUDED = [
  "__pycache__",
  ".git",
  ".hg",
  ".svn",
  ".venv",
  "venv",
  ".mypy_cache",
  ".pytest_cache",
  ".ruff_cache",
  "node_modules",
  ".DS_Store",
  "*.pyc",
  "*.pyo",
];

/** Turns a glob (`*`, `**`, `?`, `[abc]`) into a regular expression over `/`-separated paths. */
export function globToRegExp(glob: string): RegExp {
  let pattern = "";
  for (let index = 0; index < glob.length; index += 1) {
    const char = glob[index] as string;
    if (char === "*") {
      if (glob[index + 1] === "*") {
        const slash = glob[index + 2] === "/";
        pattern += slash ? "(?:.*/)?" : ".*";
        index += slash ? 2 : 1;
      } else pattern += "[^/]*";
    } else if (char === "?") pattern += "[^/]";
    else if (char === "[") {
      const end = glob.indexOf("]", index + 1);
      if (end === -1) pattern += "\\[";
      else {
        pattern += `[${glob
          .slice(index + 1, end)
          .replace(/^!/, "^")
          .replace(/\\/g, "\\\\")}]`;
        index = end;
      }
    } else pattern += char.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return new RegExp(`^${pattern}$`);
}

/** A matcher for exclude patterns: a pattern without `/` matches any path component's name. */
function excludeMatcher(patterns: readonly string[]): (path: string) => boolean {
  const byName = patterns.filter((pattern) => !pattern.includes("/")).map(globToRegExp);
  const byPath = patterns
    .filter((pattern) => pattern.includes("/"))
    .map((pattern) => globToRegExp(pattern.replace(/^\.?\//, "").replace(/\/$/, "")));
  return (path) => {
    const name = path.slice(path.lastIndexOf("/") + 1);
    return (
      byName.some((pattern) => pattern.test(name)) ||
      byPath.some((pattern) => pattern.test(path) || pattern.test(`${path}/`))
    );
  };
}

/** An include that can be shipped: where it is here, the name it lands on, and what it is. */
export interface InspectedInclude {
  readonly source: string;
  readonly name: string;
  readonly stats: Stats;
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
  const where = isAbsolute(include)
    ? ""
    : `; relative paths resolve against the working directory ${cwd}, which makes it ${source}`;
  let stats: Stats;
  try {
    stats = await lstat(source);
  } catch {
    return {
      problem: `expected a directory or a .py file that exists, but ${include} does not exist${where}`,
    };
  }
  const name = basename(source);
  if (!stats.isDirectory() && !(stats.isFile() && name.endsWith(".py"))) {
    const kind = stats.isFile()
      ? "a file that is not .py"
      : stats.isSymbolicLink()
        ? "a symbolic link"
        : "not a regular file";
    return { problem: `expected a directory or a .py file, but ${include} is ${kind}${where}` };
  }
  try {
    await access(source, stats.isDirectory() ? constants.R_OK | constants.X_OK : constants.R_OK);
  } catch {
    return {
      problem: `expected a directory or a .py file this process can read, but ${source} is not readable`,
    };
  }
  return { source, name, stats };
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
    const { source, name, stats } = inspected;
    const previous = roots.get(name);
    if (previous !== undefined) {
      throw new ConfigurationError({
        issues: [{ path, message: `${include} would land on "${name}", already taken by ${previous}` }],
      });
    }
    roots.set(name, include);
    if (stats.isFile()) {
      files.push({ source, target: name, size: stats.size, mode: stats.mode & 0o777 });
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
