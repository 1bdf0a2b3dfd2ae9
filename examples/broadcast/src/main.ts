// Broadcast: run the same call on every node at once; one result per node, in node order.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

interface NodeDescription {
  node: number;
  total_nodes: number;
  is_head: boolean;
  head_addr: string;
  peers: string[];
}
const describeNode = sky.python<[], NodeDescription>("tasks:describe_node");
const sumPartition = sky.python<[data: number[]], { node: number; size: number; sum: number }>(
  "tasks:sum_partition",
);

await using pool = await sky.compute({
  nodes: 4,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
});

// Task output arrives as log events (and on the console, on stderr); keep it to check below.
const printed: sky.LogEvent[] = [];
pool.on("log", (event) => printed.push(event));

console.log("instance_info() on every node:");
const nodes = await pool.broadcast(describeNode());
for (const { node, total_nodes, is_head, head_addr } of nodes) {
  console.log(`  node ${node} of ${total_nodes}${is_head ? " (head)" : ""}, head at ${head_addr}`);
}
const heads = nodes.filter((node) => node.is_head).map((node) => node.node);
assert.deepEqual(heads, [0], "node 0, and only node 0, is the head");
assert.ok(
  nodes.every((node, index) => node.node === index && node.total_nodes === 4 && node.peers.length === 4),
);

// sky.stdout(only="head") dropped the other nodes' prints on the workers.
await sleep(200); // output travels apart from results; give the last line a moment
const greetings = printed.filter((event) => event.line.startsWith("hello from the head"));
console.log(`printed lines: ${greetings.map((event) => `node ${event.node}: "${event.line}"`).join(", ")}`);
assert.equal(greetings.length, 1);
assert.equal(greetings[0]?.node, 0);

console.log("\nevery node sums its shard of 0..999:");
const data = Array.from({ length: 1000 }, (_, index) => index);
const partitions = await pool.broadcast(sumPartition(data));
for (const part of partitions) console.log(`  node ${part.node}: ${part.size} items, sum ${part.sum}`);
const total = partitions.reduce((sum, part) => sum + part.sum, 0);
console.log(`  total ${total} (expected ${data.reduce((a, b) => a + b, 0)})`);
assert.equal(total, 499_500);
