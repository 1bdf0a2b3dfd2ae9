/**
 * A whole pool on AWS, end to end: the provider's offers, prepare, provision, terminate and teardown
 * run against moto, while each "EC2 instance" is reached over real SSH on a test-bed host (the
 * `sshAddress` test seam maps one onto the other). So the provider's code and the pool's real SSH,
 * bootstrap, worker and dispatch path run together. moto's key pair cannot log in to a test-bed host,
 * so the seam supplies the host's own key, user, root directory and host key fingerprint.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, type Testbed, testbedSshHost } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, type AwsInstanceAddresses, type SshAddressMapping } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const tasks = fileURLToPath(new URL("./fixtures/aws_tasks.py", import.meta.url));

const info = sky.python<
  [],
  { node: number; total_nodes: number; is_head: boolean; head_addr: string; peers: string[]; cwd: string }
>("aws_tasks:info");
const add = sky.python<[a: number, b: number], number>("aws_tasks:add");

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

describe.skipIf(skipReason !== undefined)("a pool on AWS (moto) whose instances are test-bed hosts", () => {
  const suite = useMotoSuite("skyward-aws-pool-");
  let bed: Testbed;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
  }, 180_000);

  afterAll(async () => {
    await bed?.teardown();
  });

  it("runs tasks on both nodes, then terminate and teardown leave nothing at moto", async () => {
    // Each new EC2 instance gets the next free test-bed host.
    const assigned = new Map<string, number>();
    const mapped: AwsInstanceAddresses[] = [];
    const scratch = suite.home.path;
    const marker = (index: number) => join(scratch, `self-destructed-${index}`);
    const provider = AWS({
      endpoint: suite.moto.endpoint,
      sshAddress: (instance): SshAddressMapping => {
        let index = assigned.get(instance.id);
        if (index === undefined) {
          index = assigned.size;
          assigned.set(instance.id, index);
          mapped.push(instance);
        }
        const host = bed.hosts[index];
        if (!host) throw new Error(`no test-bed host left for ${instance.id}`);
        return {
          ...testbedSshHost(host),
          privateIp: host.host,
          // Never a shutdown of this machine: the worker leaves a mark instead.
          selfDestruct: `touch '${marker(index)}'`,
        };
      },
    });

    let clusterTag = "";
    {
      await using pool = await sky.compute({
        provider,
        nodes: 2,
        vcpus: 2,
        memoryGb: 4,
        architecture: "x86_64",
        allocation: "spot-if-available",
        ttl: 0,
        image: { includes: [tasks] },
        options: { console: false, bootstrapTimeout: 240 },
      });

      // Two moto instances, each mapped onto its own test-bed host.
      expect(mapped).toHaveLength(2);
      expect(mapped.every((instance) => /^i-[0-9a-f]+$/.test(instance.id))).toBe(true);
      expect(mapped.every((instance) => instance.publicIp !== null && instance.privateIp !== null)).toBe(
        true,
      );
      const live = await motoInventory(suite.moto.endpoint);
      expect(live.liveInstances.sort()).toEqual(mapped.map((instance) => instance.id).sort());
      expect(live.securityGroups).toHaveLength(1);
      expect(live.keyPairs).toHaveLength(1);
      clusterTag = live.keyPairs[0]?.replace(/^skyward-/, "") ?? "";

      const infos = await pool.broadcast(info());
      expect(infos.map((entry) => entry.node)).toEqual([0, 1]);
      expect(infos.map((entry) => entry.total_nodes)).toEqual([2, 2]);
      expect(infos.map((entry) => entry.is_head)).toEqual([true, false]);
      // Other nodes reach the head on the seam's private address (the test-bed host's).
      expect(new Set(infos.map((entry) => entry.head_addr))).toEqual(new Set([bed.hosts[0]?.host]));
      expect(infos[0]?.peers).toEqual(bed.hosts.map((host) => host.host));
      expect(infos.map((entry) => entry.cwd)).toEqual(bed.hosts.map((host) => `${host.root}/work`));

      expect(await pool.run(add(2, 3))).toBe(5);
      const pairs: [a: number, b: number][] = [
        [1, 2],
        [3, 4],
        [5, 6],
      ];
      expect(await pool.map(add, pairs)).toEqual([3, 7, 11]);
    }

    // The pool closed: instances terminated (their tagged volumes with them), security group and key
    // pair gone, the key file too.
    expect(clusterTag).toMatch(/^sky-[0-9a-f]{8}$/);
    const left = await motoInventory(suite.moto.endpoint);
    expect(left).toEqual({ liveInstances: [], securityGroups: [], keyPairs: [], skywardVolumes: [] });
    expect(existsSync(join(scratch, "keys", `skyward-${clusterTag}.pem`))).toBe(false);
    // Released with ttl 0, each worker ran the provider's self-destruct (the seam's, here) at once.
    expect(await waitUntil(() => existsSync(marker(0)) && existsSync(marker(1)), 30_000)).toBe(true);
  }, 400_000);
});
