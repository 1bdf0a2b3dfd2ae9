/**
 * The provider conformance suite of @skyward/testing, run against the TensorDock provider talking to
 * the fake v2 API (`fake-tensordock.ts`): once for one RTX 4090 VM, once for two H100 VMs, and once with
 * a whole pool whose VMs are test-bed hosts — the fake authorises the request's SSH key on the host it
 * lends, so the pool logs in with the key `prepare` made; the `sshAddress` seam only supplies the host's
 * own root directory (the hosts share one filesystem) and a harmless self-destruct. TensorDock deploys
 * only machines with GPUs, so every spec asks for one.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { accelerators } from "@skyward/core";
import { createTestbed, requireTestbed, runProviderConformance, type Testbed } from "@skyward/testing";
import { afterAll, beforeAll, it } from "vitest";
import { TensorDock } from "../src/tensordock-provider.js";
import { type FakeTensorDock, startFakeTensorDock } from "./fake-tensordock.js";

let fake: FakeTensorDock;
let keysDirectory: string;

beforeAll(async () => {
  fake = await startFakeTensorDock();
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-tensordock-conformance-"));
});
afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await rm(keysDirectory, { recursive: true, force: true });
});

const create = () => TensorDock({ apiUrl: fake.apiUrl, apiKey: fake.token, keysDirectory, retryDelayMs: 1 });

runProviderConformance({
  name: "tensordock, one RTX 4090 VM (fake v2 API)",
  create,
  leftovers: () => fake.leftovers(),
  spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
  supports: { accelerator: "RTX_4090" },
  unknownInstanceId: "00000000-0000-4000-8000-000000000000",
  timeoutMs: 20_000,
});

runProviderConformance({
  name: "tensordock, two H100 VMs (fake v2 API)",
  create,
  leftovers: () => fake.leftovers(),
  spec: { accelerator: accelerators.H100(), allocation: "spot-if-available", region: "United States" },
  supports: { accelerator: "H100" },
  provisionCount: 2,
  unknownInstanceId: "00000000-0000-4000-8000-000000000000",
  timeoutMs: 20_000,
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  let bed: Testbed;
  let pooled: FakeTensorDock;
  let poolKeys: string;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    pooled = await startFakeTensorDock({ hosts: bed.hosts });
    poolKeys = await mkdtemp(join(tmpdir(), "skyward-tensordock-pool-"));
  }, 120_000);
  afterAll(async () => {
    await pooled?.[Symbol.asyncDispose]();
    await bed?.teardown();
    await rm(poolKeys, { recursive: true, force: true });
  });

  runProviderConformance({
    name: "tensordock, a whole pool on test-bed hosts (fake v2 API)",
    create: () =>
      TensorDock({
        apiUrl: pooled.apiUrl,
        apiKey: pooled.token,
        keysDirectory: poolKeys,
        retryDelayMs: 1,
        sshUser: "root",
        sshAddress: (instance) => {
          const host = bed.hosts.find((entry) => entry.host === instance.ipAddress);
          if (!host) throw new Error(`instance ${instance.id} has no test-bed host (${instance.ipAddress})`);
          return {
            host: host.host,
            port: host.port,
            root: host.root,
            hostKeyFingerprint: host.hostKeyFingerprint,
            selfDestruct: "true",
          };
        },
      }),
    leftovers: () => pooled.leftovers(),
    spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand", region: "Austin" },
    supports: { accelerator: "RTX_4090" },
    provisionCount: 2,
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    pool: { options: { bootstrapTimeout: 240 } },
    timeoutMs: 240_000,
  });
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the TensorDock pool on the test bed: ${skipReason}`, () => {});
}
