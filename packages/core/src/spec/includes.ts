/**
 * Code shipping, the rules: which of an include's files go to the nodes, where they land, and what
 * an include may be. A directory goes under its own name; a `.py` file keeps its name (so it imports
 * by its stem). `excludes` are glob patterns matched inside each include; caches, `.git` and virtual
 * environments are always left out. Reading the files is `config/local-files.ts`'s business: this
 * module judges what it found.
 */
import { isAbsolute } from "node:path";

/** One file to ship: where it is here, and its path relative to the node's work directory. */
export interface IncludedFile {
  readonly source: string;
  readonly target: string;
  readonly size: number;
  readonly mode: number;
}

/** Names never shipped, wherever they are. */
export const ALWAYS_EXCLUDED = [
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
export function excludeMatcher(patterns: readonly string[]): (path: string) => boolean {
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

/** What a path turned out to be on this machine (its `lstat`, and whether this process may read it). */
export interface FoundPath {
  readonly kind: "directory" | "file" | "symbolic link" | "other";
  readonly readable: boolean;
}

/**
 * Why `include` (found at `source`, resolved against `cwd`) cannot be shipped, in the words of a
 * configuration issue; undefined when it is a readable directory or `.py` file. `found` is undefined
 * when nothing is there.
 */
export function includeProblem(
  include: string,
  source: string,
  cwd: string,
  found: FoundPath | undefined,
): string | undefined {
  const where = isAbsolute(include)
    ? ""
    : `; relative paths resolve against the working directory ${cwd}, which makes it ${source}`;
  if (found === undefined)
    return `expected a directory or a .py file that exists, but ${include} does not exist${where}`;
  if (found.kind !== "directory" && !(found.kind === "file" && source.endsWith(".py"))) {
    const kind =
      found.kind === "file"
        ? "a file that is not .py"
        : found.kind === "symbolic link"
          ? "a symbolic link"
          : "not a regular file";
    return `expected a directory or a .py file, but ${include} is ${kind}${where}`;
  }
  if (!found.readable)
    return `expected a directory or a .py file this process can read, but ${source} is not readable`;
  return undefined;
}

/** The issue of an include landing on a name an earlier include (`previous`) took. */
export function landingClash(include: string, name: string, previous: string): string {
  return `${include} would land on "${name}", already taken by ${previous}`;
}
