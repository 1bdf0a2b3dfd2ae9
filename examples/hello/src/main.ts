// Hello, Skyward: run one Python function on a pool and get its result back.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

// A typed reference to `add` in tasks.py ("module:function"). Calling it runs nothing yet.
const add = sky.python<[a: number, b: number], number>("tasks:add");
const stats = sky.python<[data: number[]], { count: number; sum: number; mean: number }>("tasks:stats");

// No provider given: the pool is this machine (sky.Local()). tasks.py is shipped to the worker.
await using pool = await sky.compute({
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
});

const sum = await pool.run(add(2, 3));
console.log(`2 + 3 = ${sum}`);
assert.equal(sum, 5);

// Results are JSON: a Python dict arrives as an object.
const summary = await pool.run(stats([1, 2, 3, 4, 5]));
console.log(`stats of [1..5]: ${JSON.stringify(summary)}`);
assert.deepEqual(summary, { count: 5, sum: 15, mean: 3 });
