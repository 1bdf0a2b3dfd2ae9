// Data sharding: broadcast the dataset and let sky.shard pick each node's part inside the task.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

type Row = [id: number, feature: number];
const stripedShard = sky.python<[data: number[]], number[]>("tasks:striped_shard");
const trainOnShard = sky.python<
  [features: Row[], labels: number[], seed: number],
  { node: number; size: number; positive_rate: number; x: Row[]; y: number[] }
>("tasks:train_on_shard");
const equalShards = sky.python<[data: number[]], number>("tasks:equal_shards");

await using pool = await sky.compute({
  nodes: 3,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
});

const range = (n: number) => Array.from({ length: n }, (_, index) => index);

console.log("striped shards of 0..9:");
const stripes = await pool.broadcast(stripedShard(range(10)));
for (const [node, stripe] of stripes.entries()) console.log(`  node ${node}: [${stripe.join(", ")}]`);
assert.deepEqual(stripes, [
  [0, 3, 6, 9],
  [1, 4, 7],
  [2, 5, 8],
]);

// A toy dataset: row i is [i, feature]; its label is 1 when the feature is positive.
const features: Row[] = range(1000).map((id) => [id, Math.sin(id * 1.7)]);
const labels = features.map(([, feature]) => (feature > 0 ? 1 : 0));

console.log("\nshuffled shards of 1000 rows, features and labels split together:");
const shards = await pool.broadcast(trainOnShard(features, labels, 42));
for (const shard of shards) {
  const first = shard.x.slice(0, 5).map(([id]) => id);
  console.log(
    `  node ${shard.node}: ${shard.size} rows (ids ${first.join(", ")}, …), positive rate ${shard.positive_rate.toFixed(3)}`,
  );
}
// Disjoint and complete: every row id appears exactly once across the nodes.
const ids = shards.flatMap((shard) => shard.x.map(([id]) => id)).sort((a, b) => a - b);
assert.deepEqual(ids, range(1000));
// Aligned: each row kept its own label.
for (const { x, y } of shards) {
  for (const [index, [id]] of x.entries()) assert.equal(y[index], labels[id], `row ${id} lost its label`);
}
console.log("  every row on exactly one node, every label still with its row");

console.log("\ndrop_last: 1001 items, equal shards");
const sizes = await pool.broadcast(equalShards(range(1001)));
console.log(`  sizes ${sizes.join(", ")} (${1001 - sizes.reduce((a, b) => a + b, 0)} dropped)`);
assert.deepEqual(sizes, [333, 333, 333]);
