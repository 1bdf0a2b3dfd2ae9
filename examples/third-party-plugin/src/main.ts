// The `threads` plugin on a pool of this machine: every worker's math libraries capped at 2 threads.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { threads } from "./index.ts";

const settings = sky.python<[], { omp: string | null; recorded: { perWorker: number } | null }>(
  "tasks:thread_settings",
);

await using pool = await sky.compute({
  nodes: 2,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  plugins: [threads({ perWorker: 2 })],
});
const seen = await pool.broadcast(settings());
console.log(`each node: ${seen.map((node) => `OMP_NUM_THREADS=${node.omp}`).join(", ")}`);
assert.deepEqual(
  seen.map((node) => [node.omp, node.recorded?.perWorker]),
  [
    ["2", 2],
    ["2", 2],
  ],
);
