/**
 * The provider conformance suite of `@skyward/testing`, run against the Verda provider talking to the
 * fake of Verda's API (`fake-verda.ts`): offers and the lifecycle for CPU instances (the suite's
 * default spec) and for GPU instances; then, with the fake's instances lent from a test bed, a real
 * pool whose workers run on those SSH hosts.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as sky from "@skyward/core";
import {
  eventually,
  expectDetachAttach,
  poolTasks,
  requireTestbed,
  runFaultMatrix,
  runProviderConformance,
  testbedStandIn,
  useFakeApi,
} from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { Verda } from "../src/index.js";
import { startFakeVerda, TEST_CLIENT_ID, TEST_CLIENT_SECRET } from "./fake-verda.js";

const { file: tasks, info, add } = poolTasks;
const credentials = { clientId: TEST_CLIENT_ID, clientSecret: TEST_CLIENT_SECRET, retryDelayMs: 1 };

describe("without hosts", () => {
  const api = useFakeApi({ start: () => startFakeVerda(), prefix: "skyward-verda-conformance-" });
  const create = () => Verda({ ...credentials, apiUrl: api.fake.apiUrl, keysDirectory: api.keysDirectory });

  runProviderConformance({
    name: "verda, CPU instances",
    create,
    leftovers: () => api.fake.leftovers(),
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    timeoutMs: 20_000,
  });

  runProviderConformance({
    name: "verda, GPU instances",
    create,
    leftovers: () => api.fake.leftovers(),
    spec: { accelerator: sky.accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
    supports: { accelerator: "A100" },
    provisionCount: 2,
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    timeoutMs: 20_000,
  });

  runFaultMatrix({
    name: "verda",
    create,
    faults: () => ({
      // A discontinued instance bills nothing more (its OS volume goes with it, `on_spot_discontinue`).
      live: () =>
        [...api.fake.instances.values()]
          .filter((instance) => instance.status !== "discontinued")
          .map((instance) => ({ id: instance.id, hourlyPrice: instance.price_per_hour })),
      created: () => api.fake.switches.created,
      rateLimitNext: (count, seconds) => api.fake.switches.rateLimitNext(count, seconds),
      loseNextCreateAnswer: () => {
        api.fake.faults.loseNextDeployAnswer = true;
      },
      partialDeleteNext: () => api.fake.switches.partialDeleteNext(),
      refuseDeleteWhileProvisioning: (count) => api.fake.switches.refuseDeleteWhileProvisioning(count),
      breakListShape: (broken) => api.fake.switches.breakListShape(broken),
      reclaim: (id) => api.fake.discontinue(id),
      fireBootWatchdogs: () => api.fake.fireBootWatchdogs(),
    }),
    spec: { accelerator: sky.accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
    clientKilled: "boot-watchdog",
    timeoutMs: 30_000,
  });
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  describe("on test-bed hosts", () => {
    const api = useFakeApi({
      start: (hosts) => startFakeVerda({ hosts }),
      prefix: "skyward-verda-pool-",
      hosts: 2,
    });
    /** When set, a released worker's self-destruct touches `<marker>-<host index>` instead of doing nothing. */
    let marker: string | undefined;

    /** The provider, each instance reached on the test-bed host the fake lent it (by its address). */
    const create = () =>
      Verda({
        ...credentials,
        apiUrl: api.fake.apiUrl,
        keysDirectory: api.keysDirectory,
        // Never the real self-destruct on this machine: the stand-in host is not the instance.
        sshAddress: ({ ip }) => testbedStandIn(api.bed.hosts, ip, marker),
      });

    runProviderConformance({
      name: "verda, a pool on test-bed hosts",
      create,
      leftovers: () => api.fake.leftovers(),
      spec: { region: "FIN-01" },
      provisionCount: 2,
      unknownInstanceId: "00000000-0000-4000-8000-000000000000",
      pool: { image: { includes: [tasks] }, options: { bootstrapTimeout: 240 } },
    });

    it("runs tasks on both instances, each on its own host, and deletes them and the SSH key when it closes", async () => {
      const { fake, bed } = api;
      marker = join(api.keysDirectory, `self-destructed-${Date.now()}`);
      {
        await using pool = await sky.compute({
          provider: create(),
          nodes: 2,
          allocation: "spot-if-available",
          image: { includes: [tasks] },
          ttl: 0,
          options: { console: false, bootstrapTimeout: 240 },
        });
        const seen = await pool.broadcast(info());
        expect(seen.map((entry) => [entry.node, entry.total_nodes])).toEqual([
          [0, 2],
          [1, 2],
        ]);
        expect(seen.map((entry) => entry.cwd).sort()).toEqual(
          bed.hosts.map((host) => `${host.root}/work`).sort(),
        );
        expect(
          await pool.map(add, [
            [1, 2],
            [3, 4],
          ]),
        ).toEqual([3, 7]);
        // Two spot CPU instances in FIN-01, deployed with the pool's SSH key.
        const instances = [...fake.instances.values()];
        expect(
          instances.map((instance) => [instance.instance_type, instance.is_spot, instance.location]),
        ).toEqual([
          ["CPU.4V.16G", true, "FIN-01"],
          ["CPU.4V.16G", true, "FIN-01"],
        ]);
        expect(fake.sshKeys.size).toBe(1);
        expect(instances.every((instance) => instance.ssh_key_ids[0] === [...fake.sshKeys.keys()][0])).toBe(
          true,
        );
      }
      expect(fake.leftovers()).toEqual([]);
      // Released with ttl 0, each worker ran the provider's self-destruct (the seam's, here) at once.
      const markers = [0, 1].map((index) => `${marker}-${index}`);
      expect(await eventually(() => markers.every((file) => existsSync(file)), 30_000)).toBe(true);
    });

    it("a detached pool is attached through a new provider object (its credentials read again), and close leaves nothing", async () => {
      await expectDetachAttach({
        journal: join(api.keysDirectory, "detach-journal.jsonl"),
        provider: create,
        secrets: [TEST_CLIENT_SECRET],
        leftovers: () => api.fake.leftovers(),
      });
    }, 300_000);
  });
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the Verda provider on the test bed: ${skipReason}`, () => {});
}
