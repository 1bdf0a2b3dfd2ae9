// A scikit-learn grid search across a pool: `GridSearchCV(n_jobs=-1)` inside one task, with the
// `sklearn` plugin making Skyward joblib's backend, so its cross-validation fits run on every node.
// Three estimator families (SVC, logistic regression, random forest) compete on the digits data set.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { sklearn } from "@skyward/plugin-joblib";

interface SearchResult {
  candidates: number;
  fits: number;
  n_jobs: number;
  nodes: number[];
  best_params: Record<string, string | number | null>;
  best_score: number;
  best_per_family: Record<string, number>;
  local_best_score: number;
  local_best_model: string;
}

const gridSearch = sky.python<[], SearchResult>("tasks:grid_search");

await using pool = await sky.compute({
  nodes: 2,
  ttl: 0,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  // Two task slots per node: one runs the search, the others its fits (nested tasks).
  options: { worker: { concurrency: 2 } },
  plugins: [sklearn()],
});

const started = performance.now();
const result = await pool.run(gridSearch());
const seconds = (performance.now() - started) / 1000;

console.log(
  `${result.candidates} candidates × 3 folds = ${result.fits} fits, n_jobs=-1 → ${result.n_jobs} slots, ran on nodes ${result.nodes.join(", ")} (${seconds.toFixed(1)} s)`,
);
for (const [family, score] of Object.entries(result.best_per_family)) {
  console.log(`  best ${family.padEnd(24)} ${score.toFixed(4)}`);
}
console.log(`best: ${JSON.stringify(result.best_params)} → accuracy ${result.best_score.toFixed(4)}`);

assert.equal(result.candidates, 11, "6 SVC + 3 logistic regression + 2 random forest candidates");
assert.equal(result.n_jobs, 4, "n_jobs=-1 means every task slot: 2 nodes × concurrency 2");
assert.deepEqual(result.nodes, [0, 1], "the fits ran on both nodes");
assert.deepEqual(Object.keys(result.best_per_family).sort(), [
  "LogisticRegression",
  "RandomForestClassifier",
  "SVC",
]);
// The distributed search finds what the same search run sequentially finds.
assert.equal(result.best_score, result.local_best_score);
assert.equal(result.best_params.model, result.local_best_model);
assert.ok(result.best_score > 0.9, `best accuracy ${result.best_score} is too low for digits`);
