/**
 * Keras on JAX across two Local nodes through `[jax({ cuda: "cpu" }), keras()]`: real worker
 * processes and the real runtime, JAX and Keras from PyPI. Each node trains on its own data; the
 * data-parallel distribution the plugin sets makes them train one model.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { jax } from "@skyward/plugin-jax";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keras } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/keras_tasks.py", import.meta.url));

const backendInfo = sky.python<
  [],
  { env: string | null; backend: string; distribution: string | null; devices: number }
>("keras_tasks:backend_info");
const train = sky.python<[number], { process_index: number; weights: number[][]; losses: number[] }>(
  "keras_tasks:train",
);

describe("keras() with jax() on 2 Local nodes (CPU)", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      // numpy, scipy and scikit-learn from PyPI too: jax brings numpy 2, and Keras imports
      // scikit-learn when it is there — Debian's (in the system site-packages this environment
      // sees) is built for numpy 1.24 and would not load.
      image: { includes: [tasks], pip: ["numpy>=2", "scipy>=1.13", "scikit-learn>=1.6"] },
      plugins: [jax({ cuda: "cpu" }), keras({ backend: "jax" })],
      options: { console: false, bootstrapTimeout: 900 },
    });
  });

  afterAll(async () => {
    await pool?.close();
  });

  it("runs Keras on JAX with a data-parallel distribution over both nodes' devices", async () => {
    expect(await pool.broadcast(backendInfo())).toEqual([
      { env: "jax", backend: "jax", distribution: "DataParallel", devices: 2 },
      { env: "jax", backend: "jax", distribution: "DataParallel", devices: 2 },
    ]);
  });

  it("trains one model from both nodes' data: the same weights and losses on each", async () => {
    const [first, second] = await pool.broadcast(train(3));
    expect([first?.process_index, second?.process_index]).toEqual([0, 1]);
    expect(second?.weights).toEqual(first?.weights);
    expect(second?.losses).toEqual(first?.losses);
    expect(first?.losses).toHaveLength(3);
    // Training happened: the loss went down.
    expect(first?.losses[2]).toBeLessThan(first?.losses[0] as number);
  });
});
