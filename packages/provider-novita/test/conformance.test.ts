/**
 * The provider conformance suite of `@skyward/testing`, run against the Novita provider talking to the
 * fake of Novita's API (`fake-novita.ts`): offers and the lifecycle for GPU instances; then, with the
 * fake's instances lent from a test bed, a real pool whose workers run on those SSH hosts.
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
import { Novita } from "../src/index.js";
import { startFakeNovita, TEST_API_KEY } from "./fake-novita.js";

const { file: tasks, info } = poolTasks;

describe("without hosts", () => {
  const api = useFakeApi({ start: () => startFakeNovita(), prefix: "skyward-novita-conformance-" });

  const create = () =>
    Novita({
      apiKey: TEST_API_KEY,
      apiUrl: api.fake.apiUrl,
      keysDirectory: api.keysDirectory,
      retryDelayMs: 1,
    });

  runProviderConformance({
    name: "novita, GPU instances",
    create,
    leftovers: () => api.fake.leftovers(),
    spec: { accelerator: sky.accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
    supports: { accelerator: "A100" },
    provisionCount: 2,
    unknownInstanceId: "ffffffffffffffff",
    timeoutMs: 20_000,
  });

  runFaultMatrix({
    name: "novita",
    create,
    faults: () => ({
      live: () =>
        [...api.fake.instances.values()].map((instance) => ({
          id: instance.id,
          hourlyPrice: Number(instance.instancePrice) / 100_000,
        })),
      created: () => api.fake.switches.created,
      rateLimitNext: (count, seconds) => api.fake.switches.rateLimitNext(count, seconds),
      loseNextCreateAnswer: () => {
        api.fake.faults.loseNextCreateAnswer = true;
      },
      breakListShape: (broken) => api.fake.switches.breakListShape(broken),
      reclaim: (id) => api.fake.reclaim(id),
      fireBootWatchdogs: () => api.fake.fireBootWatchdogs(),
    }),
    spec: { accelerator: sky.accelerators.RTX_4090(), allocation: "spot-if-available" },
    notApplicable: {
      "partial-delete":
        "Novita deletes one instance a call (POST /gpu/instance/delete); there is no batch to answer 207",
      "delete-refused-while-provisioning":
        "Novita's Delete Instance reference documents no refusal to delete an instance still starting",
    },
    clientKilled: "boot-watchdog",
    timeoutMs: 30_000,
  });
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  describe("on test-bed hosts", () => {
    const api = useFakeApi({
      start: (hosts) => startFakeNovita({ hosts }),
      prefix: "skyward-novita-pool-",
      hosts: 2,
    });
    /** When set, a released worker's self-destruct touches `<marker>-<host index>` instead of doing nothing. */
    let marker: string | undefined;

    /** The provider, each instance reached on the test-bed host behind its port mapping. */
    const create = (dockerImage?: sky.DockerImage) =>
      Novita({
        apiKey: TEST_API_KEY,
        apiUrl: api.fake.apiUrl,
        keysDirectory: api.keysDirectory,
        ...(dockerImage ? { dockerImage } : {}),
        // Never the real self-destruct on this machine: the stand-in host is not the instance.
        sshAddress: ({ host }) => testbedStandIn(api.bed.hosts, host, marker),
      });

    runProviderConformance({
      name: "novita, a pool on test-bed hosts",
      create: () => create(),
      leftovers: () => api.fake.leftovers(),
      spec: { accelerator: sky.accelerators.RTX_4090() },
      supports: { accelerator: "RTX_4090" },
      provisionCount: 2,
      unknownInstanceId: "ffffffffffffffff",
      pool: { image: { includes: [tasks] }, options: { bootstrapTimeout: 240 } },
    });

    it("runs tasks on both instances, created from the sky.containers image, and deletes them when it closes", async () => {
      const { fake, bed } = api;
      marker = join(api.keysDirectory, `self-destructed-${Date.now()}`);
      const image = sky.containers.cuda("12.8", { variant: "runtime", ubuntu: "24.04" });
      {
        await using pool = await sky.compute({
          provider: create(image),
          accelerator: sky.accelerators.RTX_4090(),
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
        const instances = [...fake.instances.values()];
        expect(
          instances.map((instance) => [instance.imageUrl, instance.billingMode, instance.ports]),
        ).toEqual([
          ["nvidia/cuda:12.8.1-runtime-ubuntu24.04", "spot", "22/tcp"],
          ["nvidia/cuda:12.8.1-runtime-ubuntu24.04", "spot", "22/tcp"],
        ]);
      }
      expect(fake.leftovers()).toEqual([]);
      // Released with ttl 0, each worker ran the provider's self-destruct (the seam's, here) at once.
      const markers = [0, 1].map((index) => `${marker}-${index}`);
      expect(await eventually(() => markers.every((file) => existsSync(file)), 30_000)).toBe(true);
    });

    it("a detached pool is attached through a new provider object (its key read again), and close leaves nothing", async () => {
      await expectDetachAttach({
        spec: { accelerator: sky.accelerators.RTX_4090() },
        journal: join(api.keysDirectory, "detach-journal.jsonl"),
        provider: () => create(),
        secrets: [TEST_API_KEY],
        leftovers: () => api.fake.leftovers(),
      });
    }, 300_000);
  });
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the Novita provider on the test bed: ${skipReason}`, () => {});
}
