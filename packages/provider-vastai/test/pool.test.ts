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
import { type FakeVast, startFakeVast, TEST_API_KEY } from "./fake-vastai.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const info = sky.python<
  [],
  { node: number; total_nodes: number; head_addr: string; peers: string[]; cwd: string }
>("pool_tasks:info");
const add = sky.python<[a: number, b: number], number>("pool_tasks:add");

describe.skipIf(skipReason !== undefined)(
  "a pool on Vast.ai (fake API) whose instances are test-bed hosts",
  () => {
    let bed: Testbed;
    let home: ScratchSkywardHome;
    let fake: FakeVast;
    const hostOf = new Map<number, TestbedHost>();
    const original = new Map<TestbedHost, string>();
    const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");

    beforeAll(async () => {
      home = await useScratchSkywardHome("skyward-vastai-pool-");
      bed = await createTestbed({ hosts: 2 });
      for (const host of bed.hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
      fake = startFakeVast({
        sshEndpoint: (instance) => {
          const taken = new Set(hostOf.values());
          const host = bed.hosts.find((candidate) => !taken.has(candidate));
          if (!host) throw new Error("no test-bed host left");
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
            // The fake's create limit is the real one (4.5 s, 12 s penalty) scaled 1:100: so is the provider's.
            createIntervalMs: 45,
            rateLimitPenaltyMs: 120,
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
        expect(rents).toHaveLength(2);
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
  },
);
