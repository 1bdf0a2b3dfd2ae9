/**
 * MIG with `torch({ perAccelerator: true })`: a MIG instance is the accelerator. One Local node
 * whose GPUs are the fake nvidia-smi's (two A100 80GB; the bootstrap op cuts GPU 0 into two
 * `3g.40gb` instances); MIG decides the worker count and pins each worker process to its instance,
 * and torch makes each of them a rank of one gloo group (no real GPU: Debian's CPU PyTorch).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { torch } from "@skyward/plugin-torch";
import { requireSystemPython } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mig } from "./index.js";

const SYSTEM_PYTHON = "/usr/bin/python3";
const fakes = fileURLToPath(new URL("../test/fixtures/bin", import.meta.url));
const tasks = fileURLToPath(new URL("../test/fixtures/rank_tasks.py", import.meta.url));

const torchMissing = await requireSystemPython("torch.distributed", {
  python: SYSTEM_PYTHON,
  install: "python3-torch",
  purpose: "PyTorch for MIG with torch({ perAccelerator: true })",
});

const rankInfo = sky.python<
  [],
  { rank: number; world_size: number; local_rank: string | null; device: string | null; sum: number }
>("rank_tasks:rank_info");

describe.skipIf(torchMissing !== undefined)(
  "mig() with torch({ perAccelerator: true }) on a Local node",
  () => {
    const saved = { ...process.env };
    let scratch: string;
    let pool: sky.Pool;

    beforeAll(async () => {
      scratch = mkdtempSync(join(tmpdir(), "skyward-mig-torch-"));
      process.env.PATH = `${fakes}:${saved.PATH}`;
      process.env.FAKE_NVIDIA_STATE = join(scratch, "state.json");
      process.env.FAKE_NVIDIA_RECORD = join(scratch, "calls.jsonl");
      pool = await sky.compute({
        nodes: 1,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        plugins: [mig("3g.40gb"), torch({ backend: "gloo", cuda: "cpu", perAccelerator: true })],
        options: { console: false },
      });
    }, 120_000);

    afterAll(async () => {
      await pool?.close();
      process.env = saved;
      rmSync(scratch, { recursive: true, force: true });
    });

    it("runs one rank per MIG instance, each process pinned to its instance by MIG", async () => {
      const ranks = await pool.broadcast(rankInfo());
      expect(ranks.places).toEqual([
        { node: 0, worker: 0, rank: 0 },
        { node: 0, worker: 1, rank: 1 },
      ]);
      expect(ranks).toEqual([
        {
          rank: 0,
          world_size: 2,
          local_rank: "0",
          device: "MIG-00000000-0000-4000-8000-000000000000",
          sum: 3,
        },
        {
          rank: 1,
          world_size: 2,
          local_rank: "1",
          device: "MIG-00000000-0000-4000-8000-000000000001",
          sum: 3,
        },
      ]);
    });
  },
);

describe.skipIf(torchMissing !== undefined)("mig() with torch() (one rank per node) on a Local node", () => {
  const saved = { ...process.env };
  let scratch: string;
  let pool: sky.Pool;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "skyward-mig-torch-node-"));
    process.env.PATH = `${fakes}:${saved.PATH}`;
    process.env.FAKE_NVIDIA_STATE = join(scratch, "state.json");
    process.env.FAKE_NVIDIA_RECORD = join(scratch, "calls.jsonl");
    pool = await sky.compute({
      nodes: 1,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [mig("3g.40gb"), torch({ backend: "gloo", cuda: "cpu" })],
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 120_000);

  afterAll(async () => {
    await pool?.close();
    process.env = saved;
    rmSync(scratch, { recursive: true, force: true });
  });

  // MIG runs two workers per node, in the node's one worker process (the thread executor): that one
  // process is the node's rank. The group's size is the node count, as without MIG: a world of
  // nodes × instances would wait for ranks no process ever takes.
  it("makes the node's one worker process its rank: a group of one per node", async () => {
    const result = await pool.run(rankInfo().withTimeout(40));
    expect(result).toEqual({
      rank: 0,
      world_size: 1,
      local_rank: "0",
      device: "MIG-00000000-0000-4000-8000-000000000000",
      sum: 1,
    });
  });
});
