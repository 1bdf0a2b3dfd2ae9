/**
 * The provider conformance suite of @skyward/testing, run against the RunPod provider talking to the
 * msw fake of RunPod's API: once for a CPU pod (the suite's default spec) and once for GPU pods; then
 * the fault matrix on GPU pods, spot first (GraphQL) then on demand (v2).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { accelerators } from "@skyward/core";
import { runFaultMatrix, runProviderConformance } from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { RunPod } from "../src/runpod-provider.js";
import { type FakeRunPod, startFakeRunPod, TEST_API_KEY } from "./fake-runpod.js";

let fake: FakeRunPod;
let keysDirectory: string;

beforeAll(async () => {
  fake = startFakeRunPod();
  fake.server.listen({ onUnhandledFrame: "error" });
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-runpod-conformance-"));
});
afterAll(async () => {
  fake.server.close();
  await rm(keysDirectory, { recursive: true, force: true });
});

const create = () => RunPod({ apiKey: TEST_API_KEY, keysDirectory, retryDelayMs: 1 });
const leftovers = () => [...fake.pods.values()].map((pod) => `${pod.id} ${pod.name} (${pod.status})`);

runProviderConformance({
  name: "runpod, CPU pods (msw)",
  create,
  leftovers,
  unknownInstanceId: "zzzzzzzzzzzzzz",
  timeoutMs: 20_000,
});

runProviderConformance({
  name: "runpod, GPU pods (msw)",
  create,
  leftovers,
  spec: { accelerator: accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
  supports: { accelerator: "A100" },
  provisionCount: 2,
  unknownInstanceId: "zzzzzzzzzzzzzz",
  timeoutMs: 20_000,
});

// On fresh machines (the suites above rented some). RunPod terminates one pod a call and documents no
// refusal to terminate a pod still provisioning: those two cells cannot happen. The start command's
// boot watchdog ends the billing of pods whose client died.
describe("on a fresh fake", () => {
  beforeAll(() => fake.reset());
  runFaultMatrix({
    name: "runpod",
    create,
    faults: () => fake.faults,
    spec: { accelerator: accelerators.A100({ count: 2 }), allocation: "spot-if-available" },
    notApplicable: {
      "partial-delete":
        "RunPod terminates one pod a call (DELETE /v2/pods/{podId}, https://docs.runpod.io/api-reference-v2/pods/terminate-a-pod); no batch answers 207",
      "delete-refused-while-provisioning":
        "RunPod documents no refusal to terminate a pod still provisioning (https://docs.runpod.io/api-reference-v2/pods/terminate-a-pod)",
    },
    clientKilled: "boot-watchdog",
    timeoutMs: 30_000,
  });
});
