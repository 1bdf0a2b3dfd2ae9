// Parallel execution: several slow calls run at the same time across the pool's task slots, so
// the whole batch takes about as long as its slowest call, not the sum of them all.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

const slowSquare = sky.python<[x: number, seconds: number], number>("tasks:slow_square");
const slowSum = sky.python<[numbers: number[], seconds: number], number>("tasks:slow_sum");
const slowFactorial = sky.python<[n: number, seconds: number], number>("tasks:slow_factorial");
const timedSleep = sky.python<[seconds: number], [start: number, end: number]>("tasks:timed_sleep");

// 2 nodes × 2 concurrent tasks each = 4 calls at a time.
await using pool = await sky.compute({
  nodes: 2,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  options: { worker: { concurrency: 2 } },
});

const seconds = (since: number) => (performance.now() - since) / 1000;

console.log("gather: three different calls at once, their results as a typed tuple");
let start = performance.now();
const [sum, square, factorial] = await pool.gather(
  slowSum([1, 2, 3], 0.5),
  slowSquare(12, 0.5),
  slowFactorial(10, 0.5),
);
const gatherTime = seconds(start);
console.log(
  `  sum=${sum} square=${square} factorial=${factorial} in ${gatherTime.toFixed(2)} s (one after another: 1.50 s)`,
);
assert.deepEqual([sum, square, factorial], [6, 144, 3_628_800]);

// The proof of overlap is in when the calls ran, not in how long we waited: every one had started
// before the first one ended.
const windows = await pool.gather(timedSleep(0.3), timedSleep(0.3), timedSleep(0.3), timedSleep(0.3));
const lastStart = Math.max(...windows.map(([begin]) => begin));
const firstEnd = Math.min(...windows.map(([, end]) => end));
console.log(
  `  four 0.3 s calls: the last started ${(firstEnd - lastStart).toFixed(2)} s before the first ended`,
);
assert.ok(lastStart < firstEnd, "the four calls did not run at the same time");

console.log("\nstream({ ordered: false }): results as each call finishes, the quickest first");
const delays = [0.8, 0.2, 0.6, 0.4];
start = performance.now();
const arrived: number[] = [];
for await (const value of pool.stream(
  delays.map((delay, index) => slowSquare(index + 1, delay)),
  { ordered: false },
)) {
  arrived.push(value);
  console.log(`  [${seconds(start).toFixed(2)} s] ${value}`);
}
const streamTime = seconds(start);
const total = delays.reduce((a, b) => a + b, 0);
console.log(
  `  all ${delays.length} in ${streamTime.toFixed(2)} s (one after another: ${total.toFixed(2)} s)`,
);
// Completion order follows the delays: 0.2 s (2²), 0.4 s (4²), 0.6 s (3²), 0.8 s (1²).
assert.deepEqual(arrived, [4, 16, 9, 1]);
