// Prints one closing line for the whole suite, summed over every package's test reports:
// vitest JSON reports and pytest JUnit XML files under */.test-report/.
import { globSync, readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let skipped = 0;
const files = globSync("{packages,examples}/*/.test-report/*.{json,xml}");
for (const file of files) {
  const text = readFileSync(file, "utf8");
  if (file.endsWith(".json")) {
    const report = JSON.parse(text);
    passed += report.numPassedTests ?? 0;
    failed += report.numFailedTests ?? 0;
    skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
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
  }
}
if (files.length === 0) {
  console.error("test-summary: no test reports found");
  process.exit(1);
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failed > 0 || passed === 0) process.exit(1);
