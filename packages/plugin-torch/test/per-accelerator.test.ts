/**
 * `torch({ perAccelerator: true })`: one worker process per accelerator, on 2 nodes with 2 faked
 * GPUs each (a fake `nvidia-smi` reporting 2 devices; no real GPU here, so the group is gloo's):
 * on 2 Local nodes (the Local provider's offer counts the GPUs nvidia-smi lists) and on 2 SSH hosts
 * of the test bed (which declare `A100:2`, with the same fake nvidia-smi on their PATH). Four real
 * worker processes with Debian's python3-torch form one world of 4.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import {
  createTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { torch } from "../src/index.js";
import {
  allReduceSum,
  ddpGradients,
  expectDdpAgreement,
  type GroupInfo,
  groupInfo,
  SYSTEM_PYTHON,
  tasks,
  torchSkipReasons,
} from "./ddp-tasks.js";

/** A directory holding the fake nvidia-smi (2 × A100 80GB; `FAKE_NVIDIA_GPUS` changes the count). */
const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));

const withNestedProbe = sky.python<
  [],
  {
    rank: number;
    pid: number;
    probe: { initialized: boolean; cuda_visible_devices: string | null; pid: number };
  }
>("ddp_tasks:with_nested_probe");

// Why these tests cannot run here (no torch for /usr/bin/python3), or undefined. Under CI, throws.
const { torchMissing, testbedMissing } = await torchSkipReasons(
  "PyTorch for the torch plugin's one-worker-per-accelerator tests",
);

/** What every run of 2 nodes × 2 accelerators shows: 4 ranks, each on its own device and local rank. */
function expectFourRanks(infos: readonly GroupInfo[], head: string, glooInterface: string): void {
  expect(infos.map((info) => [info.initialized, info.rank, info.world_size, info.backend])).toEqual([
    [true, 0, 4, "gloo"],
    [true, 1, 4, "gloo"],
    [true, 2, 4, "gloo"],
    [true, 3, 4, "gloo"],
  ]);
  for (const [rank, info] of infos.entries()) {
    const node = Math.floor(rank / 2);
    const local = rank % 2;
    expect(info.env).toMatchObject({
      MASTER_ADDR: head,
      WORLD_SIZE: "4",
      RANK: String(rank),
      LOCAL_RANK: String(local),
      LOCAL_WORLD_SIZE: "2",
      NODE_RANK: String(node),
      CUDA_VISIBLE_DEVICES: String(local),
    });
    expect(info.placement).toEqual({ node, worker: local, global_worker_index: rank, total_workers: 4 });
    expect(info.gloo_interface).toBe(glooInterface);
  }
  // Four processes, one rendezvous port (the head's).
  expect(new Set(infos.map((info) => info.pid)).size).toBe(4);
  expect(new Set(infos.map((info) => info.env.MASTER_PORT)).size).toBe(1);
}

