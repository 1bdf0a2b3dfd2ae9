/**
 * The fault matrix of `@skyward/testing` against the GCP provider and the fake Compute Engine: a
 * storm of 429 `rateLimitExceeded`, an insert made but its answer lost, a list of instances in a shape
 * Compute Engine never sends, a VM reclaimed, the client killed after create. Compute Engine has no
 * batch delete and no refusal to delete a VM still starting: those cells say why they do not apply.
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
    breakListShape: (broken) => {
      fake.faults.brokenListShape = broken;
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
  },
  clientKilled: "skyward-down",
  timeoutMs: 60_000,
});
