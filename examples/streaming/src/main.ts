// Streaming: a Python generator streams its items back, and an async iterable streams into a task,
// read lazily — the worker pulls items as it consumes them, so even an endless source works.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

const fibonacci = sky.python.stream<[count: number], number>("tasks:fibonacci");
const sumUntil = sky.python<
  [numbers: AsyncIterable<number>, limit: number],
  { count: number; total: number }
>("tasks:sum_until");
const movingAverage = sky.python.stream<[values: AsyncIterable<number>, window: number], number>(
  "tasks:moving_average",
);

await using pool = await sky.compute({
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
});

console.log("out: a generator's items, as they are yielded");
const fib: number[] = [];
process.stdout.write(" ");
for await (const value of pool.run(fibonacci(12))) {
  fib.push(value);
  process.stdout.write(` ${value}`);
}
process.stdout.write("\n");
assert.deepEqual(fib, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]);

console.log("\nin: an endless async iterable; the task stops reading once the sum passes 1000");
let produced = 0;
async function* naturals(): AsyncGenerator<number> {
  for (let n = 1; ; n += 1) {
    produced += 1;
    yield n;
  }
}
const { count, total } = await pool.run(sumUntil(naturals(), 1000));
console.log(`  the task read ${count} numbers (sum ${total}); the generator produced ${produced}`);
assert.deepEqual({ count, total }, { count: 45, total: 1035 });
// Items are sent on demand, a small window ahead of the reader — never the whole stream.
assert.ok(produced < 200, `the client produced ${produced} items for a task that read 45`);

console.log("\nboth ways: values stream in, moving averages (window 3) stream out");
async function* readings(): AsyncGenerator<number> {
  yield* [1, 2, 3, 4, 5, 6];
}
const averages: number[] = [];
process.stdout.write(" ");
for await (const average of pool.run(movingAverage(readings(), 3))) {
  averages.push(average);
  process.stdout.write(` ${average.toFixed(2)}`);
}
process.stdout.write("\n");
assert.deepEqual(averages, [1, 1.5, 2, 3, 4, 5]);
