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
type Work = { key: string; node: number; pid: number };
const work = sky.python<[string, number, string], Work>("pool_tasks:work");
const whoami = sky.python<[], { node: number; pid: number }>("pool_tasks:whoami");

async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

describe.skipIf(skipReason !== undefined)("a pool on RunPod (fake API) whose pods are test-bed hosts", () => {
  let bed: Testbed;
  let home: ScratchSkywardHome;
  let fake: FakeRunPod;
  const hostOf = new Map<string, TestbedHost>();
  let nextHost = 0;
  const original = new Map<TestbedHost, string>();
  const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-runpod-pool-");
    // Two nodes, and a third machine for the replacement of a reclaimed one.
    bed = await createTestbed({ hosts: 3 });
    for (const host of bed.hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
    const freeHost = (pod: FakePod) => {
      // The next free host in turn: a replacement lands on another machine than the one it replaces.
      const taken = new Set(hostOf.values());
      const count = bed.hosts.length;
      const index = Array.from({ length: count }, (_, step) => (nextHost + step) % count).find(
        (candidate) => !taken.has(bed.hosts[candidate] as TestbedHost),
      );
      if (index === undefined) throw new Error("no test-bed host left");
      nextHost = (index + 1) % count;
      const host = bed.hosts[index] as TestbedHost;
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

  it("an interruptible pod reclaimed mid-task is read as preempted on the reconcile tick and replaced", async () => {
    // RunPod publishes no advance notice: a reclaimed interruptible pod is EXITED, read with getInstance.
    const journal = join(home.path, "reclaimed.jsonl");
    const starts = async () =>
      (await readFile(journal, "utf8").catch(() => ""))
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Work);
    const completions = new Map<string, number>();
    {
      await using pool = await sky.compute({
        provider: RunPod({ apiKey: TEST_API_KEY, retryDelayMs: 50, root: `${home.path}/pods/{id}` }),
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
      const events: sky.SkywardEvent[] = [];
      for (const type of ["node.preempted", "node.lost", "node.replaced"] as const)
        pool.on(type, (event) => events.push(event));
      pool.on("task.completed", (event) => {
        completions.set(event.taskId, (completions.get(event.taskId) ?? 0) + 1);
      });
      const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => {
        const off = pool.on("node.replaced", (event) => {
          off();
          resolve(event);
        });
      });
      const { pid } = await pool.run(whoami(), { target: 1 });
      const podId = pool.nodes()[1]?.instanceId ?? "";
      const victim = fake.pods.get(podId) as FakePod;
      const victimHost = hostOf.get(podId);
      expect(victim.status).toBe("RUNNING");
      const keys = Array.from({ length: 4 }, (_, index) => `reclaimed-${index}`);
      const results = Promise.all(keys.map((key) => pool.run(work(key, 3, journal))));
      expect(
        await until(async () => (await starts()).filter((entry) => entry.pid === pid).length >= 2, 60_000),
      ).toBe(true);
      victim.status = "EXITED";
      const done = await results;
      expect(done.map((result) => result.key)).toEqual(keys);
      const runs = await starts();
      expect(runs.filter((entry) => entry.pid === pid)).toHaveLength(2);
      expect(runs).toHaveLength(6);
      expect(await replaced).toMatchObject({ node: 1, previousInstanceId: podId });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect([...completions.values()].every((count) => count === 1)).toBe(true);
      expect(completions.size).toBe(1 + keys.length);
      const reason = `the provider reports its instance ${podId} terminated`;
      expect(events.map((entry) => [entry.type, "node" in entry ? entry.node : undefined])).toEqual([
        ["node.preempted", 1],
        ["node.lost", 1],
        ["node.replaced", 1],
      ]);
      expect(events[0]).toMatchObject({ type: "node.preempted", instanceId: podId, reason });
      expect(pool.currentNodes()).toBe(2);
      expect((await pool.broadcast(whoami())).map((entry) => entry.node)).toEqual([0, 1]);
      const replacement = pool.nodes()[1]?.instanceId ?? "";
      expect(replacement).not.toBe(podId);
      expect(fake.pods.get(replacement)?.spot).toBe(true);
      expect(hostOf.get(replacement)).not.toBe(victimHost);
    }
    expect([...fake.pods.values()].filter((pod) => pod.status !== "TERMINATED")).toEqual([]);
  }, 300_000);

  it("a detached pool is attached through a new provider object (its key read again), and close leaves no pod", async () => {
    const runpod = () => RunPod({ apiKey: TEST_API_KEY, retryDelayMs: 50, root: `${home.path}/pods/{id}` });
    const journal = `${home.path}/detach-journal.jsonl`;
    const pool = await sky.compute({
      provider: runpod(),
      accelerator: sky.accelerators.A100(),
      nodes: 1,
      allocation: "on-demand",
      ttl: 60,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240 },
    });
    const [before] = await pool.broadcast(whoami());
    const pending = pool.run(work("detached", 1.5, journal)).then(
      (value) => value.key,
      (error: Error) => error.name,
    );
    await until(async () => (await readFile(journal, "utf8").catch(() => "")).includes('"detached"'), 30_000);
    const id = await pool.detach();
    expect(await pending).toBe("CancelledError");
    const state = await readFile(`${process.env.SKYWARD_HOME}/pools/${id}.json`, "utf8");
    expect(state).not.toContain(TEST_API_KEY);
    expect(state).not.toMatch(/PRIVATE KEY|privateKey/);
    {
      await using again = await sky.attach(id, { provider: runpod(), options: { console: false } });
      const [outcome] = await again.collected();
      expect(outcome).toMatchObject({ ok: true, value: { key: "detached", pid: before?.pid } });
      expect(await again.broadcast(whoami())).toEqual([before]);
      // Detached again (as `skyward attach` without --close does), and attached once more.
      expect(await again.detach()).toBe(id);
    }
    {
      await using third = await sky.attach(id, { provider: runpod(), options: { console: false } });
      expect(await third.collected()).toEqual([]);
      expect(await third.broadcast(whoami())).toEqual([before]);
    }
    expect([...fake.pods.values()].filter((pod) => pod.status !== "TERMINATED")).toEqual([]);
  }, 300_000);
});
