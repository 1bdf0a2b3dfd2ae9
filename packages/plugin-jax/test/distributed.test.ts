/**
 * jax.distributed end to end through `jax({ cuda: "cpu" })`: two Local nodes (real worker processes,
 * the real runtime), JAX from PyPI, its CPU collectives (gloo) over loopback.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jax } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/jax_tasks.py", import.meta.url));

interface DistributedInfo {
  head_port: number;
  process_index: number;
  process_count: number;
  devices: number;
  local_devices: number;
  env: Record<string, string | null>;
  cuda_visible_devices: string | null;
  pid: number;
}

const distributedInfo = sky.python<[], DistributedInfo>("jax_tasks:distributed_info");
const globalSum = sky.python<[number], { process_index: number; sum: number; gathered: number[] }>(
  "jax_tasks:global_sum",
);

const shuffledShard = sky.python<[number], { is_jax: boolean; values: number[] }>("jax_tasks:shuffled_shard");
const jaxResults = sky.python<[], [sky.NDArray<"float32">, sky.NDArray<"int32">]>("jax_tasks:jax_results");

describe("jax() on 2 Local nodes (CPU)", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      plugins: [jax({ cuda: "cpu" })],
      options: { console: false, bootstrapTimeout: 900 },
    });
  });

  afterAll(async () => {
    await pool?.close();
  });

  it("makes one JAX runtime of both workers, coordinated next to the head port", async () => {
    const infos = await pool.broadcast(distributedInfo());
    expect(
      infos.map((info) => [info.process_index, info.process_count, info.devices, info.local_devices]),
    ).toEqual([
      [0, 2, 2, 1],
      [1, 2, 2, 1],
    ]);
    expect(infos[0]?.head_port).toBeGreaterThan(0);
    const coordinator = `127.0.0.1:${(infos[0]?.head_port ?? 0) + 1}`;
    for (const [node, info] of infos.entries()) {
      expect(info.cuda_visible_devices).toBeNull();
      expect(info.env).toEqual({
        JAX_COORDINATOR_ADDRESS: coordinator,
        JAX_NUM_PROCESSES: "2",
        JAX_PROCESS_ID: String(node),
        JAX_LOCAL_DEVICE_COUNT: "1",
      });
    }
  });

  it("computes across both processes: a sum over a globally sharded array, and an all-gather", async () => {
    expect(await pool.broadcast(globalSum(1.5))).toEqual([
      { process_index: 0, sum: 4.5, gathered: [0, 1] },
      { process_index: 1, sum: 4.5, gathered: [0, 1] },
    ]);
  });

  it("shards a JAX array shuffled: each node a JAX array, disjoint, covering it all", async () => {
    const parts = await pool.broadcast(shuffledShard(10));
    expect(parts.map((part) => part.is_jax)).toEqual([true, true]);
    expect(parts.map((part) => part.values.length)).toEqual([5, 5]);
    expect(parts.flatMap((part) => part.values).sort((a, b) => a - b)).toEqual([
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    ]);
  });

  it("returns JAX arrays as arrays, not as opaque Python objects", async () => {
    const [array, total] = await pool.run(jaxResults());
    expect(array).toBeInstanceOf(sky.NDArray);
    expect([array.dtype, array.shape, Array.from(array.data)]).toEqual([
      "float32",
      [2, 3],
      [0, 2, 4, 6, 8, 10],
    ]);
    expect(total).toBeInstanceOf(sky.NDArray);
    expect([total.dtype, total.shape, Array.from(total.data)]).toEqual(["int32", [], [6]]);
  });

  it("initialises once per worker: later tasks run in the same runtime", async () => {
    const first = await pool.broadcast(distributedInfo());
    await pool.broadcast(globalSum(1));
    const again = await pool.broadcast(distributedInfo());
    expect(again.map((info) => info.pid)).toEqual(first.map((info) => info.pid));
    expect(again.map((info) => info.process_index)).toEqual([0, 1]);
  });
});

describe("jax({ perAccelerator: true }) on 2 Local nodes × 2 faked GPUs (CPU)", () => {
  /** A directory holding a fake nvidia-smi listing 2 GPUs: the Local offer counts them. */
  const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));
  const path = process.env.PATH;
  let pool: sky.Pool;

  beforeAll(async () => {
    process.env.PATH = `${fakes}:${path}`;
    pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      plugins: [jax({ cuda: "cpu", perAccelerator: true })],
      options: { console: false, bootstrapTimeout: 900 },
    });
  });

  afterAll(async () => {
    await pool?.close();
    process.env.PATH = path;
  });

  it("makes one JAX runtime of 4 processes, one per device, in rank order", async () => {
    const infos = await pool.broadcast(distributedInfo());
    expect(
      infos.map((info) => [info.process_index, info.process_count, info.devices, info.local_devices]),
    ).toEqual([0, 1, 2, 3].map((index) => [index, 4, 4, 1]));
    expect(infos.map((info) => info.cuda_visible_devices)).toEqual(["0", "1", "0", "1"]);
    expect(infos.map((info) => info.env.JAX_PROCESS_ID)).toEqual(["0", "1", "2", "3"]);
    expect(new Set(infos.map((info) => info.pid)).size).toBe(4);
    expect(await pool.broadcast(globalSum(1))).toEqual(
      [0, 1, 2, 3].map((process_index) => ({ process_index, sum: 10, gathered: [0, 1, 2, 3] })),
    );
  });
});
