// Several specs with fallback: the pool asks for the first spec that can be satisfied, in order
// (`selection: "first"`). Here the first two cannot be: `Local` has no A100 to offer, and a cloud
// that quotes a price has no capacity when asked for machines. The third, plain `Local`, serves.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import type { Offer, ProviderV1 } from "@skyward/core/contract";

/**
 * A provider for a cloud that is sold out: it quotes an offer (so it is a candidate), but every
 * request for machines fails with `NoCapacityError` — what a real cloud answers when a region has
 * none of an instance type left. A plain `ProviderV1` object, written inline.
 */
function soldOutCloud(name: string): ProviderV1 {
  const offer: Offer = {
    id: `${name}-c8`,
    provider: name,
    instanceType: "c8.large",
    accelerator: null,
    vcpus: 8,
    memoryGb: 32,
    architecture: "x86_64",
    region: "eu-1",
    spotPrice: null,
    onDemandPrice: 0.12,
    pricesAsOf: "2026-01-01",
    specific: {},
  };
  return {
    specificationVersion: "v1",
    name,
    capabilities: { spot: false },
    offers: async () => [offer],
    prepare: async ({ spec, offer: chosen }) => ({
      id: `${name}-cluster`,
      provider: name,
      poolId: "",
      region: chosen.region,
      spec,
      offer: chosen,
      ssh: null,
      specific: {},
    }),
    provision: async () => {
      throw new sky.NoCapacityError({
        attempts: [{ provider: name, reason: "c8.large is sold out in eu-1" }],
      });
    },
    getInstance: async () => null,
    launchWorker: async () => {
      throw new Error(`${name} never provisions a machine`);
    },
    terminate: async () => {},
    teardown: async () => {},
    selfDestruct: () => "",
  };
}

const where = sky.python<[], { node: number; pid: number; accelerators: number }>("tasks:where");
const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));

// Without the last spec nothing can serve: compute fails before starting any worker, with an error
// that lists every spec's attempt and why it failed.
const unsatisfiable = await sky
  .compute({
    specs: [
      { provider: sky.Local(), accelerator: sky.accelerators.A100(), image: { includes: [tasks] } },
      { provider: soldOutCloud("sold-out-cloud"), image: { includes: [tasks] } },
    ],
    options: { selection: "first", maxProvisionAttempts: 1, console: false },
  })
  .then(
    () => undefined,
    (error: unknown) => error,
  );
assert.ok(sky.NoCapacityError.isInstance(unsatisfiable), `expected NoCapacityError, got ${unsatisfiable}`);
console.log("with only the first two specs, compute fails:");
for (const attempt of unsatisfiable.attempts)
  console.log(`  ${attempt.provider}: ${attempt.reason.replaceAll("\n", "\n    ")}`);
assert.deepEqual(
  unsatisfiable.attempts.map((attempt) => attempt.provider),
  ["local", "sold-out-cloud"],
);

const failures: string[] = [];
await using pool = await sky.compute(
  {
    specs: [
      // 1. Local with an accelerator this machine does not have: no offer, skipped.
      { provider: sky.Local(), accelerator: sky.accelerators.A100(), nodes: 2, image: { includes: [tasks] } },
      // 2. A cloud with an offer but no capacity: tried, and it fails.
      { provider: soldOutCloud("sold-out-cloud"), nodes: 2, image: { includes: [tasks] } },
      // 3. Local, CPU only: serves.
      { provider: sky.Local(), nodes: 2, image: { includes: [tasks] } },
    ],
    // Try the specs in the order given (the default, "cheapest", compares prices across them);
    // one attempt per provider, so the example does not wait out retries on the sold-out cloud.
    options: { selection: "first", maxProvisionAttempts: 1, console: false },
  },
  { onEvent: (event) => event.type === "error" && failures.push(event.message) },
);

console.log(
  `\nwith the third spec, served by ${pool.spec.provider?.name}, accelerator ${pool.spec.accelerator?.name ?? "none"}`,
);
for (const failure of failures) console.log(`  passed over: ${failure.replaceAll("\n", "\n    ")}`);
const placed = await pool.broadcast(where());
for (const { node, pid, accelerators } of placed) {
  console.log(`  node ${node}: pid ${pid}, ${accelerators} accelerators`);
}

assert.equal(pool.spec.provider?.name, "local", "the third spec served");
assert.equal(pool.spec.accelerator, null, "the spec that served asks for no accelerator");
assert.ok(
  failures.some((message) => message.startsWith("sold-out-cloud")),
  `the sold-out cloud was tried and failed: ${JSON.stringify(failures)}`,
);
assert.deepEqual(
  placed.map((entry) => entry.node),
  [0, 1],
);
assert.ok(placed.every((entry) => entry.accelerators === 0));
