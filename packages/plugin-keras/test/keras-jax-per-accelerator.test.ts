/**
 * Keras on `jax({ perAccelerator: true })`: one Local node whose 2 GPUs are a fake nvidia-smi's
 * (`fixtures/bin`), so the node runs 2 worker processes, each a JAX process of one runtime (CPU).
 * The tasks run in those processes: each must have the data-parallel distribution over both
 * processes' devices, and both must train one model — not the node's worker process, which runs
 * no task (and must not start JAX's backends, which on a GPU would take its memory).
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { jax } from "@skyward/plugin-jax";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keras } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/keras_tasks.py", import.meta.url));
const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));

const backendInfo = sky.python<
  [],
  { env: string | null; backend: string; distribution: string | null; devices: number }
>("keras_tasks:backend_info");
const train = sky.python<[number], { process_index: number; weights: number[][]; losses: number[] }>(
  "keras_tasks:train",
);

describe("keras() with jax({ perAccelerator: true }) on a Local node × 2 faked GPUs (CPU)", () => {
  const path = process.env.PATH;
  let pool: sky.Pool;

  beforeAll(async () => {
    process.env.PATH = `${fakes}:${path}`;
    pool = await sky.compute({
      nodes: 1,
      // As keras-jax.test.ts: numpy 2, scipy and scikit-learn from PyPI next to jax.
      image: { includes: [tasks], pip: ["numpy>=2", "scipy>=1.13", "scikit-learn>=1.6"] },
      plugins: [jax({ cuda: "cpu", perAccelerator: true }), keras({ backend: "jax" })],
      options: { console: false, bootstrapTimeout: 900 },
    });
  });

  afterAll(async () => {
    await pool?.close();
    process.env.PATH = path;
  });

  it("gives each rank's process the data-parallel distribution over both processes' devices", async () => {
    expect(await pool.broadcast(backendInfo())).toEqual([
      { env: "jax", backend: "jax", distribution: "DataParallel", devices: 2 },
      { env: "jax", backend: "jax", distribution: "DataParallel", devices: 2 },
    ]);
  });

  it("trains one model from both processes' data: the same weights and losses on each", async () => {
    const [first, second] = await pool.broadcast(train(3));
    expect([first?.process_index, second?.process_index]).toEqual([0, 1]);
    expect(second?.weights).toEqual(first?.weights);
    expect(second?.losses).toEqual(first?.losses);
    expect(first?.losses[2]).toBeLessThan(first?.losses[0] as number);
  });
});
