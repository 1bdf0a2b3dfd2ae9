// Fails on the two test shapes that pass when the code under test stops working:
// - a `catch` block that holds the test's only check of the error, behind a `try` that neither
//   fails when nothing is thrown (`expect.unreachable(…)`) nor counts assertions
//   (`expect.assertions(…)` / `expect.hasAssertions()` in the same test);
// - `toThrow()` / `toThrowError()` with no expected error, which any error at all satisfies
//   (a TypeError from a typo in the test included).
// Usage: node scripts/check-test-shapes.mjs [files…]   (default: every TypeScript test file)
import { globSync, readFileSync } from "node:fs";

const patterns = [
  "packages/*/src/**/*.test.ts",
  "packages/*/test/**/*.ts",
  "packages/*/bench/**/*.ts",
  "examples/*/src/**/*.test.ts",
];
const files =
  process.argv.length > 2 ? process.argv.slice(2) : patterns.flatMap((pattern) => globSync(pattern));

/** The source with comments, strings and template literals blanked (same length, lines kept). */
function codeOnly(source) {
  let out = "";
  let i = 0;
  const blank = (text) => text.replace(/[^\n]/g, " ");
  while (i < source.length) {
    const two = source.slice(i, i + 2);
    if (two === "//") {
      const end = source.indexOf("\n", i);
      const stop = end === -1 ? source.length : end;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (two === "/*") {
      const end = source.indexOf("*/", i + 2);
      const stop = end === -1 ? source.length : end + 2;
      out += blank(source.slice(i, stop));
      i = stop;
    } else if (source[i] === '"' || source[i] === "'" || source[i] === "`") {
      const quote = source[i];
      let j = i + 1;
      while (j < source.length && source[j] !== quote) j += source[j] === "\\" ? 2 : 1;
      out += quote + blank(source.slice(i + 1, j)) + quote;
      i = j + 1;
    } else {
      out += source[i];
      i += 1;
    }
  }
  return out;
}

/** The index just past the block whose `{` is at `open`. */
function blockEnd(code, open) {
  let depth = 0;
  for (let i = open; i < code.length; i += 1) {
    if (code[i] === "{") depth += 1;
    else if (code[i] === "}") {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  return code.length;
}

/** The body of the innermost `it(`/`test(` call around `index`, or the whole file. */
function enclosingTest(code, index) {
  const starts = [...code.slice(0, index).matchAll(/\b(?:it|test)(?:\.\w+)*\s*\(/g)];
  for (const start of starts.reverse()) {
    const open = code.indexOf("{", start.index);
    if (open !== -1 && blockEnd(code, open) > index) return code.slice(open, blockEnd(code, open));
  }
  return code;
}

const lineOf = (code, index) => code.slice(0, index).split("\n").length;
const findings = [];
for (const file of files) {
  const code = codeOnly(readFileSync(file, "utf8"));
  for (const match of code.matchAll(/\btry\s*\{/g)) {
    const tryOpen = match.index + match[0].length - 1;
    const tryEnd = blockEnd(code, tryOpen);
    const catchMatch = /^\s*catch\s*(\([^)]*\))?\s*\{/.exec(code.slice(tryEnd));
    if (!catchMatch) continue;
    const catchOpen = tryEnd + catchMatch[0].length - 1;
    const catchClose = blockEnd(code, catchOpen);
    const catchBody = code.slice(catchOpen, catchClose);
    if (!/\bexpect\s*\(/.test(catchBody)) continue;
    // A helper that returns from its catch and then throws (or returns what its caller checks)
    // fails when nothing is thrown.
    if (/^\s*(?:throw|return)\b/.test(code.slice(catchClose))) continue;
    const tryBody = code.slice(tryOpen, tryEnd);
    if (/expect\.unreachable\s*\(|\bthrow\b/.test(tryBody)) continue;
    if (/expect\.(assertions|hasAssertions)\s*\(/.test(enclosingTest(code, match.index))) continue;
    findings.push(
      `${file}:${lineOf(code, match.index)}: a catch holds the check, and nothing fails when the try does not throw (add expect.unreachable(…) after the call)`,
    );
  }
  for (const match of code.matchAll(/(?<!\.not)\.toThrow(?:Error)?\(\s*\)/g)) {
    findings.push(
      `${file}:${lineOf(code, match.index)}: toThrow() with no expected error: name the error (class, message or isInstance)`,
    );
  }
}
if (findings.length > 0) {
  console.error(
    `check-test-shapes: ${findings.length} test(s) that cannot fail:\n  ${findings.join("\n  ")}`,
  );
  process.exit(1);
}
console.log(`check-test-shapes: ${files.length} test files, no check that cannot fail.`);
