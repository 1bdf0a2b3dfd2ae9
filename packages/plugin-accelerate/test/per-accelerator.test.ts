/**
 * `accelerate({ num_processes: 4 }, { perAccelerator: true })` for real, on two SSH hosts of the
 * test bed that declare 2 accelerators each (a fake `nvidia-smi` listing 2 GPUs is first on their
 * workers' PATH; there is no real GPU, so the state is multi-CPU over gloo). Each host's worker
 * runs under `accelerate launch` with the totals (2 machines, 4 processes), and its 2 worker
 * processes, one per accelerator (each seeing every device: accelerate picks `cuda:<LOCAL_RANK>`),
 * are the processes of one accelerate state of 4.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import type { PluginV1 } from "@skyward/core/contract";
import { SSH } from "@skyward/provider-ssh";
import {
  createTestbed,
  requireSystemPython,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
  useTestbedSshPool,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accelerate } from "../src/index.js";

const SYSTEM_PYTHON = "/usr/bin/python3";
/** The newest accelerate that runs on torch 1.13 (0.32 calls torch.cpu.device_count()). */
const ACCELERATE_REQUIREMENT = "accelerate<0.32";
const tasks = fileURLToPath(new URL("./fixtures/testbed_tasks.py", import.meta.url));
const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));

interface LaunchInfo {
  parent_cmdline: string[];
  grandparent_cmdline: string[];
  own_cmdline: string[];
  process_index: number;
  local_process_index: number;
  num_processes: number;
  distributed_type: string;
  backend: string | null;
  env: Record<string, string | null>;
  pid: number;
}

const launchInfo = sky.python<[], LaunchInfo>("testbed_tasks:launch_info");
const allReduceSum = sky.python<[number], { process_index: number; sum: number }>(
  "testbed_tasks:all_reduce_sum",
);

/** The pool of a suite: 2 test-bed hosts declaring 2 accelerators each, a fake `nvidia-smi` on their PATH. */
const perAcceleratorPool = (homePrefix: string, plugin: PluginV1) =>
  useTestbedSshPool({
    homePrefix,
    hosts: 2,
    compute: ({ bed, proxy }) => ({
      provider: SSH({ hosts: testbedSshHosts(bed), accelerator: sky.accelerators.A100({ count: 2 }) }),
      accelerator: sky.accelerators.A100({ count: 2 }),
      nodes: 2,
      ttl: 0,
      image: {
        python: SYSTEM_PYTHON,
        pip: [ACCELERATE_REQUIREMENT],
        includes: [tasks],
        env: { ...proxy.env, PATH: `${fakes}:/usr/local/bin:/usr/bin:/bin` },
      },
      plugins: [plugin],
      options: { console: false, bootstrapTimeout: 600 },
    }),
  });

const torchMissing = await requireSystemPython("torch.distributed", {
  python: SYSTEM_PYTHON,
  install: "python3-torch",
  purpose: "PyTorch for the accelerate plugin's one-process-per-accelerator suite",
});
const skipReason = torchMissing ?? (await requireTestbed());

describe.skipIf(skipReason !== undefined)(
  "accelerate({ num_processes: 4 }, { perAccelerator: true }) across 2 SSH hosts × 2 faked GPUs",
  () => {
    const fixture = perAcceleratorPool(
      "skyward-accelerate-gpus-",
      accelerate({ distributed_type: "MULTI_CPU", num_processes: 4 }, { perAccelerator: true }),
    );

    it("forms one accelerate state of 4 processes, 2 per host, each of its own local rank", async () => {
      const { pool, bed } = fixture;
      const infos = await pool.broadcast(launchInfo());
      expect(infos.places.map((place) => place.rank)).toEqual([0, 1, 2, 3]);
      const head = bed.hosts[0]?.host as string;
      for (const [rank, info] of infos.entries()) {
        const node = Math.floor(rank / 2);
        expect([info.process_index, info.local_process_index, info.num_processes]).toEqual([
          rank,
          rank % 2,
          4,
        ]);
        expect([info.distributed_type, info.backend]).toEqual(["DistributedType.MULTI_CPU", "gloo"]);
        expect(info.env).toMatchObject({
          RANK: String(rank),
          LOCAL_RANK: String(rank % 2),
          WORLD_SIZE: "4",
          LOCAL_WORLD_SIZE: "2",
          MASTER_ADDR: head,
          ACCELERATE_USE_CPU: "True",
          // Every device stays visible: accelerate selects cuda:<LOCAL_RANK> itself, as under torchrun.
          CUDA_VISIBLE_DEVICES: null,
          GLOO_SOCKET_IFNAME: "eth0",
        });
        // The process is a worker process of the host's worker, which accelerate launch started
        // with the totals: 2 machines, this one's rank, 4 processes.
        expect(info.own_cmdline).toContain("skyward.child");
        expect(info.parent_cmdline.some((word) => word.endsWith("skyward_worker.py"))).toBe(true);
        const launcher = info.grandparent_cmdline;
        expect(launcher.slice(1, 3)).toEqual(["-m", "accelerate.commands.launch"]);
        const flag = (name: string) => launcher[launcher.indexOf(name) + 1];
        expect([flag("--num_machines"), flag("--machine_rank"), flag("--num_processes")]).toEqual([
          "2",
          String(node),
          "4",
        ]);
        expect(info.env.MASTER_PORT).toBe(flag("--main_process_port"));
      }
      expect(new Set(infos.map((info) => info.pid)).size).toBe(4);
      for (const host of bed.hosts) {
        expect(JSON.parse(await readFile(join(host.root, "accelerate.json"), "utf8"))).toMatchObject({
          distributed_type: "MULTI_CPU",
          num_processes: 4,
          use_cpu: true,
        });
      }
    });

    it("all-reduces over gloo across the 4 processes", async () => {
      const { pool } = fixture;
      // Process p contributes 2 × (p + 1): 2 × (1 + 2 + 3 + 4) = 20.
      expect(await pool.broadcast(allReduceSum(2))).toEqual(
        [0, 1, 2, 3].map((process_index) => ({ process_index, sum: 20 })),
      );
    });
  },
);

