// A pool managed by hand, without `await using`: create it, submit tasks and collect their handles
// later, close it yourself. Then the callback form, sky.withCompute, which closes the pool for you.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

type ChunkResult = { chunk_id: number; node: number; total: number };
const hashChunk = sky.python<[chunkId: number, items: number], ChunkResult>("tasks:hash_chunk");
const image = { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] };
const items = 20_000;

// What a chunk must add up to, computed here in TypeScript to check the workers' answers.
function expectedTotal(chunkId: number): number {
  let total = 0;
  for (let i = 0; i < items; i += 1) {
    const digest = createHash("sha256").update(`chunk-${chunkId}-item-${i}`).digest("hex");
    total += Number.parseInt(digest.slice(0, 8), 16);
  }
  return total;
}

console.log("compute + submit + close:");
const pool = await sky.compute({ nodes: 4, image });
try {
  // submit returns at once; the work runs while this code goes on.
  const handles = Array.from({ length: 8 }, (_, chunkId) => pool.submit(hashChunk(chunkId, items)));
  console.log(`  submitted ${handles.map((handle) => handle.id).join(", ")}`);
  // Meanwhile, work out here what the answers must be.
  const expected = handles.map((_, chunkId) => expectedTotal(chunkId));
  const results = await Promise.all(handles.map((handle) => handle.result));
  for (const { chunk_id, node, total } of results) {
    console.log(`  chunk ${chunk_id} on node ${node}: ${total}`);
  }
  const totals = results.map((result) => result.total);
  assert.deepEqual(totals, expected);
  assert.deepEqual(new Set(results.map((result) => result.node)), new Set([0, 1, 2, 3]));
} finally {
  await pool.close(); // releases the workers; never throws
}
console.log(`  pool ${pool.state}`);
assert.equal(pool.state, "destroyed");

console.log("\nwithCompute: the pool lives as long as the callback");
let borrowed: sky.Pool | undefined;
const total = await sky.withCompute({ nodes: 2, image }, async (scoped) => {
  borrowed = scoped;
  const [a, b] = await scoped.gather(hashChunk(0, items), hashChunk(1, items));
  return a.total + b.total;
});
console.log(`  chunks 0 and 1 sum to ${total}; the pool is ${borrowed?.state}`);
assert.equal(total, expectedTotal(0) + expectedTotal(1));
assert.equal(borrowed?.state, "destroyed");
