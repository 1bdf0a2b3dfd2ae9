/**
 * jax.distributed across two SSH hosts of the test bed (network namespaces with real sshd): the
 * pool bootstraps each host over SSH, pip installs JAX from PyPI through the test bed's PyPI proxy
 * (the hosts have no other way out), and the two workers form one JAX runtime whose CPU collectives
 * (gloo) run between the hosts' private addresses.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import { requireTestbed, testbedSshHosts, useTestbedSshPool } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { jax } from "../src/index.js";

/** Debian's interpreter, as the other test-bed suites use; JAX itself comes from PyPI. */
const SYSTEM_PYTHON = "/usr/bin/python3";
const tasks = fileURLToPath(new URL("./fixtures/jax_tasks.py", import.meta.url));

interface DistributedInfo {
  head_port: number;
  process_index: number;
  process_count: number;
  devices: number;
  local_devices: number;
  env: Record<string, string | null>;
  pid: number;
}

const distributedInfo = sky.python<[], DistributedInfo>("jax_tasks:distributed_info");
const globalSum = sky.python<[number], { process_index: number; sum: number; gathered: number[] }>(
  "jax_tasks:global_sum",
);

const skipReason = await requireTestbed();

describe.skipIf(skipReason !== undefined)("jax() across 2 SSH hosts of the test bed (CPU)", () => {
  const fixture = useTestbedSshPool({
    homePrefix: "skyward-jax-testbed-",
    hosts: 2,
    compute: ({ bed, proxy }) => ({
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: 2,
      ttl: 0,
      image: { python: SYSTEM_PYTHON, includes: [tasks], env: proxy.env },
      plugins: [jax({ cuda: "cpu" })],
      options: { console: false, bootstrapTimeout: 600 },
    }),
  });

  it("installed JAX from PyPI through the proxy, which opened tunnels to PyPI only", () => {
    const { proxy } = fixture;
    expect(proxy.requests.length).toBeGreaterThan(0);
    expect(proxy.requests.every((request) => request.method === "CONNECT" && request.allowed)).toBe(true);
    expect(proxy.requests.map((request) => request.target)).toContain("pypi.org:443");
  });

  it("makes one JAX runtime of both hosts' workers, coordinated at the head host's address", async () => {
    const { pool, bed } = fixture;
    const infos = await pool.broadcast(distributedInfo());
    expect(
      infos.map((info) => [info.process_index, info.process_count, info.devices, info.local_devices]),
    ).toEqual([
      [0, 2, 2, 1],
      [1, 2, 2, 1],
    ]);
    const headPort = infos[0]?.head_port ?? 0;
    expect(headPort).toBeGreaterThan(0);
    for (const [node, info] of infos.entries()) {
      expect(info.env).toEqual({
        JAX_COORDINATOR_ADDRESS: `${bed.hosts[0]?.host}:${headPort + 1}`,
        JAX_NUM_PROCESSES: "2",
        JAX_PROCESS_ID: String(node),
        JAX_LOCAL_DEVICE_COUNT: "1",
      });
    }
  });

  it("computes across the hosts: a sum over a globally sharded array, and an all-gather", async () => {
    expect(await fixture.pool.broadcast(globalSum(1.5))).toEqual([
      { process_index: 0, sum: 4.5, gathered: [0, 1] },
      { process_index: 1, sum: 4.5, gathered: [0, 1] },
    ]);
  });
});
