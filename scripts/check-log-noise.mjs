// Fails when the test log holds what reads as a failure but is none: colour codes (the run sets
// NO_COLOR), npm's warnings about settings it does not know, msw's reports of unmatched requests
// (an unmatched request fails its test; one a test expects is checked, not printed), pnpm's warnings
// during the setup's install. Usage: node scripts/check-log-noise.mjs FILE…
import { readFileSync } from "node:fs";

const noises = [
  { pattern: new RegExp(`${String.fromCharCode(0x1b)}\\[`), what: "an ANSI escape code (is NO_COLOR set?)" },
  { pattern: /npm warn Unknown \w+ config/, what: "npm warns about a setting it does not know" },
  { pattern: /\[MSW\]/, what: "msw reports a request no handler matched" },
  // pnpm's warnings (` WARN  Failed to create bin …`): a fresh install prints none.
  { pattern: /^\s*WARN\s/, what: "pnpm warns (a fresh install must print no warning)" },
];

let found = 0;
for (const file of process.argv.slice(2)) {
  const lines = readFileSync(file, "utf8").split("\n");
  for (const { pattern, what } of noises) {
    const index = lines.findIndex((line) => pattern.test(line));
    if (index === -1) continue;
    found += 1;
    const shown = JSON.stringify(lines[index]).slice(1, -1).slice(0, 160);
    process.stderr.write(`${file}:${index + 1}: ${what}: ${shown}\n`);
  }
}
if (found > 0) process.exitCode = 1;
