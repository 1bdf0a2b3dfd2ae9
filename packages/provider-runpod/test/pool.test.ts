/**
 * A whole pool on RunPod, end to end: the provider's offers, prepare, provision, getInstance,
 * terminate and teardown run against the fake of RunPod's API (`fake-runpod.ts`, from RunPod's
 * documented v2 shapes), whose pods are the hosts of a `@skyward/testing` test bed: creating a pod
 * authorises its `PUBLIC_KEY` on a free host, as RunPod's images do, and its direct SSH endpoint and
 * global-networking address are that host's. So the provider's code and the pool's real SSH, bootstrap,
 * worker and dispatch path run together, as the Acme example (`examples/third-party-provider`) does.
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { Plugin } from "@skyward/core/contract";
import {
  createTestbed,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  type TestbedHost,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunPod } from "../src/index.js";
import { type FakePod, type FakeRunPod, startFakeRunPod, TEST_API_KEY } from "./fake-runpod.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const info = sky.python<
  [],
  { node: number; total_nodes: number; head_addr: string; peers: string[]; cwd: string }
>("pool_tasks:info");
const add = sky.python<[a: number, b: number], number>("pool_tasks:add");

describe.skipIf(skipReason !== undefined)("a pool on RunPod (fake API) whose pods are test-bed hosts", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome;
  let fake: FakeRunPod;
  const hostOf = new Map<string, TestbedHost>();
  const original = new Map<TestbedHost, string>();
  const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-runpod-pool-");
    bed = await createTestbed({ hosts: 2 });
    for (const host of bed.hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
    const freeHost = (pod: FakePod) => {
      const taken = new Set(hostOf.values());
      const host = bed.hosts.find((candidate) => !taken.has(candidate));
      if (!host) throw new Error("no test-bed host left");
      hostOf.set(pod.id, host);
      return host;
    };
    fake = startFakeRunPod({
      sshEndpoint: (pod) => {
        const host = freeHost(pod);
        return { host: host.host, port: host.port, privateIp: host.host };
      },
      onCreate: async (pod) => {
        const host = hostOf.get(pod.id) as TestbedHost;
        await writeFile(authorizedKeys(host), `${original.get(host)}${pod.env.PUBLIC_KEY}\n`);
      },
      onTerminate: async (pod) => {
        const host = hostOf.get(pod.id);
        if (host) await writeFile(authorizedKeys(host), original.get(host) ?? "");
        hostOf.delete(pod.id);
      },
    });
    fake.server.listen({ onUnhandledFrame: "error" });
  }, 180_000);

  afterAll(async () => {
    fake?.server.close();
    for (const [host, text] of original) await writeFile(authorizedKeys(host), text);
    await bed?.teardown();
    await home?.[Symbol.asyncDispose]();
  });

  it("runs tasks on two GPU pods joined by global networking, then leaves no pod", async () => {
    {
      await using pool = await sky.compute({
        provider: RunPod({ apiKey: TEST_API_KEY, retryDelayMs: 50, root: `${home.path}/pods/{id}` }),
        accelerator: sky.accelerators.A100(),
        nodes: 2,
        allocation: "on-demand",
        ttl: 0,
        // A plugin whose workers meet at a rendezvous: the pods must reach one another.
        plugins: [Plugin.create("rendezvous").withPeerNetwork()],
        image: { includes: [tasks] },
        options: { console: false, bootstrapTimeout: 240 },
      });
      // The cheapest offer (community cloud) is stocked only where there is no global networking: the
      // pool moved on to the secure cloud. Two v2 pods, each on a test-bed host, both on the network.
      const creates = fake.to("/v2/pods", "POST");
      expect(creates).toHaveLength(2);
      for (const request of creates)
        expect(request.body).toMatchObject({ globalNetworking: true, gpu: { minCudaVersion: "12.9" } });
      const infos = await pool.broadcast(info());
      expect(infos.map((entry) => [entry.node, entry.total_nodes])).toEqual([
        [0, 2],
        [1, 2],
      ]);
      // Peers meet the head at its global-networking address (the fake hands out the host's).
      const pods = [...fake.pods.values()];
      const head = pods.find((pod) => infos[0]?.cwd.startsWith(`${home.path}/pods/${pod.id}`));
      expect(new Set(infos.map((entry) => entry.head_addr))).toEqual(new Set([head?.privateIp]));
      expect(infos.map((entry) => entry.cwd.split("/pods/")[1]?.split("/")[0]).sort()).toEqual(
        pods.map((pod) => pod.id).sort(),
      );
      expect(
        await pool.map(add, [
          [1, 2],
          [3, 4],
          [5, 6],
        ]),
      ).toEqual([3, 7, 11]);
    }
    // The pool closed: every pod terminated through v2, none left.
    expect([...fake.pods.values()]).toEqual([]);
    expect(fake.to(/^\/v2\/pods\/[^/]+$/, "DELETE").length).toBeGreaterThanOrEqual(2);
  }, 400_000);
});