describe.skipIf(skipReason !== undefined)(
  "accelerate({ fsdp, num_processes: 4 }, { perAccelerator: true }) across 2 SSH hosts × 2 faked GPUs",
  () => {
    const fixture = perAcceleratorPool(
      "skyward-accelerate-fsdp-",
      accelerate({ fsdp: { sharding_strategy: "FULL_SHARD" }, num_processes: 4 }, { perAccelerator: true }),
    );

    it("gives every process what accelerate launch gives the processes it starts, and one state of 4", async () => {
      const { pool, bed } = fixture;
      const infos = await pool.broadcast(launchInfo());
      for (const [rank, info] of infos.entries()) {
        // No GPU here: the state is multi-CPU, but the FSDP settings came through as accelerate's
        // multi-GPU launcher passes them (computed by accelerate's own launch code from accelerate.json).
        expect([info.process_index, info.num_processes]).toEqual([rank, 4]);
        expect(info.env).toMatchObject({
          RANK: String(rank),
          WORLD_SIZE: "4",
          ACCELERATE_USE_FSDP: "true",
          FSDP_SHARDING_STRATEGY: "FULL_SHARD",
          ACCELERATE_MIXED_PRECISION: "no",
        });
        const launcher = info.grandparent_cmdline;
        expect(launcher[launcher.indexOf("--config_file") + 1]).toMatch(/accelerate-launch\.json$/);
      }
      for (const host of bed.hosts) {
        expect(JSON.parse(await readFile(join(host.root, "accelerate.json"), "utf8"))).toMatchObject({
          distributed_type: "FSDP",
          num_processes: 4,
          fsdp_config: { sharding_strategy: "FULL_SHARD" },
        });
      }
      expect(await pool.broadcast(allReduceSum(1))).toEqual(
        [0, 1, 2, 3].map((process_index) => ({ process_index, sum: 10 })),
      );
    });
  },
);

describe.skipIf(skipReason !== undefined)(
  "accelerate({ perAccelerator: true }) refused before any node starts",
  () => {
    let bed: Testbed;
    let home: ScratchSkywardHome | undefined;

    beforeAll(async () => {
      home = await useScratchSkywardHome("skyward-accelerate-gpus-refused-");
      bed = await createTestbed({ hosts: 2 });
    });

    afterAll(async () => {
      await bed?.teardown();
      await home?.restore();
    });

    it("refuses num_processes that is not nodes × accelerators, naming the field", async () => {
      const events: sky.SkywardEvent[] = [];
      await expect(
        sky.compute(
          {
            provider: SSH({ hosts: testbedSshHosts(bed), accelerator: sky.accelerators.A100({ count: 2 }) }),
            accelerator: sky.accelerators.A100({ count: 2 }),
            nodes: 2,
            ttl: 0,
            image: { python: SYSTEM_PYTHON },
            plugins: [
              accelerate({ distributed_type: "MULTI_CPU", num_processes: 6 }, { perAccelerator: true }),
            ],
            options: { console: false },
          },
          { onEvent: (event) => events.push(event) },
        ),
      ).rejects.toThrow(
        /accelerate\.num_processes: expected 4 \(2 nodes × 2 accelerators, one process per accelerator\), received 6/,
      );
      // Nothing was provisioned, let alone bootstrapped.
      expect(
        events.filter((event) => event.type === "node.provisioned" || event.type === "bootstrap.phase"),
      ).toEqual([]);
    });
  },
);
