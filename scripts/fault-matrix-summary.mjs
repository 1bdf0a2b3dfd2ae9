// Prints the fault matrix's one line for the whole run — `fault matrix: N providers, N cells (N not
// applicable), N instances left billing, N cap exceeded` — from the results each provider's matrix
// left in $SKYWARD_FAULT_MATRIX_RESULTS (packages/testing/src/fault-matrix-record.ts; scripts/test.sh
// sets it), and fails the run when an instance was left billing, one was created above its cap, a cell
// that applies did not pass, or a matrix the test files declare (`runFaultMatrix({ name: "…" })`) left
// no result: a suite that never ran is never read as a pass. A provider package whose tests declare no
// matrix fails the run too, unless it is one of the schedulers below (named with the reason).
import { existsSync, globSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const directory = process.env.SKYWARD_FAULT_MATRIX_RESULTS ?? join(root, ".test-logs", "fault-matrix");

/**
 * Provider packages that rent no machines from a marketplace API, so the matrix's cells (429 storms,
 * lost create answers, partial deletes, price caps) have nothing to act on; their own suites test the
 * faults that apply (a client SIGKILLed, the scheduler's time limit, a preempted job or pod).
 */
const SCHEDULERS = new Map([
  ["packages/provider-slurm", "a Slurm cluster: jobs through sbatch/scancel on the login node"],
  ["packages/provider-kubernetes", "a Kubernetes cluster: pods through the API server"],
]);

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
    .filter((pkg) => pkg !== "packages/provider-utils" && !withMatrix.has(pkg) && !SCHEDULERS.has(pkg));
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
  ...without.map((pkg) => `${pkg}: its tests declare no fault matrix`),
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
for (const [pkg, reason] of SCHEDULERS)
  if (existsSync(join(root, pkg))) console.log(`fault matrix: not run for ${pkg} (${reason})`);
for (const problem of problems) console.error(`fault matrix: ${problem}`);
process.exit(problems.length > 0 ? 1 : 0);
