// The Python project's guide 15 shape: a model trained in one task and evaluated in the next, on CPU.
// The torch module comes back as an opaque `sky.PyObject` handle (it stays pickled, the client never
// unpickles it) and the next task receives it as the same module; the data goes out and the
// predictions come back as float32 arrays (raw buffers, dtype and shape kept).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";

const train = sky.python<
  [x: sky.NDArray<"float32">, y: sky.NDArray<"float32">, epochs: number],
  sky.PyObject
>("tasks:train");
const evaluate = sky.python<
  [model: sky.PyObject, x: sky.NDArray<"float32">],
  { weight: number; bias: number; prediction: sky.NDArray<"float32"> }
>("tasks:evaluate");

await using pool = await sky.compute({
  nodes: 2,
  ttl: 0,
  image: {
    includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))],
    // PyTorch's CPU wheels, should it need installing (one already there is used). No torch plugin:
    // its process group would make a task on one node wait for the other.
    pip: ["torch"],
    pipIndexes: [{ url: "https://download.pytorch.org/whl/cpu", packages: ["torch"] }],
  },
});

// y = 3x + 1 on 64 points in [-1, 1].
const points = 64;
const xs = new Float32Array(points).map((_, index) => -1 + (2 * index) / (points - 1));
const x = new sky.NDArray<"float32">(xs);
const y = new sky.NDArray<"float32">(xs.map((value) => 3 * value + 1));

const model = await pool.run(train(x, y, 200), { target: 0 });
console.log(`trained on node 0: a ${model.type} (${model.byteLength} bytes pickled)`);
assert.equal(model.type, "torch.nn.modules.linear.Linear");

// Evaluated on the other node: the handle goes back as it came.
const probe = new sky.NDArray<"float32">(new Float32Array([-0.5, 0, 0.5, 2]));
const result = await pool.run(evaluate(model, probe), { target: 1 });
console.log(`evaluated on node 1: y = ${result.weight.toFixed(3)}·x + ${result.bias.toFixed(3)}`);
console.log(
  `predictions for ${Array.from(probe.data).join(", ")}: ${Array.from(result.prediction.data, (v) => v.toFixed(3)).join(", ")}`,
);

assert.ok(
  Math.abs(result.weight - 3) < 0.01 && Math.abs(result.bias - 1) < 0.01,
  "the model learnt y = 3x + 1",
);
assert.equal(result.prediction.dtype, "float32");
assert.deepEqual(result.prediction.shape, [4]);
assert.ok(Math.abs(result.prediction.get(3) - 7) < 0.05);
