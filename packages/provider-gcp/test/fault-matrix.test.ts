/**
 * The fault matrix of `@skyward/testing` against the GCP provider and the fake Compute Engine: a
 * storm of 429 `rateLimitExceeded`, an insert made but its answer lost, a VM reclaimed, the client
 * killed after create. Compute Engine has no batch delete and no refusal to delete a VM still starting,
 * and its instance lists are read through Google's client: those cells say why they do not apply.
 */
import { runFaultMatrix, type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
import { afterAll, beforeAll } from "vitest";
import { GCP } from "../src/index.js";
import { type FakeGce, fakeGcpSettings, startFakeGce } from "./fake-gce.js";

let fake: FakeGce;
let home: ScratchSkywardHome;

beforeAll(async () => {
  home = await useScratchSkywardHome("skyward-gcp-faults-");
  fake = await startFakeGce();
});
afterAll(async () => {
  await fake?.close();
  await home?.restore();
});

runFaultMatrix({
  name: "gcp",
  create: () => GCP(fakeGcpSettings(fake)),
  faults: () => ({
    live: () =>
      [...fake.instances.values()]
        .filter((instance) => instance.status !== "STOPPING" && instance.status !== "TERMINATED")
        .map((instance) => ({
          id: String(instance.name),
          hourlyPrice: fake.faults.created.find((made) => made.id === instance.name)?.hourlyPrice ?? 0,
        })),
    created: () => fake.faults.created,
    rateLimitNext: (count) => {
      fake.faults.rateLimited = count;
    },
    loseNextCreateAnswer: () => {
      fake.faults.loseNextInsertAnswer = true;
    },
    reclaim: (id) => {
      // A spot VM preempted with instanceTerminationAction DELETE: gone, billing nothing.
      for (const [key, instance] of fake.instances) if (instance.name === id) fake.instances.delete(key);
    },
  }),
  spec: { allocation: "on-demand" },
  notApplicable: {
    "partial-delete":
      "Compute Engine deletes one VM a call (instances.delete); there is no batch to answer 207",
    "delete-refused-while-provisioning":
      "Compute Engine's instances.delete takes a VM in any state, PROVISIONING and STAGING included (https://cloud.google.com/compute/docs/instances/deleting-instance)",
    "unknown-list-shape":
      "lists come through Google's @google-cloud/compute client, which decodes the answer against Compute Engine's schema and drops fields it does not know: an unknown shape reads as an empty list there, before the provider sees it (not yet guarded)",
  },
  clientKilled: "skyward-down",
  timeoutMs: 60_000,
});
