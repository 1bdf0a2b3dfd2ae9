// Fails on a source file over 700 lines, or a class or function over 400 lines, in the folders
// that hold the kernel (core's TypeScript and Python, the SSH transport): a unit that size is
// several concerns a reader cannot hold at once (issue 31). Tests are not counted: a suite
// grows with the behaviours it covers.
// TypeScript is measured through the compiler's own parser, Python through `ast` (a small script
// run with python3), so a brace in a string never miscounts.
// Usage: node scripts/check-sizes.mjs [files…]   (default: the kernel's sources)
import { execFileSync } from "node:child_process";
import { globSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";

const MAX_FILE_LINES = 700;
const MAX_UNIT_LINES = 400;

const require = createRequire(import.meta.url);
const ts = require("typescript");

const args = process.argv.slice(2);
const isTest = (file) => /\.test(-d)?\.ts$|(^|\/)tests?\/|(^|\/)test_[^/]*\.py$/.test(file);
const files =
  args.length > 0
    ? args
    : [
        ...globSync("packages/core/src/**/*.ts"),
        ...globSync("packages/ssh/src/**/*.ts"),
        ...globSync("packages/core/python/skyward/**/*.py"),
      ].filter((file) => !isTest(file));

const lineCount = (text) => text.split("\n").length - (text.endsWith("\n") ? 1 : 0);

/** Classes and functions (declarations, expressions, arrows, methods) longer than the limit. */
function oversizedTypeScriptUnits(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (ts.isClassLike(node) || ts.isFunctionLike(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
      if (last - first + 1 > MAX_UNIT_LINES) {
        const kind = ts.isClassLike(node) ? "class" : "function";
        const name = node.name && ts.isIdentifier(node.name) ? node.name.text : "(anonymous)";
        found.push({ kind, name, first, lines: last - first + 1 });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const PYTHON_UNITS = `
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    units = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            units.append({"kind": "class" if isinstance(node, ast.ClassDef) else "function",
                          "name": node.name, "first": first, "lines": node.end_lineno - first + 1})
    out[path] = units
json.dump(out, sys.stdout)
`;

function oversizedPythonUnits(paths) {
  if (paths.length === 0) return {};
  const output = execFileSync("python3", ["-c", PYTHON_UNITS, ...paths], { encoding: "utf8" });
  const units = JSON.parse(output);
  return Object.fromEntries(
    Object.entries(units).map(([path, list]) => [path, list.filter((unit) => unit.lines > MAX_UNIT_LINES)]),
  );
}

const findings = [];
const pythonUnits = oversizedPythonUnits(files.filter((file) => file.endsWith(".py")));
for (const file of files) {
  const text = readFileSync(file, "utf8");
  const lines = lineCount(text);
  if (lines > MAX_FILE_LINES) {
    findings.push(`${file}: ${lines} lines (a file holds at most ${MAX_FILE_LINES})`);
  }
  const units = file.endsWith(".py") ? (pythonUnits[file] ?? []) : oversizedTypeScriptUnits(file, text);
  for (const unit of units) {
    findings.push(
      `${file}:${unit.first}: ${unit.kind} ${unit.name} is ${unit.lines} lines (a class or function holds at most ${MAX_UNIT_LINES})`,
    );
  }
}
if (findings.length > 0) {
  console.error(`check-sizes: ${findings.length} unit(s) too large:\n  ${findings.join("\n  ")}`);
  process.exit(1);
}
console.log(
  `check-sizes: ${files.length} source files, none over ${MAX_FILE_LINES} lines, no class or function over ${MAX_UNIT_LINES}.`,
);
