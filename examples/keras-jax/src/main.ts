// Keras 3 on JAX across a pool: two nodes on this machine train one digit classifier together. The
// `jax` plugin initialises JAX's distributed runtime (CPU wheels here), the `keras` plugin selects the
// JAX backend and a data-parallel distribution over every node's devices; the task is plain Keras.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { jax } from "@skyward/plugin-jax";
import { keras } from "@skyward/plugin-keras";

interface Trained {
  process_index: number;
  devices: number;
  backend: string;
  distribution: string | null;
  train_samples: number;
  losses: number[];
  test_accuracy: number;
  weights_sum: number;
}

const train = sky.python<[epochs: number, batchSize: number], Trained>("tasks:train");

await using pool = await sky.compute({
  nodes: 2,
  ttl: 0,
  image: {
    includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))],
    // JAX brings numpy 2; scipy and scikit-learn built for it (for the digits data set) come along,
    // rather than an older system copy that cannot load with numpy 2.
    pip: ["numpy>=2", "scipy>=1.13", "scikit-learn>=1.6"],
  },
  plugins: [jax({ cuda: "cpu" }), keras({ backend: "jax" })],
  // The first run installs JAX, Keras and their dependencies from PyPI into the pool's environment
  // (about a minute); later runs reuse it.
  options: { bootstrapTimeout: 600 },
});

const results = await pool.broadcast(train(10, 32));
for (const result of results) {
  console.log(
    `process ${result.process_index}: ${result.train_samples} training samples, backend ${result.backend}, ${result.distribution} over ${result.devices} devices`,
  );
}
const [first, second] = results as Trained[] as [Trained, Trained];
console.log(`loss per epoch: ${first.losses.map((loss) => loss.toFixed(3)).join(" → ")}`);
console.log(`held-out accuracy: ${(first.test_accuracy * 100).toFixed(1)} %`);

assert.deepEqual(
  results.map((result) => [result.process_index, result.backend, result.distribution, result.devices]),
  [
    [0, "jax", "DataParallel", 2],
    [1, "jax", "DataParallel", 2],
  ],
);
// One model trained from both nodes' data: the same losses and weights on each.
assert.deepEqual(second.losses, first.losses);
assert.equal(second.weights_sum, first.weights_sum);
assert.ok((first.losses.at(-1) as number) < (first.losses[0] as number), "the loss went down");
assert.ok(first.test_accuracy > 0.8, `held-out accuracy ${first.test_accuracy} is too low`);
