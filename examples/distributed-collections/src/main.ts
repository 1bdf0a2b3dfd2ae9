// Distributed collections: the Node app feeds a queue that tasks on every node drain, watches the
// counter they increment, and reads the dict they fill — the same collections the tasks see as
// sky.queue, sky.counter, sky.dict (plus a set for dedup, a barrier per epoch, a lock).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

interface CrawlReport {
  node: number;
  worker: number;
  fetched: string[];
}
const crawl = sky.python<[epochs: number], CrawlReport>("tasks:crawl");
const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));

await using pool = await sky.compute({
  nodes: 2,
  image: { includes: [tasks] },
  options: { worker: { concurrency: 2 } },
});

const urls = pool.queue<string | null>("urls");
const fetched = pool.counter("fetched");
const epochs = 2;
const perEpoch = Array.from({ length: 40 }, (_, index) => `https://example.com/page/${index % 30}`); // 10 repeats

// Four tasks (2 nodes x 2 workers) crawl while the client feeds them; after each epoch's URLs, one
// null (Python's None, a value like any other) per worker marks the epoch's end.
const running = pool.gather(crawl(epochs), crawl(epochs), crawl(epochs), crawl(epochs));
const watcher = setInterval(async () => console.log(`  fetched so far: ${await fetched.value()}`), 250);
for (let epoch = 0; epoch < epochs; epoch += 1) {
  for (const url of perEpoch) await urls.put(epoch === 0 ? url : `${url}?epoch=${epoch}`);
  for (let worker = 0; worker < 4; worker += 1) await urls.put(null);
}
const reports = await running;
clearInterval(watcher);

for (const [index, report] of reports.entries())
  console.log(`task ${index} on node ${report.node}: ${report.fetched.length} pages`);
const all = reports.flatMap((report) => report.fetched);
console.log(`${all.length} pages fetched, ${new Set(all).size} distinct; counter ${await fetched.value()}`);
assert.equal(new Set(all).size, all.length, "no page fetched twice (the set deduplicated across nodes)");
assert.equal(all.length, 60, "30 distinct URLs per epoch");
assert.equal(await fetched.value(), 60);
assert.equal(await pool.counter("reports").value(), 4 * epochs);
const page = await pool
  .dict<{ node: number; epoch: number; length: number }>("pages")
  .get("https://example.com/page/0");
assert.ok(page && page.epoch === 0);
assert.equal(await urls.empty(), true);
