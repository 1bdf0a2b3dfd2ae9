/**
 * The provider conformance suite of @skyward/testing, run against the Vast.ai provider talking to the
 * msw fake of Vast.ai's API. Vast.ai rents GPU machines only, so the specs ask for an RTX 4090.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { accelerators } from "@skyward/core";
import { runFaultMatrix, runProviderConformance } from "@skyward/testing";
import { afterAll, beforeAll, describe } from "vitest";
import { VastAI } from "../src/vastai-provider.js";
import { type FakeVast, SCALED_CREATE_LIMITS, startFakeVast, TEST_API_KEY } from "./fake-vastai.js";

let fake: FakeVast;
let keysDirectory: string;

beforeAll(async () => {
  fake = startFakeVast();
  fake.server.listen({ onUnhandledFrame: "error" });
  keysDirectory = await mkdtemp(join(tmpdir(), "skyward-vast-conformance-"));
});
afterAll(async () => {
  fake.server.close();
  await rm(keysDirectory, { recursive: true, force: true });
});

const create = () =>
  VastAI({ apiKey: TEST_API_KEY, keysDirectory, retryDelayMs: 1, ...SCALED_CREATE_LIMITS });
const leftovers = () =>
  [...fake.instances.values()].map(
    (instance) => `${instance.id} ${String(instance.body.label)} (${instance.state})`,
  );

runProviderConformance({
  name: "vastai, on-demand (msw)",
  create,
  leftovers,
  spec: { accelerator: accelerators.RTX_4090(), allocation: "on-demand" },
  supports: { accelerator: "RTX_4090" },
  unknownInstanceId: "99999999",
  timeoutMs: 20_000,
});

runProviderConformance({
  name: "vastai, interruptible, two nodes (msw)",
  create,
  leftovers,
  spec: { accelerator: accelerators.RTX_4090(), allocation: "spot" },
  supports: { accelerator: "RTX_4090" },
  provisionCount: 2,
  unknownInstanceId: "99999999",
  timeoutMs: 20_000,
});

// On a market of its own (the suites above rented asks). Vast.ai destroys one instance a call and documents no refusal to destroy a loading one: those two
// cells cannot happen. The onstart watchdog ends the billing of instances whose client died.
describe("on a fresh market", () => {
  beforeAll(() => fake.reset());
  runFaultMatrix({
    name: "vastai",
    create,
    faults: () => fake.faults,
    spec: { accelerator: accelerators.RTX_4090(), allocation: "spot-if-available" },
    notApplicable: {
      "partial-delete":
        "the provider destroys one instance a call (DELETE /instances/{id}/, https://docs.vast.ai/cli/reference/destroy-instance.md); no batch answers 207",
      "delete-refused-while-provisioning":
        "Vast.ai documents no refusal to destroy an instance still loading (https://docs.vast.ai/cli/reference/destroy-instance.md: the console's DESTROY button)",
    },
    clientKilled: "boot-watchdog",
    timeoutMs: 30_000,
  });
});
