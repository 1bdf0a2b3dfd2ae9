/**
 * PyTorch DDP across a pool, as every suite that runs it checks it (the torch plugin's own on Local,
 * SSH and Slurm, the Kubernetes provider's on pods): the tasks of `fixtures/ddp_tasks.py` and what
 * their answers must show — one gloo world of the pool's ranks, DDP's weights and gradients agreeing.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as sky from "@skyward/core";
import { expect } from "vitest";

/** What `ddp_tasks:group_info` tells of a rank's process group and environment. */
export interface GroupInfo {
  initialized: boolean;
  rank: number;
  world_size: number;
  backend: string;
  env: Record<string, string | null>;
  gloo_interface: string | null;
  pid: number;
  placement: { node: number; worker: number; global_worker_index: number; total_workers: number };
}

/** What `ddp_tasks:ddp_gradients` gives: a rank's initial weights, its local and its DDP gradients. */
export interface Gradients {
  rank: number;
  weights: number[][];
  ddp: number[][];
  local: number[][];
}

const packageRoot = dirname(createRequire(import.meta.url).resolve("@skyward/testing/package.json"));

/** The DDP tasks (a pool includes {@link ddpTasks}`.file` in its image; it imports torch). */
export const ddpTasks = {
  file: join(packageRoot, "src", "fixtures", "ddp_tasks.py"),
  groupInfo: sky.python<[], GroupInfo>("ddp_tasks:group_info"),
  allReduceSum: sky.python<[number], { rank: number; sum: number }>("ddp_tasks:all_reduce_sum"),
  ddpGradients: sky.python<[], Gradients>("ddp_tasks:ddp_gradients"),
};

/** `actual` equals `expected`, element by element, to 10 decimal places. */
export function expectClose(actual: readonly number[][], expected: readonly number[][]): void {
  expect(actual.length).toBe(expected.length);
  for (const [i, row] of actual.entries()) {
    const other = expected[i] as number[];
    expect(row.length).toBe(other.length);
    for (const [j, value] of row.entries()) expect(value).toBeCloseTo(other[j] as number, 10);
  }
}

/** One gloo world of `size` ranks, in rank order, every rank given `master` as `MASTER_ADDR`. */
export function expectGlooWorld(infos: readonly GroupInfo[], size: number, master: string | undefined): void {
  expect(infos.map((info) => [info.rank, info.world_size, info.backend])).toEqual(
    Array.from({ length: size }, (_, rank) => [rank, size, "gloo"]),
  );
  expect(infos.map((info) => info.env.MASTER_ADDR)).toEqual(infos.map(() => master));
}

/** `all_reduce_sum(value)` over `size` ranks: rank r gives `value × (r + 1)`, every rank holds their sum. */
export function expectAllReduceSum(
  results: readonly { rank: number; sum: number }[],
  value: number,
  size: number,
): void {
  const sum = (value * size * (size + 1)) / 2;
  expect(results).toEqual(Array.from({ length: size }, (_, rank) => ({ rank, sum })));
}

/**
 * What every DDP run must show, in rank order: DDP broadcast rank 0's weights though each rank seeded
 * its own; each rank's data differs, so the local gradients differ; DDP's gradients are the same on
 * every rank — the mean of the local ones.
 */
export function expectDdpAgreement(results: readonly Gradients[]): void {
  expect(results.map((result) => result.rank)).toEqual(results.map((_, rank) => rank));
  const first = results[0] as Gradients;
  expect(first.ddp.flat().length).toBeGreaterThan(0);
  const mean = first.local.map((row, i) =>
    row.map(
      (_, j) => results.reduce((sum, result) => sum + (result.local[i]?.[j] as number), 0) / results.length,
    ),
  );
  for (const result of results) {
    expectClose(result.weights, first.weights);
    expectClose(result.ddp, mean);
  }
  expect(results[1]?.local.flat()).not.toEqual(first.local.flat());
}
