// Your own Slurm cluster: the broadcast example's task code, unchanged, on two nodes of a partition.
// Only the provider line differs from a cloud pool: one Slurm job holds both nodes, the workers run
// as srun steps in it, and the client reaches them through the login node.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Slurm } from "@skyward/provider-slurm";

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

const login = process.env.SLURM_LOGIN_HOST;
const identityFile = process.env.SLURM_LOGIN_KEY;
if (!login || !identityFile) {
  console.error(
    "set SLURM_LOGIN_HOST and SLURM_LOGIN_KEY (and SLURM_USER, SLURM_PARTITION as your site needs)",
  );
  process.exit(2);
}

await using pool = await sky.compute({
  provider: Slurm({
    login: { host: login, user: process.env.SLURM_USER ?? "root", identityFile },
    ...(process.env.SLURM_PARTITION ? { partition: process.env.SLURM_PARTITION } : {}),
    ...(process.env.SLURM_SHARED_DIRECTORY ? { sharedDirectory: process.env.SLURM_SHARED_DIRECTORY } : {}),
    // The scheduler ends the job at this limit even if this process dies: the hard TTL.
    timeLimit: "0:30:00",
  }),
  nodes: 2,
  image: { includes: [fileURLToPath(new URL("../../broadcast/src/tasks.py", import.meta.url))] },
});

const nodes = await pool.broadcast(describeNode());
for (const { node, total_nodes, is_head, head_addr } of nodes) {
  console.log(`node ${node} of ${total_nodes}${is_head ? " (head)" : ""}, head at ${head_addr}`);
}
assert.deepEqual(
  nodes.filter((node) => node.is_head).map((node) => node.node),
  [0],
  "node 0 of the job is the head",
);

const data = Array.from({ length: 1000 }, (_, index) => index);
const parts = await pool.broadcast(sumPartition(data));
const total = parts.reduce((sum, part) => sum + part.sum, 0);
console.log(`every node summed its shard: total ${total}`);
assert.equal(total, 499_500);
