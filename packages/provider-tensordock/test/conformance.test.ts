/**
 * The provider conformance suite of @skyward/testing, run against the TensorDock provider talking to
 * the fake v2 API (`fake-tensordock.ts`): once for one RTX 4090 VM, once for two H100 VMs, and once with
 * a whole pool whose VMs are test-bed hosts — the fake authorises the request's SSH key on the host it
 * lends, so the pool logs in with the key `prepare` made; the `sshAddress` seam only supplies the host's
 * own root directory (the hosts share one filesystem) and a harmless self-destruct. TensorDock deploys
 * only machines with GPUs, so every spec asks for one.
 *
 * The fault matrix runs against the same fake (its 429s, a lost create answer, an unknown list shape,
 * a VM taken back, boot watchdogs that delete through the API); TensorDock has no batch delete and
 * documents no refusal to delete a starting VM, so those two cells are declared not applicable.
 */
import { join } from "node:path";
import { accelerators } from "@skyward/core";
import {
  expectDetachAttach,
  requireTestbed,
  runFaultMatrix,
  runProviderConformance,
  testbedAddressAt,
  useFakeApi,
} from "@skyward/testing";
import { it } from "vitest";
import { TensorDock } from "../src/tensordock-provider.js";
import { startFakeTensorDock } from "./fake-tensordock.js";

const api = useFakeApi({ start: () => startFakeTensorDock(), prefix: "skyward-tensordock-conformance-" });
const create = () =>
  TensorDock({
    apiUrl: api.fake.apiUrl,
    apiKey: api.fake.token,
    keysDirectory: api.keysDirectory,
    retryDelayMs: 1,
  });

runProviderConformance({
  name: "tensordock, one RTX 4090 VM (fake v2 API)",
  create,
  leftovers: () => api.fake.leftovers(),
  spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
  supports: { accelerator: "RTX_4090" },
  unknownInstanceId: "00000000-0000-4000-8000-000000000000",
  timeoutMs: 20_000,
});

runProviderConformance({
  name: "tensordock, two H100 VMs (fake v2 API)",
  create,
  leftovers: () => api.fake.leftovers(),
  spec: { accelerator: accelerators.H100(), allocation: "spot-if-available", region: "United States" },
  supports: { accelerator: "H100" },
  provisionCount: 2,
  unknownInstanceId: "00000000-0000-4000-8000-000000000000",
  timeoutMs: 20_000,
});

runFaultMatrix({
  name: "tensordock",
  create,
  faults: () => ({
    live: () =>
      [...api.fake.instances.values()]
        .filter((instance) => instance.status !== "deleting")
        .map((instance) => ({ id: instance.id, hourlyPrice: instance.rateHourly })),
    created: () => api.fake.created,
    rateLimitNext: (count, seconds) => api.fake.rateLimitNext(count, seconds),
    loseNextCreateAnswer: () => api.fake.loseNextCreateAnswer(),
    breakListShape: (broken) => api.fake.breakListShape(broken),
    reclaim: (id) => api.fake.reclaim(id),
    fireBootWatchdogs: () => api.fake.fireBootWatchdogs(),
  }),
  spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
  notApplicable: {
    "partial-delete":
      "TensorDock deletes one VM a call (DELETE /instances/{id}); there is no batch to answer 207",
    "delete-refused-while-provisioning":
      "TensorDock's instance-management page documents no refusal to delete a starting VM",
  },
  clientKilled: "boot-watchdog",
  timeoutMs: 30_000,
});

const skipReason = await requireTestbed();

if (skipReason === undefined) {
  const pooled = useFakeApi({
    start: (hosts) => startFakeTensorDock({ hosts }),
    prefix: "skyward-tensordock-pool-",
    hosts: 2,
  });
  /** The provider against the fake whose instances are test-bed hosts (a new object each call). */
  const pooledProvider = () =>
    TensorDock({
      apiUrl: pooled.fake.apiUrl,
      apiKey: pooled.fake.token,
      keysDirectory: pooled.keysDirectory,
      retryDelayMs: 1,
      sshUser: "root",
      sshAddress: (instance) => testbedAddressAt(pooled.bed.hosts, instance.ipAddress),
    });

  runProviderConformance({
    name: "tensordock, a whole pool on test-bed hosts (fake v2 API)",
    create: pooledProvider,
    leftovers: () => pooled.fake.leftovers(),
    spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand", region: "Austin" },
    supports: { accelerator: "RTX_4090" },
    provisionCount: 2,
    unknownInstanceId: "00000000-0000-4000-8000-000000000000",
    pool: { options: { bootstrapTimeout: 240 } },
    timeoutMs: 240_000,
  });

  it("tensordock, a detached pool is attached through a new provider object, and close leaves nothing", async () => {
    await expectDetachAttach({
      spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand", region: "Austin" },
      journal: join(pooled.keysDirectory, "detach-journal.jsonl"),
      provider: pooledProvider,
      secrets: [pooled.fake.token],
      leftovers: () => pooled.fake.leftovers(),
    });
  }, 300_000);
} else {
  // Off CI only: requireTestbed() throws under CI, so a machine without namespaces/sshd fails there.
  it.skip(`the TensorDock pool on the test bed: ${skipReason}`, () => {});
}
