import { fileURLToPath } from "node:url";
import * as sky from "../dist/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");
const info = sky.python<[], { node: number }>("pool_tasks:info");
const count = sky.python.stream<[number], number>("pool_tasks:count");
const t0 = performance.now();
await using pool = await sky.compute({ nodes: 2, image: { includes: [tasks] } });
console.log("ready in", (performance.now() - t0).toFixed(0), "ms");
console.log(await pool.run(add(2, 3)));
console.log(await pool.broadcast(info()));
for await (const n of pool.run(count(3))) console.log("item", n);
const t1 = performance.now();
const out = await pool.map(
  add,
  Array.from({ length: 20000 }, (_, i) => [i, 1] as [number, number]),
);
console.log("map 20000", (performance.now() - t1).toFixed(0), "ms", out[19999]);
