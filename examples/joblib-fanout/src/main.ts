// joblib fan-out across a pool, and the efficiency it reaches: `Parallel(n_jobs=-1)` inside one task,
// with the `joblib` plugin making Skyward joblib's backend, so its items run as nested tasks on every
// node. 64 items that each wait 0.2 s (I/O-bound work) run on 8 task slots (2 nodes × concurrency 4);
// the run is timed against the ideal `items × seconds / slots`.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { joblib } from "@skyward/plugin-joblib";

interface FanOut {
  slots: number;
  wall: number;
  ideal: number;
  in_order: boolean;
  items_per_node: number[];
}

const fanOut = sky.python<[items: number, seconds: number], FanOut>("tasks:fan_out");

const nodes = 2;
const concurrency = 4;
const items = 64;
const seconds = 0.2;

await using pool = await sky.compute({
  nodes,
  ttl: 0,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  options: { worker: { concurrency } },
  plugins: [joblib()],
});

const run = await pool.run(fanOut(items, seconds));
const efficiency = run.ideal / run.wall;
const speedup = (items * seconds) / run.wall;

console.log(
  `${items} items of ${seconds} s each on ${run.slots} slots (${nodes} nodes × concurrency ${concurrency})`,
);
console.log(
  `  wall ${run.wall.toFixed(2)} s, ideal ${run.ideal.toFixed(2)} s, sequential ${(items * seconds).toFixed(1)} s`,
);
console.log(`  throughput ${(items / run.wall).toFixed(1)} items/s, speed-up ×${speedup.toFixed(1)}`);
console.log(`  efficiency ${(efficiency * 100).toFixed(0)} % of ${run.slots} slots`);
console.log(`  items per node: ${run.items_per_node.join(", ")}`);

assert.equal(run.slots, nodes * concurrency, "n_jobs=-1 means nodes × concurrency slots");
assert.ok(run.in_order, "Parallel returns results in item order");
assert.equal(
  run.items_per_node.reduce((sum, count) => sum + count, 0),
  items,
);
assert.ok(
  run.items_per_node.every((count) => count > 0),
  "items ran on every node",
);
// Efficiency is a ratio of times: above 0, and no run beats its ideal (a little slack for clocks).
assert.ok(efficiency > 0 && efficiency <= 1.05, `efficiency ${efficiency} is not a sane ratio`);
