/**
 * `accelerate launch` for real, on two SSH hosts of the test bed (network namespaces with real
 * sshd): the pool bootstraps each host over SSH, pip installs accelerate from PyPI through the
 * test bed's PyPI proxy next to Debian's python3-torch (seen through the virtual environment's
 * system site-packages), the plugin writes its config file, and its launcher starts each host's
 * worker under `python -m accelerate.commands.launch`. Tasks then check accelerate's state and run
 * a gloo all-reduce between the hosts' private addresses.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import { requireSystemPython, requireTestbed, testbedSshHosts, useTestbedSshPool } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { accelerate } from "../src/index.js";

/** Debian's interpreter: python3-torch (1.13) is installed for it, and the workers' venv sees it. */
const SYSTEM_PYTHON = "/usr/bin/python3";
/** The newest accelerate that runs on torch 1.13 (0.32 calls torch.cpu.device_count()). */
const ACCELERATE_REQUIREMENT = "accelerate<0.32";
const tasks = fileURLToPath(new URL("./fixtures/testbed_tasks.py", import.meta.url));

interface LaunchInfo {
  parent_cmdline: string[];
  own_cmdline: string[];
  process_index: number;
  num_processes: number;
  distributed_type: string;
  backend: string | null;
  accelerate: string;
  torch: string;
  torch_file: string;
  env: Record<string, string | null>;
  pid: number;
}

const launchInfo = sky.python<[], LaunchInfo>("testbed_tasks:launch_info");
const allReduceSum = sky.python<[number], { process_index: number; sum: number }>(
  "testbed_tasks:all_reduce_sum",
);

// Why this suite cannot run here (no torch for /usr/bin/python3), or undefined. Under CI, throws.
const torchMissing = await requireSystemPython("torch.distributed", {
  python: SYSTEM_PYTHON,
  install: "python3-torch",
  purpose: "PyTorch for the accelerate plugin's test-bed suite",
});
const skipReason = torchMissing ?? (await requireTestbed());

describe.skipIf(skipReason !== undefined)(
  "accelerate() across 2 SSH hosts of the test bed (multi-CPU)",
  () => {
    const fixture = useTestbedSshPool({
      homePrefix: "skyward-accelerate-testbed-",
      hosts: 2,
      compute: ({ bed, proxy }) => ({
        provider: SSH({ hosts: testbedSshHosts(bed) }),
        nodes: 2,
        ttl: 0,
        image: { python: SYSTEM_PYTHON, pip: [ACCELERATE_REQUIREMENT], includes: [tasks], env: proxy.env },
        plugins: [accelerate()],
        options: { console: false, bootstrapTimeout: 600 },
      }),
    });

    it("installed accelerate from PyPI through the proxy, and kept Debian's torch", async () => {
      const { pool, bed, proxy } = fixture;
      expect(proxy.requests.map((request) => request.target)).toContain("pypi.org:443");
      expect(proxy.requests.every((request) => request.method === "CONNECT" && request.allowed)).toBe(true);
      const infos = await pool.broadcast(launchInfo());
      for (const info of infos) {
        expect(info.accelerate).toMatch(/^0\.(2\d|3[01])\./);
        // pip took the system site-packages' torch as satisfying accelerate's torch>=1.10.
        expect(info.torch).toMatch(/^1\.13\./);
        expect(info.torch_file.startsWith("/usr/lib/python3/dist-packages/")).toBe(true);
      }
      // The config file the plugin's bootstrap op wrote, with the inferred multi-CPU type.
      for (const host of bed.hosts) {
        expect(JSON.parse(await readFile(join(host.root, "accelerate.json"), "utf8"))).toMatchObject({
          distributed_type: "MULTI_CPU",
          num_processes: 2,
          use_cpu: true,
        });
      }
    });

    it("starts each host's worker under accelerate launch, with one multi-CPU state across both hosts", async () => {
      const { pool, bed } = fixture;
      const infos = await pool.broadcast(launchInfo());
      const head = bed.hosts[0]?.host as string;
      for (const [node, info] of infos.entries()) {
        const venv = join(bed.hosts[node]?.root as string, "venv");
        // The worker's parent is the launcher the plugin built: <venv>/bin/python -m accelerate.commands.launch …
        expect(info.parent_cmdline.slice(1, 3)).toEqual(["-m", "accelerate.commands.launch"]);
        expect(info.parent_cmdline[0]?.startsWith(venv)).toBe(true);
        const flag = (name: string) => info.parent_cmdline[info.parent_cmdline.indexOf(name) + 1];
        expect(flag("--config_file")).toBe(join(bed.hosts[node]?.root as string, "accelerate.json"));
        expect([flag("--num_machines"), flag("--machine_rank"), flag("--main_process_ip")]).toEqual([
          "2",
          String(node),
          head,
        ]);
        expect(info.own_cmdline.some((word) => word.endsWith("skyward_worker.py"))).toBe(true);
        expect([info.process_index, info.num_processes, info.distributed_type, info.backend]).toEqual([
          node,
          2,
          "DistributedType.MULTI_CPU",
          "gloo",
        ]);
        expect(info.env).toMatchObject({ RANK: String(node), WORLD_SIZE: "2", MASTER_ADDR: head });
        expect(info.env.MASTER_PORT).toBe(flag("--main_process_port"));
      }
    });

    it("all-reduces over gloo between the hosts", async () => {
      const { pool } = fixture;
      expect(await pool.broadcast(allReduceSum(2))).toEqual([
        { process_index: 0, sum: 6 },
        { process_index: 1, sum: 6 },
      ]);
    });
  },
);
