/**
 * A whole pool on RunPod, end to end: the provider's offers, prepare, provision, getInstance,
 * terminate and teardown run against the fake of RunPod's API (`fake-runpod.ts`, from RunPod's
 * documented v2 shapes), whose pods are the hosts of a `@skyward/testing` test bed: creating a pod
 * authorises its `PUBLIC_KEY` on a free host, as RunPod's images do, and its direct SSH endpoint and
 * global-networking address are that host's. So the provider's code and the pool's real SSH, bootstrap,
 * worker and dispatch path run together, as the Acme example (`examples/third-party-provider`) does.
 */
import { join } from "node:path";
import * as sky from "@skyward/core";
import { Plugin } from "@skyward/core/contract";
import {
  expectDetachAttach,
  expectPreemptedNodeReplaced,
  poolTasks,
  requireTestbed,
  startTestbedMachines,
  type TestbedHost,
  type TestbedMachines,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunPod } from "../src/index.js";
import { type FakePod, type FakeRunPod, startFakeRunPod, TEST_API_KEY } from "./fake-runpod.js";

const skipReason = await requireTestbed();
const { file: tasks, info, add } = poolTasks;

describe.skipIf(skipReason !== undefined)("a pool on RunPod (fake API) whose pods are test-bed hosts", () => {
  let machines: TestbedMachines<string>;
  let fake: FakeRunPod;

  beforeAll(async () => {
    // Two nodes, and a third machine for the replacement of a reclaimed one.
    machines = await startTestbedMachines<string>({ hosts: 3, homePrefix: "skyward-runpod-pool-" });
    const { hosts } = machines;
    fake = startFakeRunPod({
      sshEndpoint: (pod) => {
        // The next free host in turn: a replacement lands on another machine than the one it replaces.
        const host = hosts.take(pod.id);
        if (!host) throw new Error("no test-bed host left");
        return { host: host.host, port: host.port, privateIp: host.host };
      },
      onCreate: (pod) => hosts.authorize(pod.id, String(pod.env.PUBLIC_KEY)),
      onTerminate: (pod) => hosts.release(pod.id),
    });
    fake.server.listen({ onUnhandledFrame: "error" });
  }, 180_000);

  afterAll(async () => {
    fake?.server.close();
    await machines?.[Symbol.asyncDispose]();
  });

  /** The provider against the fake, each pod's Skyward root its own directory of the home. */
  const provider = () =>
    RunPod({ apiKey: TEST_API_KEY, retryDelayMs: 50, root: `${machines.home.path}/pods/{id}` });

  it("runs tasks on two GPU pods joined by global networking, then leaves no pod", async () => {
    {
      await using pool = await sky.compute({
        provider: provider(),
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
      const head = pods.find((pod) => infos[0]?.cwd.startsWith(`${machines.home.path}/pods/${pod.id}`));
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

  it("an interruptible pod reclaimed mid-task is read as preempted on the reconcile tick and replaced", async () => {
    // RunPod publishes no advance notice: a reclaimed interruptible pod is EXITED, read with getInstance.
    {
      await using pool = await sky.compute({
        provider: provider(),
        accelerator: sky.accelerators.A100(),
        nodes: 2,
        allocation: "spot",
        ttl: 0,
        image: { includes: [tasks] },
        options: {
          console: false,
          bootstrapTimeout: 240,
          worker: { concurrency: 2 },
          reconcileTickInterval: 1,
        },
      });
      expect(
        [...fake.pods.values()].filter((pod) => pod.status === "RUNNING").map((pod) => pod.spot),
      ).toEqual([true, true]);
      let victimHost: TestbedHost | undefined;
      const { replacement } = await expectPreemptedNodeReplaced(pool, {
        journal: join(machines.home.path, "reclaimed.jsonl"),
        keyPrefix: "reclaimed",
        preempt: (podId) => {
          const victim = fake.pods.get(podId) as FakePod;
          victimHost = machines.hosts.hostOf(podId);
          expect(victim.status).toBe("RUNNING");
          victim.status = "EXITED";
        },
      });
      expect(fake.pods.get(replacement)?.spot).toBe(true);
      expect(machines.hosts.hostOf(replacement)).not.toBe(victimHost);
    }
    expect([...fake.pods.values()].filter((pod) => pod.status !== "TERMINATED")).toEqual([]);
  }, 300_000);

  it("a detached pool is attached through a new provider object (its key read again), and close leaves no pod", async () => {
    await expectDetachAttach({
      spec: { accelerator: sky.accelerators.A100(), allocation: "on-demand" },
      journal: join(machines.home.path, "detach-journal.jsonl"),
      provider,
      secrets: [TEST_API_KEY],
      leftovers: () => [...fake.pods.values()].filter((pod) => pod.status !== "TERMINATED"),
    });
  }, 300_000);
});
