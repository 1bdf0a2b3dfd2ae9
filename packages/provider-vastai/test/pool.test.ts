/**
 * A whole pool on Vast.ai, end to end: the provider's search, prepare, rent, key attachment,
 * getInstance, destroy and teardown run against the fake of Vast.ai's API (`fake-vastai.ts`, from the
 * documented shapes, with its rate limit, bid-search prices and paged v1 listing), whose instances are
 * the hosts of a `@skyward/testing` test bed: attaching a key to an instance authorises it on its host,
 * and the instance's public address and the port mapped to 22 are that host's. So the provider's code
 * and the pool's real SSH, bootstrap, worker and dispatch path run together, as the Acme example
 * (`examples/third-party-provider`) does.
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  type TestbedHost,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VastAI } from "../src/index.js";
import { type FakeVast, SCALED_CREATE_LIMITS, startFakeVast, TEST_API_KEY } from "./fake-vastai.js";
import market from "./fixtures/offers.json" with { type: "json" };

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

describe.skipIf(skipReason !== undefined)(
  "a pool on Vast.ai (fake API) whose instances are test-bed hosts",
  () => {
    let bed: Testbed;
    let home: ScratchSkywardHome;
    let fake: FakeVast;
    const hostOf = new Map<number, TestbedHost>();
    let nextHost = 0;
    const original = new Map<TestbedHost, string>();
    const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");

    beforeAll(async () => {
      home = await useScratchSkywardHome("skyward-vastai-pool-");
      // Two nodes, and a third machine for the replacement of an outbid one.
      bed = await createTestbed({ hosts: 3 });
      for (const host of bed.hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
      fake = startFakeVast({
        sshEndpoint: (instance) => {
          // The next free host in turn: a replacement lands on another machine than the one it replaces.
          const taken = new Set(hostOf.values());
          const count = bed.hosts.length;
          const index = Array.from({ length: count }, (_, step) => (nextHost + step) % count).find(
            (candidate) => !taken.has(bed.hosts[candidate] as TestbedHost),
          );
          if (index === undefined) throw new Error("no test-bed host left");
          nextHost = (index + 1) % count;
          const host = bed.hosts[index] as TestbedHost;
          hostOf.set(instance.id, host);
          return { host: host.host, port: host.port };
        },
        onAttachKey: async (instance, key) => {
          const host = hostOf.get(instance.id) as TestbedHost;
          await writeFile(authorizedKeys(host), `${original.get(host)}${key}\n`);
        },
        onDestroy: async (instance) => {
          const host = hostOf.get(instance.id);
          if (host) await writeFile(authorizedKeys(host), original.get(host) ?? "");
          hostOf.delete(instance.id);
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

    it("rents two instances under the create rate limit, runs tasks on both, then destroys them", async () => {
      {
        await using pool = await sky.compute({
          provider: VastAI({
            apiKey: TEST_API_KEY,
            retryDelayMs: 50,
            ...SCALED_CREATE_LIMITS,
            root: `${home.path}/instances/{id}`,
          }),
          accelerator: sky.accelerators.RTX_4090(),
          nodes: 2,
          allocation: "on-demand",
          ttl: 0,
          image: { includes: [tasks] },
          options: { console: false, bootstrapTimeout: 240 },
        });
        const rents = fake.to(/^\/api\/v0\/asks\/\d+\/$/, "PUT");
        // Two asks rented, two instances made; a create the fake's rate limit refused (a loaded
        // machine can pace at the limit's edge) is sent again after the penalty, so count asks.
        expect(new Set(rents.map((request) => request.url.pathname)).size).toBe(2);
        expect(fake.instances.size).toBe(2);
        // The key went to each instance, never to the account.
        expect(fake.accountKeys).toEqual([]);
        expect([...fake.instances.values()].every((instance) => instance.keys.length === 1)).toBe(true);
        const infos = await pool.broadcast(info());
        expect(infos.map((entry) => [entry.node, entry.total_nodes])).toEqual([
          [0, 2],
          [1, 2],
        ]);
        const ids = [...fake.instances.keys()].map(String).sort();
        expect(infos.map((entry) => entry.cwd.split("/instances/")[1]?.split("/")[0]).sort()).toEqual(ids);
        expect(
          await pool.map(add, [
            [1, 2],
            [3, 4],
            [5, 6],
          ]),
        ).toEqual([3, 7, 11]);
      }
      // The pool closed: both instances destroyed, nothing left on the account.
      expect([...fake.instances.values()]).toEqual([]);
      expect(fake.to("/api/v1/instances/", "GET").length).toBeGreaterThanOrEqual(1);
    }, 400_000);

    it("an interruptible instance outbid mid-task is read as preempted on the reconcile tick and replaced", async () => {
      // Vast.ai publishes no advance notice: an outbid interruptible instance is simply stopped
      // (`actual_status` "exited", `intended_status` "stopped"), which the pool reads with getInstance.
      // The machines of instances destroyed before are on the market again.
      fake.rented.clear();
      const journal = join(home.path, "outbid.jsonl");
      const starts = async () =>
        (await readFile(journal, "utf8").catch(() => ""))
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Work);
      const completions = new Map<string, number>();
      {
        await using pool = await sky.compute({
          provider: VastAI({
            apiKey: TEST_API_KEY,
            retryDelayMs: 50,
            ...SCALED_CREATE_LIMITS,
            root: `${home.path}/instances/{id}`,
          }),
          accelerator: sky.accelerators.RTX_4090(),
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
        // Both rented as bids (interruptible instances).
        expect([...fake.instances.values()].map((instance) => instance.body.price)).toEqual([
          expect.any(Number),
          expect.any(Number),
        ]);
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
        const instanceId = pool.nodes()[1]?.instanceId ?? "";
        const victim = fake.instances.get(Number(instanceId));
        const victimHost = hostOf.get(Number(instanceId));
        expect(victim?.state).toBe("running");
        // One more machine of the kind on the market (the fixture has two the search finds; the outbid
        // one's ask is the outbidder's now), for the replacement.
        const ask = market.offers.find(
          (offer) => offer.id === victim?.askId,
        ) as (typeof market.offers)[number];
        market.offers.push({ ...ask, id: 7_100_099, machine_id: ask.machine_id + 90_000 });
        const keys = Array.from({ length: 4 }, (_, index) => `outbid-${index}`);
        const results = Promise.all(keys.map((key) => pool.run(work(key, 3, journal))));
        // Node 1's two slots are busy: then someone outbids it.
        expect(
          await until(async () => (await starts()).filter((entry) => entry.pid === pid).length >= 2, 60_000),
        ).toBe(true);
        (victim as NonNullable<typeof victim>).state = "exited";
        const done = await results;
        expect(done.map((result) => result.key)).toEqual(keys);
        // The two interrupted tasks ran again, on the replacement or on node 0; every result came once.
        const runs = await starts();
        expect(runs.filter((entry) => entry.pid === pid)).toHaveLength(2);
        expect(runs).toHaveLength(6);
        const event = await replaced;
        expect(event).toMatchObject({ node: 1, previousInstanceId: instanceId });
        // Late duplicates would come after the batch: give them a moment.
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect([...completions.values()].every((count) => count === 1)).toBe(true);
        expect(completions.size).toBe(1 + keys.length);
        const reason = `the provider reports its instance ${instanceId} terminated`;
        expect(events.map((entry) => [entry.type, "node" in entry ? entry.node : undefined])).toEqual([
          ["node.preempted", 1],
          ["node.lost", 1],
          ["node.replaced", 1],
        ]);
        expect(events[0]).toMatchObject({ type: "node.preempted", instanceId, reason });
        expect(events[1]).toMatchObject({ type: "node.lost", instanceId, reason });
        // Back to size, node 1 on a new bid on another machine; the outbid instance was destroyed.
        expect(pool.currentNodes()).toBe(2);
        expect((await pool.broadcast(whoami())).map((entry) => entry.node)).toEqual([0, 1]);
        const replacement = pool.nodes()[1]?.instanceId ?? "";
        expect(replacement).not.toBe(instanceId);
        expect(fake.instances.has(Number(instanceId))).toBe(false);
        expect(fake.instances.get(Number(replacement))?.body).toMatchObject({ price: expect.any(Number) });
        expect(hostOf.get(Number(replacement))).not.toBe(victimHost);
        expect(fake.to(`/api/v0/instances/${instanceId}/`, "DELETE")).toHaveLength(1);
      }
      // The pool closed: nothing left on the account.
      expect([...fake.instances.values()]).toEqual([]);
      market.offers.splice(
        market.offers.findIndex((offer) => offer.id === 7_100_099),
        1,
      );
    }, 300_000);
  },
);
