/**
 * A whole pool on GCP, end to end: the provider's offers, prepare, provision, terminate and teardown
 * run against the fake Compute Engine (through Google's client), while each VM is a test-bed host: the
 * fake gives every new VM a test-bed host's address as its external and internal IP, and the
 * `sshAddress` test seam supplies that host's login (the fake's VMs cannot install the pool's key). So
 * the provider's code and the pool's real SSH, bootstrap, worker and dispatch path run together.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  expectDetachAttach,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHost,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GCP, type GcpInstanceAddresses } from "../src/index.js";
import { type FakeGce, fakeGcpSettings, fakeLeftovers, startFakeGce, TEST_ACCESS_TOKEN } from "./fake-gce.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/gcp_tasks.py", import.meta.url));

const info = sky.python<
  [],
  { node: number; total_nodes: number; is_head: boolean; head_addr: string; peers: string[]; cwd: string }
>("gcp_tasks:info");
const add = sky.python<[a: number, b: number], number>("gcp_tasks:add");

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

describe.skipIf(skipReason !== undefined)(
  "a pool on GCP (fake Compute Engine) whose VMs are test-bed hosts",
  () => {
    let fake: FakeGce;
    let bed: Testbed;
    let home: ScratchSkywardHome;

    beforeAll(async () => {
      home = await useScratchSkywardHome("skyward-gcp-pool-");
      fake = await startFakeGce();
      bed = await createTestbed({ hosts: 2 });
      fake.addresses = bed.hosts.map((host) => host.host);
    }, 180_000);

    afterAll(async () => {
      await bed?.teardown();
      await fake?.close();
      await home?.restore();
    });

    /** Where a worker released with ttl 0 leaves its mark (the seam's self-destruct), by host index. */
    const marker = (index: number) => join(home.path, `self-destructed-${index}`);

    /**
     * The provider against the fake, each VM reached on the test-bed host at its address (the seam's
     * mappings are recorded in `mapped`): a new object each call, as another process would make it.
     */
    const gcp = (mapped: GcpInstanceAddresses[] = []) =>
      GCP({
        ...fakeGcpSettings(fake),
        sshAddress: (instance) => {
          const index = bed.hosts.findIndex((host) => host.host === instance.publicIp);
          const host = bed.hosts[index];
          if (!host) throw new Error(`no test-bed host at ${instance.publicIp} for ${instance.id}`);
          mapped.push(instance);
          // Never a deletion of this machine: the worker leaves a mark instead.
          return { ...testbedSshHost(host), privateIp: host.host, selfDestruct: `touch '${marker(index)}'` };
        },
      });

    it("runs tasks on both nodes of a spot pool, then terminate and teardown leave nothing at the fake", async () => {
      const mapped: GcpInstanceAddresses[] = [];
      const provider = gcp(mapped);

      let clusterId = "";
      {
        await using pool = await sky.compute({
          provider,
          nodes: 2,
          vcpus: 2,
          allocation: "spot-if-available",
          ttl: 0,
          image: { includes: [tasks] },
          options: { console: false, bootstrapTimeout: 240 },
        });

        // Two spot VMs of the cheapest CPU machine type, each on its own test-bed host.
        expect(mapped.map((instance) => instance.publicIp).sort()).toEqual(
          bed.hosts.map((host) => host.host).sort(),
        );
        const vms = [...fake.instances.values()];
        expect(vms.map((vm) => (vm.scheduling as { provisioningModel?: string }).provisioningModel)).toEqual([
          "SPOT",
          "SPOT",
        ]);
        expect(vms.map((vm) => String(vm.machineType).split("/").pop())).toEqual([
          "e2-standard-2",
          "e2-standard-2",
        ]);
        clusterId = vms[0]?.labels?.["skyward-cluster"] ?? "";
        expect(fakeLeftovers(fake).filter((entry) => entry.startsWith("firewall"))).toEqual([
          `firewall ${clusterId}-internal`,
          `firewall ${clusterId}-ssh`,
        ]);

        const infos = await pool.broadcast(info());
        expect(infos.map((entry) => entry.node)).toEqual([0, 1]);
        expect(infos.map((entry) => entry.total_nodes)).toEqual([2, 2]);
        expect(infos.map((entry) => entry.is_head)).toEqual([true, false]);
        // Both nodes reach the head on its internal address (a test-bed host's).
        expect(new Set(infos.map((entry) => entry.head_addr)).size).toBe(1);
        expect(bed.hosts.map((host) => host.host)).toContain(infos[0]?.head_addr);
        expect([...(infos[0]?.peers ?? [])].sort()).toEqual(bed.hosts.map((host) => host.host).sort());

        expect(await pool.run(add(2, 3))).toBe(5);
        const pairs: [a: number, b: number][] = [
          [1, 2],
          [3, 4],
          [5, 6],
        ];
        expect(await pool.map(add, pairs)).toEqual([3, 7, 11]);
      }

      // The pool closed: VMs deleted, firewall rules gone.
      expect(clusterId).toMatch(/^sky-[0-9a-f]{8}$/);
      expect(fakeLeftovers(fake)).toEqual([]);
      // Released with ttl 0, each worker ran the provider's self-destruct (the seam's, here) at once.
      expect(await waitUntil(() => existsSync(marker(0)) && existsSync(marker(1)), 30_000)).toBe(true);
    }, 400_000);

    it("a detached pool is attached through a new provider object (its token read again), and close leaves nothing at the fake", async () => {
      await expectDetachAttach({
        spec: { vcpus: 2, allocation: "on-demand" },
        journal: join(home.path, "detach-journal.jsonl"),
        provider: () => gcp(),
        secrets: [TEST_ACCESS_TOKEN],
        leftovers: () => fakeLeftovers(fake),
      });
    }, 300_000);
  },
);
