/**
 * The provider conformance suite of `@skyward/testing`, run against the Verda provider talking to the
 * fake of Verda's API (`fake-verda.ts`): offers and the lifecycle for CPU instances (the suite's
 * default spec) and for GPU instances; then, with the fake's instances lent from a test bed, a real
 * pool whose workers run on those SSH hosts.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  runProviderConformance,
  type Testbed,
  testbedSshHost,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Verda } from "../src/index.js";
import { type FakeVerda, startFakeVerda, TEST_CLIENT_ID, TEST_CLIENT_SECRET } from "./fake-verda.js";

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));
const credentials = { clientId: TEST_CLIENT_ID, clientSecret: TEST_CLIENT_SECRET, retryDelayMs: 1 };

describe("without hosts", () => {
  let fake: FakeVerda;
  let keysDirectory: string;
  beforeAll(async () => {
    fake = await startFakeVerda();
    keysDirectory = await mkdtemp(join(tmpdir(), "skyward-verda-conformance-"));
  });
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
    await rm(keysDirectory, { recursive: true, force: true });
  });
  const create = () => Verda({ ...credentials, apiUrl: fake.apiUrl, keysDirectory });

  runProviderConformance({
    name: "verda, CPU instances",
    create,
    leftovers: () => fake.leftovers(),
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    timeoutMs: 20_000,
  });

  runProviderConformance({
    name: "verda, GPU instances",
    create,
    leftovers: () => fake.leftovers(),
    spec: { accelerator: sky.accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
    supports: { accelerator: "A100" },
    provisionCount: 2,
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    timeoutMs: 20_000,
  });
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  describe("on test-bed hosts", () => {
    let bed: Testbed;
    let fake: FakeVerda;
    let keysDirectory: string;
    /** When set, a released worker's self-destruct touches `<marker>-<host index>` instead of doing nothing. */
    let marker: string | undefined;
    beforeAll(async () => {
      bed = await createTestbed({ hosts: 2 });
      fake = await startFakeVerda({ hosts: bed.hosts });
      keysDirectory = await mkdtemp(join(tmpdir(), "skyward-verda-pool-"));
    });
    afterAll(async () => {
      await fake?.[Symbol.asyncDispose]();
      await bed?.teardown();
      await rm(keysDirectory, { recursive: true, force: true });
    });

    /** The provider, each instance reached on the test-bed host the fake lent it (by its address). */
    const create = () =>
      Verda({
        ...credentials,
        apiUrl: fake.apiUrl,
        keysDirectory,
        sshAddress: ({ ip }) => {
          const host = bed.hosts.find((candidate) => candidate.host === ip);
          if (!host) throw new Error(`no test-bed host at ${ip}`);
          // Never the real self-destruct on this machine: the stand-in host is not the instance.
          const selfDestruct = marker ? `touch '${marker}-${bed.hosts.indexOf(host)}'` : "true";
          return { ...testbedSshHost(host), selfDestruct };
        },
      });

    runProviderConformance({
      name: "verda, a pool on test-bed hosts",
      create,
      leftovers: () => fake.leftovers(),
      spec: { region: "FIN-01" },
      provisionCount: 2,
      unknownInstanceId: "00000000-0000-4000-8000-000000000000",
      pool: { image: { includes: [tasks] }, options: { bootstrapTimeout: 240 } },
    });

    it("runs tasks on both instances, each on its own host, and deletes them and the SSH key when it closes", async () => {
      marker = join(keysDirectory, `self-destructed-${Date.now()}`);
      const where = sky.python<[], { node: number; total: number; cwd: string }>("tasks:where");
      const add = sky.python<[a: number, b: number], number>("tasks:add");
      {
        await using pool = await sky.compute({
          provider: create(),
          nodes: 2,
          allocation: "spot-if-available",
          image: { includes: [tasks] },
          ttl: 0,
          options: { console: false, bootstrapTimeout: 240 },
        });
        const seen = await pool.broadcast(where());
        expect(seen.map((entry) => [entry.node, entry.total])).toEqual([
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
      expect(await waitUntil(() => markers.every((file) => existsSync(file)), 30_000)).toBe(true);
    });
  });
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the Verda provider on the test bed: ${skipReason}`, () => {});
}
