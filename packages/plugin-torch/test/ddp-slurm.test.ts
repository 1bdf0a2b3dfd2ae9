/**
 * PyTorch DDP through `torch()` on a Slurm cluster: the Slurm test bed's two compute nodes (no sshd,
 * reached through the login node), one job holding both, one worker per node as an `srun` step, and
 * one gloo world across the nodes' cluster addresses.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Slurm } from "@skyward/provider-slurm";
import {
  createSlurmTestbed,
  requireSlurmTestbed,
  type ScratchSkywardHome,
  type SlurmTestbed,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { torch } from "../src/index.js";
import {
  allReduceSum,
  close,
  ddpGradients,
  expectAllReduceSum,
  expectDdpAgreement,
  expectGlooWorld,
  groupInfo,
  SYSTEM_PYTHON,
  tasks,
  torchSkipReasons,
} from "./ddp-tasks.js";

const { torchMissing } = await torchSkipReasons("PyTorch for the torch plugin's end-to-end tests");
const slurmMissing = await requireSlurmTestbed();
/** The fake nvidia-smi (2 × A100) the one-worker-per-accelerator tests put first on the workers' PATH. */
const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));

describe.skipIf(torchMissing !== undefined || slurmMissing !== undefined)(
  "torch() across the 2 compute nodes of the Slurm test bed",
  () => {
    let slurm: SlurmTestbed;
    let home: ScratchSkywardHome | undefined;

    beforeAll(async () => {
      slurm = await createSlurmTestbed({ computeNodes: 2, gpusPerNode: 2 });
      home = await useScratchSkywardHome("skyward-torch-slurm-");
    }, 120_000);

    afterAll(async () => {
      await slurm?.teardown();
      await home?.restore();
    }, 60_000);

    const provider = () => {
      return Slurm({
        login: slurm.loginSettings,
        sharedDirectory: slurm.sharedDirectory,
        // The test bed's GRES are untyped (gpu:2): say what they are.
        accelerator: sky.accelerators.A100(),
        timeLimit: 10,
      });
    };

    it("forms one gloo world of the job's nodes, node 0 of the job its master", async () => {
      await using pool = await sky.compute({
        provider: provider(),
        nodes: 2,
        ttl: 0,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        plugins: [torch({ backend: "gloo" })],
        options: { console: false, bootstrapTimeout: 240 },
      });

      const infos = await pool.broadcast(groupInfo());
      // The master is the job's first node, at its cluster address; gloo uses that network.
      const head = (await slurm.exec(["squeue", "-h", "-o", "%N"])).stdout.trim();
      expect(head).toBe("node[1-2]");
      expectGlooWorld(infos, 2, slurm.computeNodes[0]?.address);
      expect(infos.map((info) => info.gloo_interface)).toEqual(["eth0", "eth0"]);

      expectAllReduceSum(await pool.broadcast(allReduceSum(4)), 4, 2);
      expectDdpAgreement(await pool.broadcast(ddpGradients()));
    });

    it("forms one world of 4 with one worker per GPU Slurm gave each node's step", async () => {
      await using pool = await sky.compute({
        provider: provider(),
        accelerator: sky.accelerators.A100({ count: 2 }),
        nodes: 2,
        ttl: 0,
        image: {
          python: SYSTEM_PYTHON,
          includes: [tasks],
          // The workers' device check finds the fake nvidia-smi (2 GPUs) first on their PATH.
          env: { PATH: `${fakes}:/usr/local/bin:/usr/bin:/bin` },
        },
        plugins: [torch({ backend: "gloo", perAccelerator: true })],
        options: { console: false, bootstrapTimeout: 240 },
      });
      const infos = await pool.broadcast(groupInfo());
      const master = slurm.computeNodes[0]?.address;
      expect(
        infos.map((info) => [info.rank, info.world_size, info.env.LOCAL_RANK, info.env.NODE_RANK]),
      ).toEqual([
        [0, 4, "0", "0"],
        [1, 4, "1", "0"],
        [2, 4, "0", "1"],
        [3, 4, "1", "1"],
      ]);
      expect(new Set(infos.map((info) => info.env.MASTER_ADDR))).toEqual(new Set([master]));
      // Slurm's GRES gave each node's step both devices; the plugin gives each worker one of them.
      expect(infos.map((info) => info.env.CUDA_VISIBLE_DEVICES)).toEqual(["0", "1", "0", "1"]);
      expect(new Set(infos.map((info) => info.pid)).size).toBe(4);
      expect(await pool.broadcast(allReduceSum(2))).toEqual([0, 1, 2, 3].map((rank) => ({ rank, sum: 20 })));
      const gradients = await pool.broadcast(ddpGradients());
      for (const result of gradients) close(result.ddp, gradients[0]?.ddp ?? []);
    });
  },
);
