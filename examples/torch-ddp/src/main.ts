// PyTorch DDP across a pool: two nodes on this machine train one model together over gloo. The
// `torch` plugin joins every worker to one process group before the task runs; the task is plain
// PyTorch — a `DistributedSampler` splits the data, DDP averages the gradients across the ranks.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { torch } from "@skyward/plugin-torch";

interface Trained {
  rank: number;
  world_size: number;
  samples: number;
  losses: number[];
  parameters: number[];
}

const train = sky.python<[epochs: number, batchSize: number, learningRate: number], Trained>("tasks:train");

await using pool = await sky.compute({
  nodes: 2,
  ttl: 0,
  image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
  // gloo: the CPU backend. CPU wheels, should PyTorch need installing (one already there is used).
  plugins: [torch({ backend: "gloo", cuda: "cpu" })],
});

// Every node runs the training loop: a broadcast, one result per rank.
const ranks = await pool.broadcast(train(8, 32, 0.05));

for (const { rank, samples } of ranks) {
  console.log(`rank ${rank}: ${samples} samples per epoch`);
}
const [first, second] = ranks as Trained[] as [Trained, Trained];
console.log(`loss per epoch: ${first.losses.map((loss) => loss.toFixed(4)).join(" → ")}`);

assert.deepEqual(
  ranks.map((result) => [result.rank, result.world_size]),
  [
    [0, 2],
    [1, 2],
  ],
);
assert.equal(first.samples + second.samples, 1024, "the sampler split the data between the ranks");
assert.ok(
  (first.losses.at(-1) as number) < (first.losses[0] as number) / 2,
  `the loss decreased: ${first.losses.join(", ")}`,
);
// The loss is all-reduced, and DDP keeps the models in step: both ranks agree.
assert.deepEqual(second.losses, first.losses);
assert.equal(first.parameters.length, 8 * 16 + 16 + 16 + 1);
for (const [index, value] of first.parameters.entries()) {
  assert.ok(Math.abs(value - (second.parameters[index] as number)) < 1e-6, "the ranks' models agree");
}
