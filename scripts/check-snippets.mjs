// Type-checks every TypeScript snippet of the documentation: docs that compile.
//
// Usage: node scripts/check-snippets.mjs [--keep]   (run from anywhere; works on the source, no build needed)
//
// What is a snippet
//   - A fenced code block tagged `ts`, `typescript`, `tsx` or `mts` in README.md, packages/*/README.md,
//     examples/*/README.md and docs/**/*.md.
//   - A fenced block with those tags inside any TSDoc comment (`/** … */`) of packages/*/src/**/*.ts
//     (tests excluded): `@example` bodies and module or symbol comments that show usage alike. The
//     comment's leading ` * ` is stripped. An `@example` with no fenced block at all is an error, since
//     nothing of it could be checked.
//   Files are found by globbing on every run, so new packages and moved sources are picked up.
//
// Opting out
//   A block whose info string carries `no-check` (```ts no-check) is not checked; use it only for a
//   deliberately non-compiling fragment (one that shows a type error, say). Every skipped block is
//   listed in the output. Otherwise a snippet must be complete: its imports included.
//
// How it checks
//   Each snippet is written as its own module (`export {};` is appended, after its last line, so
//   line numbers stay put and top-level `await` / `await using` are allowed) under `.snippets/` at the
//   repository root (git-ignored; made afresh on each run, removed after it unless --keep). All snippets are type-checked in ONE program
//   through the `typescript` API, with the compiler options of tsconfig.base.json (strict, NodeNext,
//   ES2023 + ESNext.Disposable, verbatimModuleSyntax, noUncheckedIndexedAccess…) plus noEmit.
//
// How `@skyward/*` imports resolve
//   `.snippets/node_modules/@skyward/<name>` is a symlink to each workspace package (found by reading
//   packages/*/package.json), and the base config's `customConditions: ["@skyward/source"]` makes
//   NodeNext pick each package's `exports` entry for that condition, which points at its `.ts`
//   source. So every subpath a package exports resolves exactly as its `exports` map says, with no
//   hand-kept `paths` table, and no `dist` is needed: this runs before the build. Symlinks are
//   followed to the real path, so a package's own dependencies (zod, ssh2…) resolve from its own
//   node_modules; anything else a snippet imports (vitest, node:*) resolves from the root's, so a
//   third-party package shown in the docs must be a root devDependency. A package whose `exports` lack
//   the `@skyward/source` condition would resolve to its built `types` instead (and need the build).
//   Only diagnostics inside snippets are reported (the packages' own typecheck covers their sources).
//
// Output: `FILE:LINE (snippet N): message` per error, LINE being the line in the markdown or
// TypeScript file; then `checked N snippets from M files`. Exits 1 on any error.
import { globSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const scratch = join(root, ".snippets");
const keep = process.argv.includes("--keep");

const MARKDOWN_GLOBS = ["README.md", "packages/*/README.md", "examples/*/README.md", "docs/**/*.md"];
const SOURCE_GLOBS = ["packages/*/src/**/*.ts", "packages/*/src/**/*.tsx", "packages/*/src/**/*.mts"];
const LANGUAGES = new Map([
  ["ts", ".ts"],
  ["typescript", ".ts"],
  ["tsx", ".tsx"],
  ["mts", ".mts"],
]);
const OPT_OUT = "no-check";

/** Paths (relative to the root, sorted) matching any of `patterns`, without `node_modules`. */
function files(patterns, exclude = () => false) {
  const found = new Set();
  for (const pattern of patterns) {
    for (const path of globSync(pattern, { cwd: root })) {
      const normal = path.split("\\").join("/");
      if (!normal.split("/").includes("node_modules") && !exclude(normal)) found.add(normal);
    }
  }
  return [...found].sort();
}

/**
 * The fenced blocks of `lines` (an array of strings), as `{ info, language, body, line }` where
 * `line` is the 0-based index of the opening fence within `lines`. Handles ``` and ~~~ fences of any
 * length and indented fences (list items), whose indentation is removed from the body.
 */
function fencedBlocks(lines) {
  const blocks = [];
  for (let index = 0; index < lines.length; index += 1) {
    const open = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(lines[index]);
    if (!open) continue;
    const [, indent, fence, rest] = open;
    if (fence[0] === "`" && rest.includes("`")) continue; // inline code, not a fence
    const info = rest.trim();
    const body = [];
    let close = index + 1;
    for (; close < lines.length; close += 1) {
      const line = lines[close];
      const closing = /^\s*(`{3,}|~{3,})\s*$/.exec(line);
      if (closing && closing[1][0] === fence[0] && closing[1].length >= fence.length) break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    blocks.push({ info, language: info.split(/\s+/)[0].toLowerCase(), body, line: index });
    index = close;
  }
  return blocks;
}

/** The `/** … *\/` comments of a TypeScript file, as `{ lines, line }` (`line`: 0-based start line). */
function docComments(path, text) {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false);
  const seen = new Set();
  const comments = [];
  const collect = (position) => {
    for (const range of ts.getLeadingCommentRanges(text, position) ?? []) {
      if (seen.has(range.pos)) continue;
      seen.add(range.pos);
      const comment = text.slice(range.pos, range.end);
      if (range.kind !== ts.SyntaxKind.MultiLineCommentTrivia || !comment.startsWith("/**")) continue;
      const lines = comment
        .slice(3, -2)
        .split("\n")
        .map((line) => line.replace(/^\s*\* ?/, "").replace(/\s+$/, ""));
      comments.push({ lines, line: source.getLineAndCharacterOfPosition(range.pos).line });
    }
  };
  const visit = (node) => {
    collect(node.pos);
    ts.forEachChild(node, visit);
  };
  visit(source);
  collect(source.endOfFileToken.pos);
  return comments.sort((a, b) => a.line - b.line);
}

/** `@example` sections of a comment's lines with no fenced block in them, as 0-based line offsets. */
function unfencedExamples(lines) {
  const offsets = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!/^@example\b/.test(lines[index])) continue;
    let end = index + 1;
    while (end < lines.length && !/^@\w/.test(lines[end])) end += 1;
    if (!lines.slice(index + 1, end).some((line) => /^\s*(`{3,}|~{3,})/.test(line))) offsets.push(index);
    index = end - 1;
  }
  return offsets;
}

const snippets = [];
const skipped = [];
const problems = [];
const scanned = new Set();

function addBlocks(path, blocks, lineBase) {
  for (const block of blocks) {
    const extension = LANGUAGES.get(block.language);
    if (extension === undefined) continue;
    scanned.add(path);
    const line = lineBase + block.line + 1; // 1-based line of the opening fence
    if (block.info.split(/\s+/).slice(1).includes(OPT_OUT)) {
      skipped.push(`${path}:${line}`);
      continue;
    }
    snippets.push({ path, line, extension, code: block.body.join("\n") });
  }
}

for (const path of files(MARKDOWN_GLOBS)) {
  addBlocks(path, fencedBlocks(readFileSync(join(root, path), "utf8").split("\n")), 0);
}
const isTest = (path) => /\.test\.m?tsx?$/.test(path) || path.endsWith(".d.ts");
for (const path of files(SOURCE_GLOBS, isTest)) {
  const text = readFileSync(join(root, path), "utf8");
  if (!text.includes("/**")) continue;
  for (const comment of docComments(path, text)) {
    addBlocks(path, fencedBlocks(comment.lines), comment.line);
    for (const offset of unfencedExamples(comment.lines)) {
      problems.push(
        `${path}:${comment.line + offset + 1}: @example without a fenced code block (fence it as \`\`\`ts so it is type-checked)`,
      );
    }
  }
}

// The scratch directory: one module per snippet, and node_modules/@skyward/* linking the packages —
// and the examples written as third-party packages (`skyward-plugin-threads`…), which the docs import.
rmSync(scratch, { recursive: true, force: true });
mkdirSync(join(scratch, "node_modules", "@skyward"), { recursive: true });
for (const manifest of files(["packages/*/package.json", "examples/*/package.json"])) {
  const { name } = JSON.parse(readFileSync(join(root, manifest), "utf8"));
  const workspacePackage = typeof name === "string" && name.startsWith("@skyward/");
  const thirdParty = typeof name === "string" && manifest.startsWith("examples/") && !workspacePackage;
  if (!(workspacePackage && manifest.startsWith("packages/")) && !thirdParty) continue;
  const link = join(scratch, "node_modules", name);
  symlinkSync(relative(dirname(link), join(root, dirname(manifest))), link, "dir");
}
writeFileSync(
  join(scratch, "package.json"),
  `${JSON.stringify({ name: "skyward-snippets", private: true, type: "module" }, null, 2)}\n`,
);
const byFile = new Map();
snippets.forEach((snippet, index) => {
  snippet.number = index + 1;
  const slug = snippet.path.replace(/[^A-Za-z0-9]+/g, "_");
  snippet.file = join(
    scratch,
    `${String(snippet.number).padStart(3, "0")}_${slug}_L${snippet.line}${snippet.extension}`,
  );
  writeFileSync(snippet.file, `${snippet.code}\nexport {};\n`);
  byFile.set(ts.sys.resolvePath(snippet.file), snippet);
});

// One program over every snippet, with the repository's base compiler options.
const base = ts.readConfigFile(join(root, "tsconfig.base.json"), ts.sys.readFile);
if (base.error) throw new Error(ts.flattenDiagnosticMessageText(base.error.messageText, "\n"));
const parsed = ts.parseJsonConfigFileContent(
  {
    ...base.config,
    compilerOptions: {
      ...base.config.compilerOptions,
      noEmit: true,
      declaration: false,
      sourceMap: false,
      jsx: "preserve",
    },
    files: snippets.map((snippet) => snippet.file),
  },
  ts.sys,
  scratch,
  undefined,
  join(scratch, "tsconfig.json"),
);
for (const error of parsed.errors) problems.push(ts.flattenDiagnosticMessageText(error.messageText, "\n"));
const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
const diagnostics = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
for (const snippet of snippets) {
  const source = program.getSourceFile(snippet.file);
  if (source === undefined) {
    problems.push(`${snippet.path}:${snippet.line} (snippet ${snippet.number}): not part of the program`);
    continue;
  }
  diagnostics.push(...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source));
}
for (const diagnostic of diagnostics) {
  const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n    ");
  const snippet = diagnostic.file && byFile.get(ts.sys.resolvePath(diagnostic.file.fileName));
  if (diagnostic.file === undefined) {
    problems.push(`TS${diagnostic.code}: ${message}`);
  } else if (snippet === undefined) {
    // Only reachable for global diagnostics that point into a package's source.
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
    problems.push(
      `${relative(root, diagnostic.file.fileName)}:${line + 1}: TS${diagnostic.code}: ${message}`,
    );
  } else {
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
    problems.push(
      `${snippet.path}:${snippet.line + line + 1} (snippet ${snippet.number}): TS${diagnostic.code}: ${message}`,
    );
  }
}

if (!keep) rmSync(scratch, { recursive: true, force: true });
if (skipped.length > 0) console.log(`not checked (${OPT_OUT}): ${skipped.join(", ")}`);
if (problems.length > 0) {
  console.error(problems.join("\n"));
  console.error(`${problems.length} problem(s) in ${snippets.length} snippets from ${scanned.size} files`);
  process.exit(1);
}
console.log(`checked ${snippets.length} snippets from ${scanned.size} files`);