describe.skipIf(torchMissing !== undefined)(
  "torch({ perAccelerator: true }) on 2 Local nodes × 2 faked GPUs",
  () => {
    let pool: sky.Pool;
    let scratch: string;
    const path = process.env.PATH;

    beforeAll(async () => {
      scratch = await mkdtemp(join(tmpdir(), "skyward-torch-gpus-"));
      // The client (the Local provider's offer) and the workers (their device check) ask nvidia-smi.
      process.env.PATH = `${fakes}:${path}`;
      process.env.FAKE_NVIDIA_RECORD = join(scratch, "nvidia-smi.jsonl");
      pool = await sky.compute({
        nodes: 2,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        plugins: [torch({ backend: "gloo", cuda: "cpu", perAccelerator: true })],
        options: { console: false },
      });
    });

    afterAll(async () => {
      await pool?.close();
      process.env.PATH = path;
      delete process.env.FAKE_NVIDIA_RECORD;
      await rm(scratch, { recursive: true, force: true });
    });

    it("runs 4 workers, one per faked GPU, each a rank of one gloo world of 4", async () => {
      const infos = await pool.broadcast(groupInfo());
      expectFourRanks(infos, "127.0.0.1", "lo");
      expect(infos.places).toEqual([
        { node: 0, worker: 0, rank: 0 },
        { node: 0, worker: 1, rank: 1 },
        { node: 1, worker: 0, rank: 2 },
        { node: 1, worker: 1, rank: 3 },
      ]);
      expect(pool.workerCount()).toBe(4);
      // The offer came from the GPU list (the client), and each worker process checked its node's.
      const calls = (await readFile(process.env.FAKE_NVIDIA_RECORD as string, "utf8"))
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as string[]);
      expect(calls).toContainEqual(["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]);
      expect(calls.filter((call) => call.join(" ") === "-L").length).toBeGreaterThanOrEqual(2);
    });

    it("all_reduce sums over the 4 ranks", async () => {
      // Rank r contributes 1.5 × (r + 1): 1.5 × (1 + 2 + 3 + 4) = 15.
      expect(await pool.broadcast(allReduceSum(1.5))).toEqual(
        [0, 1, 2, 3].map((rank) => ({ rank, sum: 15 })),
      );
    });

    it("DDP gradients agree on all 4 ranks: the mean of their local ones", async () => {
      expectDdpAgreement(await pool.broadcast(ddpGradients()));
    });

    it("runs a rank's subtasks (nested dispatch) in other processes that are no ranks of their own", async () => {
      const result = await pool.run(withNestedProbe(), { target: { rank: 1 } });
      expect(result.rank).toBe(1);
      expect(result.probe.pid).not.toBe(result.pid);
      // A nested-task process shares a worker's device but does not join the group (that would be a
      // rank twice over, and hang the rendezvous).
      expect(result.probe.initialized).toBe(false);
      expect(["0", "1"]).toContain(result.probe.cuda_visible_devices);
    });

    it("runs a call on the worker a target names: a node, a worker of a node, a global rank", async () => {
      expect((await pool.run(groupInfo(), { target: { rank: 3 } })).rank).toBe(3);
      expect((await pool.run(groupInfo(), { target: { node: 1, worker: 0 } })).rank).toBe(2);
      expect((await pool.run(groupInfo(), { target: { rank: 1 } })).env.CUDA_VISIBLE_DEVICES).toBe("1");
      expect([0, 1]).toContain((await pool.run(groupInfo(), { target: "head" })).rank);
      await expect(pool.run(groupInfo(), { target: { rank: 4 } })).rejects.toThrow(
        /target\.rank.*expected a global rank from 0 to 3 \(2 nodes × 2 workers\), received 4/,
      );
      await expect(pool.run(groupInfo(), { target: { node: 0, worker: 2 } })).rejects.toThrow(
        /target\.worker/,
      );
    });
  },
);

describe.skipIf(torchMissing !== undefined)(
  'torch({ perAccelerator: true, visibleDevices: "all" }) on 2 Local nodes × 2 faked GPUs',
  () => {
    const path = process.env.PATH;
    let pool: sky.Pool;

    beforeAll(async () => {
      process.env.PATH = `${fakes}:${path}`;
      pool = await sky.compute({
        nodes: 2,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        plugins: [torch({ backend: "gloo", cuda: "cpu", perAccelerator: true, visibleDevices: "all" })],
        options: { console: false },
      });
    });

    afterAll(async () => {
      await pool?.close();
      process.env.PATH = path;
    });

    it("runs 4 ranks that see every device and select theirs by LOCAL_RANK, as under torchrun", async () => {
      const infos = await pool.broadcast(groupInfo());
      expect(infos.map((info) => [info.rank, info.world_size, info.env.LOCAL_RANK])).toEqual([
        [0, 4, "0"],
        [1, 4, "1"],
        [2, 4, "0"],
        [3, 4, "1"],
      ]);
      expect(infos.map((info) => info.env.CUDA_VISIBLE_DEVICES)).toEqual([null, null, null, null]);
      expect(await pool.broadcast(allReduceSum(1))).toEqual([0, 1, 2, 3].map((rank) => ({ rank, sum: 10 })));
    });
  },
);

describe.skipIf(torchMissing !== undefined)(
  "torch({ perAccelerator: true }) refused before anything runs",
  () => {
    it("refuses a node without accelerators", async () => {
      await expect(
        sky.compute({
          nodes: 1,
          image: { python: SYSTEM_PYTHON },
          plugins: [torch({ cuda: "cpu", perAccelerator: true })],
          options: { console: false },
        }),
      ).rejects.toThrow(
        /torch[\s\S]*workersPerNode[\s\S]*one worker per accelerator needs nodes with accelerators/,
      );
    });

    it("refuses more task slots than accelerators", async () => {
      const path = process.env.PATH;
      process.env.PATH = `${fakes}:${path}`;
      try {
        await expect(
          sky.compute({
            nodes: 1,
            image: { python: SYSTEM_PYTHON },
            plugins: [torch({ cuda: "cpu", perAccelerator: true })],
            options: { console: false, worker: { concurrency: 3 } },
          }),
        ).rejects.toThrow(
          /options\.worker\.concurrency[\s\S]*expected 1 \(or 2, the workers per node\)[\s\S]*received 3/,
        );
      } finally {
        process.env.PATH = path;
      }
    });
  },
);

describe.skipIf(testbedMissing !== undefined)(
  "torch({ perAccelerator: true }) on 2 SSH hosts × 2 faked GPUs",
  () => {
    let bed: Testbed;
    let home: ScratchSkywardHome | undefined;

    beforeAll(async () => {
      bed = await createTestbed({ hosts: 2 });
      home = await useScratchSkywardHome("skyward-torch-gpus-");
    });

    afterAll(async () => {
      await bed?.teardown();
      await home?.restore();
    });

    it("forms one world of 4 across the hosts: all_reduce and DDP", async () => {
      await using pool = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(bed), accelerator: sky.accelerators.A100({ count: 2 }) }),
        accelerator: sky.accelerators.A100({ count: 2 }),
        nodes: 2,
        ttl: 0,
        image: {
          python: SYSTEM_PYTHON,
          includes: [tasks],
          // The hosts' workers find the fake nvidia-smi (2 GPUs) first on their PATH.
          env: { PATH: `${fakes}:/usr/local/bin:/usr/bin:/bin` },
        },
        plugins: [torch({ backend: "gloo", perAccelerator: true })],
        options: { console: false, bootstrapTimeout: 240 },
      });
      const infos = await pool.broadcast(groupInfo());
      expectFourRanks(infos, bed.hosts[0]?.host as string, "eth0");
      expect(await pool.broadcast(allReduceSum(2))).toEqual([0, 1, 2, 3].map((rank) => ({ rank, sum: 20 })));
      expectDdpAgreement(await pool.broadcast(ddpGradients()));
    });

    it("refuses to start when a host has fewer GPUs than the pool runs workers", async () => {
      await expect(
        sky.compute({
          provider: SSH({ hosts: testbedSshHosts(bed), accelerator: sky.accelerators.A100({ count: 2 }) }),
          accelerator: sky.accelerators.A100({ count: 2 }),
          nodes: 2,
          ttl: 0,
          image: {
            python: SYSTEM_PYTHON,
            includes: [tasks],
            env: { PATH: `${fakes}:/usr/local/bin:/usr/bin:/bin`, FAKE_NVIDIA_GPUS: "1" },
          },
          plugins: [torch({ backend: "gloo", perAccelerator: true })],
          options: { console: false, bootstrapTimeout: 240 },
        }),
      ).rejects.toThrow(
        /2 workers per node, one per accelerator, but this node has fewer: nvidia-smi -L lists 1/,
      );
    });
  },
);
