/**
 * `jax()` (one JAX process per node) next to a plugin that runs several workers per node in the
 * node's one worker process, as MIG does under the thread executor: the node's process is still its
 * one JAX process — a runtime of the nodes, not of nodes × workers (whose missing processes the
 * coordinator would wait for). Two Local nodes, JAX from PyPI, CPU.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Plugin } from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jax } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/jax_tasks.py", import.meta.url));

const distributedInfo = sky.python<
  [],
  { process_index: number; process_count: number; env: Record<string, string | null> }
>("jax_tasks:distributed_info");

/** Two workers per node, both in the node's one worker process (the thread executor), as MIG runs them. */
const twoWorkersPerNode = Plugin.create("two-workers").withWorkersPerNode(() => 2);

describe("jax() with two workers per node in one process, on 2 Local nodes (CPU)", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      plugins: [twoWorkersPerNode, jax({ cuda: "cpu" })],
      options: { console: false, bootstrapTimeout: 900, worker: { concurrency: 2 } },
    });
  });

  afterAll(async () => {
    await pool?.close();
  });

  it("makes each node's worker process one JAX process of a runtime of 2", async () => {
    const infos = await Promise.all(
      [0, 1].map((node) => pool.run(distributedInfo().withTimeout(60), { target: node })),
    );
    expect(infos.map((info) => [info.process_index, info.process_count])).toEqual([
      [0, 2],
      [1, 2],
    ]);
    expect(infos.map((info) => [info.env.JAX_NUM_PROCESSES, info.env.JAX_PROCESS_ID])).toEqual([
      ["2", "0"],
      ["2", "1"],
    ]);
  });
});
