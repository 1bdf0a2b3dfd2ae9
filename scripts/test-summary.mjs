// Prints one closing line for the whole suite, summed over every package's test reports:
// vitest JSON reports and pytest JUnit XML files under */.test-report/.
import { globSync, readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let skipped = 0;
/** The failed tests, named with their file and the first lines of what they printed, so that a
 * log's tail (all a CI page may keep) still says which test failed and why. */
const failures = [];
const firstLines = (text) =>
  String(text ?? "")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, 4)
    .map((line) => `      ${line.trim().slice(0, 300)}`)
    .join("\n");
const files = globSync("{packages,examples}/*/.test-report/*.{json,xml}");
for (const file of files) {
  const text = readFileSync(file, "utf8");
  if (file.endsWith(".json")) {
    const report = JSON.parse(text);
    passed += report.numPassedTests ?? 0;
    failed += report.numFailedTests ?? 0;
    skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
    for (const suite of report.testResults ?? []) {
      const failedTests = (suite.assertionResults ?? []).filter((t) => t.status === "failed");
      for (const test of failedTests) {
        failures.push(`  ${suite.name}\n    ${test.fullName}\n${firstLines(test.failureMessages?.[0])}`);
      }
      // A file that failed to load has no assertion results, only its message.
      if (suite.status === "failed" && failedTests.length === 0) {
        failures.push(`  ${suite.name}\n    (the file failed)\n${firstLines(suite.message)}`);
      }
    }
  } else {
    for (const match of text.matchAll(/<testsuite\b([^>]*)>/g)) {
      const attributes = Object.fromEntries(
        [...match[1].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], Number(m[2])]),
      );
      const total = attributes.tests ?? 0;
      const bad = (attributes.failures ?? 0) + (attributes.errors ?? 0);
      const skip = attributes.skipped ?? 0;
      passed += total - bad - skip;
      failed += bad;
      skipped += skip;
    }
    for (const match of text.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
      const body = match[2] ?? "";
      const bad = /<(failure|error)\b([^>]*)>/.exec(body);
      if (bad === null) continue;
      const attr = (name) => new RegExp(`(?:^|\\s)${name}="([^"]*)"`).exec(match[1])?.[1] ?? "";
      const message = /message="([^"]*)"/.exec(bad[2])?.[1] ?? body.replace(/<[^>]+>/g, "");
      failures.push(`  ${file}\n    ${attr("classname")}::${attr("name")}\n${firstLines(message)}`);
    }
  }
}
if (files.length === 0) {
  console.error("test-summary: no test reports found");
  process.exit(1);
}
if (failures.length > 0) console.log(`failed tests:\n${failures.join("\n")}`);
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failed > 0 || passed === 0) process.exit(1);
