/**
 * PyTorch DDP end to end through `torch()`: real worker processes with the real runtime and Debian's
 * python3-torch (for /usr/bin/python3), on two Local nodes (gloo over loopback) and on two SSH hosts
 * of the test bed (gloo across network namespaces).
 */
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
  expectAllReduceSum,
  expectDdpAgreement,
  expectGlooWorld,
  groupInfo,
  localTorchPool,
  SYSTEM_PYTHON,
  tasks,
  torchSkipReasons,
} from "./ddp-tasks.js";

// Why these tests cannot run here (no torch for /usr/bin/python3), or undefined. Under CI, throws.
const { torchMissing, testbedMissing } = await torchSkipReasons(
  "PyTorch for the torch plugin's end-to-end tests",
);

describe.skipIf(torchMissing !== undefined)("torch() on 2 Local nodes: gloo over loopback", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await localTorchPool(2);
  });

  afterAll(async () => {
    await pool?.close();
  });

  it("joins both workers to one gloo group with the rendezvous variables of the pool", async () => {
    const infos = await pool.broadcast(groupInfo());
    expect(infos.map((info) => [info.initialized, info.rank, info.world_size, info.backend])).toEqual([
      [true, 0, 2, "gloo"],
      [true, 1, 2, "gloo"],
    ]);
    for (const [node, info] of infos.entries()) {
      expect(info.env).toMatchObject({
        MASTER_ADDR: "127.0.0.1",
        WORLD_SIZE: "2",
        RANK: String(node),
        LOCAL_RANK: "0",
        LOCAL_WORLD_SIZE: "1",
        NODE_RANK: String(node),
      });
      expect(Number(info.env.MASTER_PORT)).toBeGreaterThan(0);
    }
    expect(infos[1]?.env.MASTER_PORT).toBe(infos[0]?.env.MASTER_PORT);
    expect(infos.map((info) => info.gloo_interface)).toEqual(["lo", "lo"]);
  });

  it("all_reduce sums over both ranks", async () => {
    const results = await pool.broadcast(allReduceSum(2.5));
    expect(results).toEqual([
      { rank: 0, sum: 7.5 },
      { rank: 1, sum: 7.5 },
    ]);
  });

  it("DDP averages the gradients of both ranks", async () => {
    expectDdpAgreement(await pool.broadcast(ddpGradients()));
  });

  it("initialises the group once per worker: later tasks reuse it", async () => {
    const first = await pool.broadcast(groupInfo());
    await pool.broadcast(allReduceSum(1));
    const again = await pool.broadcast(groupInfo());
    expect(again.map((info) => info.pid)).toEqual(first.map((info) => info.pid));
    expect(again.every((info) => info.initialized)).toBe(true);
  });
});

describe.skipIf(torchMissing !== undefined)("torch() on 1 Local node without a backend", () => {
  it("chooses gloo, as the worker has no CUDA device", async () => {
    await using pool = await localTorchPool(1, { cuda: "cpu" });
    const info = await pool.run(groupInfo());
    expect([info.initialized, info.rank, info.world_size, info.backend]).toEqual([true, 0, 1, "gloo"]);
    expect(await pool.run(allReduceSum(3))).toEqual({ rank: 0, sum: 3 });
  });
});

describe.skipIf(torchMissing !== undefined)("torch() when the process group cannot start", () => {
  it("fails the task, and every later one, with an error naming the plugin", async () => {
    // Debian's PyTorch is built without NCCL.
    await using pool = await localTorchPool(1, { backend: "nccl", cuda: "cpu" });
    await expect(pool.run(groupInfo())).rejects.toThrow(/torch[\s\S]*around_app[\s\S]*NCCL/i);
    await expect(pool.run(groupInfo())).rejects.toThrow(/torch/);
  });
});

describe.skipIf(testbedMissing !== undefined)("torch() across 2 SSH hosts of the test bed", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome | undefined;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    home = await useScratchSkywardHome("skyward-torch-e2e-");
  });

  afterAll(async () => {
    await bed?.teardown();
    await home?.restore();
  });

  it("runs all_reduce and DDP over gloo between the hosts' private addresses", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: 2,
      ttl: 0,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [torch({ backend: "gloo" })],
      options: { console: false, bootstrapTimeout: 240 },
    });

    const infos = await pool.broadcast(groupInfo());
    expectGlooWorld(infos, 2, bed.hosts[0]?.host);
    expect(infos.map((info) => info.env.NODE_RANK)).toEqual(["0", "1"]);
    // Each host's private address is on its eth0, which gloo must use rather than the host name's.
    expect(infos.map((info) => info.gloo_interface)).toEqual(["eth0", "eth0"]);

    expectAllReduceSum(await pool.broadcast(allReduceSum(4)), 4, 2);
    expectDdpAgreement(await pool.broadcast(ddpGradients()));
  });
});
