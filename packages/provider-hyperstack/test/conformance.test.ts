/**
 * The provider conformance suite of @skyward/testing, run against the Hyperstack provider talking to
 * the fake Infrahub API (`fake-hyperstack.ts`): once for CPU-only VMs, once for two A100 VMs, and once
 * with a whole pool whose VMs are test-bed hosts — the fake authorises the cluster's key pair on the host
 * it lends, so the pool logs in with the key `prepare` made; the `sshAddress` seam only supplies the
 * host's own root directory (the hosts share one filesystem) and a harmless self-destruct.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { accelerators } from "@skyward/core";
import { createTestbed, requireTestbed, runProviderConformance, type Testbed } from "@skyward/testing";
import { afterAll, beforeAll, it } from "vitest";
import { Hyperstack } from "../src/hyperstack-provider.js";
import { type FakeHyperstack, startFakeHyperstack } from "./fake-hyperstack.js";

let fake: FakeHyperstack;
let keysDirectory: string;

beforeAll(async () => {
  fake = await startFakeHyperstack();
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-hyperstack-conformance-"));
});
afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await rm(keysDirectory, { recursive: true, force: true });
});

const create = () => Hyperstack({ apiUrl: fake.apiUrl, apiKey: fake.apiKey, keysDirectory, retryDelayMs: 1 });

runProviderConformance({
  name: "hyperstack, CPU-only VMs (fake Infrahub API)",
  create,
  leftovers: () => fake.leftovers(),
  unknownInstanceId: "99999999",
  timeoutMs: 20_000,
});

runProviderConformance({
  name: "hyperstack, two A100 VMs (fake Infrahub API)",
  create,
  leftovers: () => fake.leftovers(),
  spec: { accelerator: accelerators.A100(), allocation: "on-demand", region: "CANADA-1" },
  supports: { accelerator: "A100" },
  provisionCount: 2,
  unknownInstanceId: "99999999",
  timeoutMs: 20_000,
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  let bed: Testbed;
  let pooled: FakeHyperstack;
  let poolKeys: string;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    pooled = await startFakeHyperstack({ hosts: bed.hosts });
    poolKeys = await mkdtemp(join(tmpdir(), "skyward-hyperstack-pool-"));
  }, 120_000);
  afterAll(async () => {
    await pooled?.[Symbol.asyncDispose]();
    await bed?.teardown();
    await rm(poolKeys, { recursive: true, force: true });
  });

  runProviderConformance({
    name: "hyperstack, a whole pool on test-bed hosts (fake Infrahub API)",
    create: () =>
      Hyperstack({
        apiUrl: pooled.apiUrl,
        apiKey: pooled.apiKey,
        keysDirectory: poolKeys,
        retryDelayMs: 1,
        sshUser: "root",
        sshAddress: (vm) => {
          const host = bed.hosts.find((entry) => entry.host === vm.floatingIp);
          if (!host) throw new Error(`VM ${vm.id} has no test-bed host (${vm.floatingIp})`);
          return {
            host: host.host,
            port: host.port,
            root: host.root,
            hostKeyFingerprint: host.hostKeyFingerprint,
            privateIp: host.host,
            selfDestruct: "true",
          };
        },
      }),
    leftovers: () => pooled.leftovers(),
    spec: { region: "NORWAY-1" },
    provisionCount: 2,
    unknownInstanceId: "99999999",
    pool: { options: { bootstrapTimeout: 240 } },
    timeoutMs: 240_000,
  });
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the Hyperstack pool on the test bed: ${skipReason}`, () => {});
}
