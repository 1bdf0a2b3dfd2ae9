// Prints the fault matrix's one line for the whole run — `fault matrix: N providers, N cells (N not
// applicable), N instances left billing, N cap exceeded` — from the results each provider's matrix
// left in $SKYWARD_FAULT_MATRIX_RESULTS (packages/testing/src/fault-matrix-record.ts; scripts/test.sh
// sets it), and fails the run when an instance was left billing, one was created above its cap, a cell
// that applies did not pass, or a matrix the test files declare (`runFaultMatrix({ name: "…" })`) left
// no result: a suite that never ran is never read as a pass. Provider packages whose tests declare no
// matrix are named on a line of their own.
import { existsSync, globSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const directory = process.env.SKYWARD_FAULT_MATRIX_RESULTS ?? join(root, ".test-logs", "fault-matrix");

/** The matrices the test files declare, by name, and the provider packages that declare none. */
function declaredMatrices() {
  const names = new Set();
  const withMatrix = new Set();
  for (const file of globSync("{packages,examples}/*/{src,test}/**/*.test.ts", { cwd: root })) {
    const text = readFileSync(join(root, file), "utf8");
    for (const match of text.matchAll(/runFaultMatrix\(\{\s*name:\s*"([^"]+)"/g)) {
      names.add(match[1]);
      withMatrix.add(file.split("/").slice(0, 2).join("/"));
    }
  }
  const without = globSync("packages/provider-*/package.json", { cwd: root })
    .map((file) => file.split("/").slice(0, 2).join("/"))
    .filter((pkg) => pkg !== "packages/provider-utils" && !withMatrix.has(pkg));
  return { names: [...names].sort(), without };
}

const runs = existsSync(directory)
  ? globSync("*.json", { cwd: directory }).map((file) =>
      JSON.parse(readFileSync(join(directory, file), "utf8")),
    )
  : [];
const { names, without } = declaredMatrices();
const sum = (field) => runs.reduce((total, run) => total + run[field], 0);
const problems = [
  ...names
    .filter((name) => !runs.some((run) => run.name === name))
    .map((name) => `${name}: declared, never ran`),
  ...runs
    .filter((run) => run.cells < run.applicable)
    .map((run) => `${run.name}: ${run.applicable - run.cells} of ${run.applicable} cells did not pass`),
  ...runs.filter((run) => run.leftBilling > 0).map((run) => `${run.name}: ${run.leftBilling} left billing`),
  ...runs.filter((run) => run.capExceeded > 0).map((run) => `${run.name}: ${run.capExceeded} over the cap`),
];

console.log(
  `fault matrix: ${runs.length} providers, ${sum("cells")} cells (${sum("notApplicable")} not applicable), ` +
    `${sum("leftBilling")} instances left billing, ${sum("capExceeded")} cap exceeded`,
);
if (without.length > 0) console.log(`fault matrix: no matrix declared in ${without.join(", ")}`);
for (const problem of problems) console.error(`fault matrix: ${problem}`);
process.exit(problems.length > 0 ? 1 : 0);
