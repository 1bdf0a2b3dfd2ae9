// Worker executors: the same CPU-bound Python task, two at a time on one node, under the thread
// executor (the default: tasks share the worker's interpreter, so pure-Python code takes turns on
// the GIL) and the process executor (each task slot is its own Python process, on its own core).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

const countPrimes = sky.python<
  [start: number, stop: number],
  { count: number; pid: number; seconds: number }
>("tasks:count_primes");
const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));

// Primes below 400,000, counted in four chunks.
const chunk = 100_000;
const chunks = [0, 1, 2, 3].map((index) => [index * chunk, (index + 1) * chunk] as [number, number]);

async function countWith(executor: "thread" | "process"): Promise<number> {
  return sky.withCompute(
    { image: { includes: [tasks] }, options: { worker: { concurrency: 2, executor } } },
    async (pool) => {
      const start = performance.now();
      const results = await pool.map(countPrimes, chunks);
      const wall = (performance.now() - start) / 1000;
      const busy = results.reduce((sum, result) => sum + result.seconds, 0);
      const processes = new Set(results.map((result) => result.pid)).size;
      console.log(
        `${executor.padEnd(7)}: ${wall.toFixed(2)} s wall, ${busy.toFixed(2)} s inside the tasks, ` +
          `${processes} Python process${processes === 1 ? "" : "es"}`,
      );
      return results.reduce((sum, result) => sum + result.count, 0);
    },
  );
}

console.log(`count the primes below ${(4 * chunk).toLocaleString("en")} in 4 tasks, concurrency 2:`);
const withThreads = await countWith("thread");
const withProcesses = await countWith("process");
console.log(`primes found: ${withThreads} (thread), ${withProcesses} (process)`);
// Timings depend on the machine (and its cores); the answers must not.
assert.equal(withThreads, 33_860);
assert.equal(withProcesses, 33_860);
