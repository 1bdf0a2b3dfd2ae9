/**
 * A whole pool on Vast.ai, end to end: the provider's search, prepare, rent, key attachment,
 * getInstance, destroy and teardown run against the fake of Vast.ai's API (`fake-vastai.ts`, from the
 * documented shapes, with its rate limit, bid-search prices and paged v1 listing), whose instances are
 * the hosts of a `@skyward/testing` test bed: attaching a key to an instance authorises it on its host,
 * and the instance's public address and the port mapped to 22 are that host's. So the provider's code
 * and the pool's real SSH, bootstrap, worker and dispatch path run together, as the Acme example
 * (`examples/third-party-provider`) does.
 */
import { join } from "node:path";
import * as sky from "@skyward/core";
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
import { VastAI } from "../src/index.js";
import { type FakeVast, SCALED_CREATE_LIMITS, startFakeVast, TEST_API_KEY } from "./fake-vastai.js";
import market from "./fixtures/offers.json" with { type: "json" };

const skipReason = await requireTestbed();
const { file: tasks, info, add } = poolTasks;

describe.skipIf(skipReason !== undefined)(
  "a pool on Vast.ai (fake API) whose instances are test-bed hosts",
  () => {
    let machines: TestbedMachines<number>;
    let fake: FakeVast;

    beforeAll(async () => {
      // Two nodes, and a third machine for the replacement of an outbid one.
      machines = await startTestbedMachines<number>({ hosts: 3, homePrefix: "skyward-vastai-pool-" });
      const { hosts } = machines;
      fake = startFakeVast({
        sshEndpoint: (instance) => {
          // The next free host in turn: a replacement lands on another machine than the one it replaces.
          const host = hosts.take(instance.id);
          if (!host) throw new Error("no test-bed host left");
          return { host: host.host, port: host.port };
        },
        onAttachKey: (instance, key) => hosts.authorize(instance.id, key),
        onDestroy: (instance) => hosts.release(instance.id),
      });
      fake.server.listen({ onUnhandledFrame: "error" });
    }, 180_000);

    afterAll(async () => {
      fake?.server.close();
      await machines?.[Symbol.asyncDispose]();
    });

    /** The provider against the fake, each instance's Skyward root its own directory of the home. */
    const provider = () =>
      VastAI({
        apiKey: TEST_API_KEY,
        retryDelayMs: 50,
        ...SCALED_CREATE_LIMITS,
        root: `${machines.home.path}/instances/{id}`,
      });

    it("rents two instances under the create rate limit, runs tasks on both, then destroys them", async () => {
      {
        await using pool = await sky.compute({
          provider: provider(),
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
      {
        await using pool = await sky.compute({
          provider: provider(),
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
        let victimHost: TestbedHost | undefined;
        const { victim: instanceId, replacement } = await expectPreemptedNodeReplaced(pool, {
          journal: join(machines.home.path, "outbid.jsonl"),
          keyPrefix: "outbid",
          preempt: (id) => {
            const victim = fake.instances.get(Number(id));
            victimHost = machines.hosts.hostOf(Number(id));
            expect(victim?.state).toBe("running");
            // One more machine of the kind on the market (the fixture has two the search finds; the
            // outbid one's ask is the outbidder's now), for the replacement.
            const ask = market.offers.find(
              (offer) => offer.id === victim?.askId,
            ) as (typeof market.offers)[number];
            market.offers.push({ ...ask, id: 7_100_099, machine_id: ask.machine_id + 90_000 });
            // Node 1's two slots are busy: then someone outbids it.
            (victim as NonNullable<typeof victim>).state = "exited";
          },
        });
        // Node 1 on a new bid on another machine; the outbid instance was destroyed.
        expect(fake.instances.has(Number(instanceId))).toBe(false);
        expect(fake.instances.get(Number(replacement))?.body).toMatchObject({ price: expect.any(Number) });
        expect(machines.hosts.hostOf(Number(replacement))).not.toBe(victimHost);
        expect(fake.to(`/api/v0/instances/${instanceId}/`, "DELETE")).toHaveLength(1);
      }
      // The pool closed: nothing left on the account.
      expect([...fake.instances.values()]).toEqual([]);
      market.offers.splice(
        market.offers.findIndex((offer) => offer.id === 7_100_099),
        1,
      );
    }, 300_000);

    it("a detached pool is attached through a new provider object (its key read again), and close leaves no instance", async () => {
      // The machines of instances destroyed before are on the market again.
      fake.rented.clear();
      await expectDetachAttach({
        spec: { accelerator: sky.accelerators.RTX_4090(), allocation: "on-demand" },
        journal: join(machines.home.path, "detach-journal.jsonl"),
        provider,
        secrets: [TEST_API_KEY],
        leftovers: () => [...fake.instances.values()],
      });
    }, 300_000);
  },
);
