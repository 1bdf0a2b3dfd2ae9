// Counts the tests the run skipped, by reason, from every package's reports (vitest JSON and pytest
// JUnit XML under */.test-report/). Under CI (scripts/ci.sh's rule) every skip must match an entry of
// scripts/allowed-skips.json — a pattern and the reason that test may not run here (an optional
// contract method a provider lacks, and the like); any other skip fails the run, named, so that a
// suite never goes quietly unrun in CI.
import { globSync, readFileSync } from "node:fs";
import { relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const underCi = !["", "0", "false"].includes((process.env.CI ?? "").toLowerCase());
const allowed = JSON.parse(readFileSync(new URL("allowed-skips.json", import.meta.url), "utf8")).map(
  (entry) => ({ ...entry, pattern: new RegExp(entry.test) }),
);

/** Every skipped test as `file › describe › … › title` (pytest: `file › name › message`). */
function skippedTests() {
  const skipped = [];
  for (const file of globSync("{packages,examples}/*/.test-report/*.{json,xml}", { cwd: root })) {
    const text = readFileSync(`${root}${file}`, "utf8");
    if (file.endsWith(".json")) {
      for (const suite of JSON.parse(text).testResults ?? []) {
        const path = relative(root, suite.name);
        for (const test of suite.assertionResults ?? []) {
          if (["skipped", "pending", "todo"].includes(test.status))
            skipped.push([path, ...(test.ancestorTitles ?? []), test.title].join(" › "));
        }
      }
    } else {
      const where = file.split("/.test-report/")[0];
      for (const match of text.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
        const skip = /<skipped\b([^>]*)>/.exec(match[2] ?? "");
        if (!skip) continue;
        const message = /\bmessage="([^"]*)"/.exec(skip[1])?.[1] ?? "";
        const attributes = Object.fromEntries(
          [...match[1].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
        );
        skipped.push([`${where}/${attributes.classname ?? ""}`, attributes.name, message].join(" › "));
      }
    }
  }
  return skipped;
}

const counts = new Map();
const unexplained = [];
for (const test of skippedTests()) {
  const entry = allowed.find((candidate) => candidate.pattern.test(test));
  const reason = entry?.reason ?? "not in scripts/allowed-skips.json";
  counts.set(reason, (counts.get(reason) ?? 0) + 1);
  if (!entry) unexplained.push(test);
}
const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
console.log(`skips: ${total}`);
for (const [reason, count] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${count} × ${reason}`);
if (unexplained.length > 0) {
  const say = underCi ? console.error : console.log;
  say(`skipped without a reason from scripts/allowed-skips.json${underCi ? " (not allowed under CI)" : ""}:`);
  for (const test of unexplained) say(`  ${test}`);
  if (underCi) process.exit(1);
}
