/**
 * The accelerator's form factor, end to end through the pool: offers whose known form factor differs
 * from the one asked for are dropped centrally (whatever the provider returned), offers that do not
 * say theirs are kept, and the pool says so when it provisions one.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { acceleratorFromName, type OfferQuery } from "../src/contract.js";
import * as sky from "../src/index.js";
import { formatConsoleLine } from "../src/observe/console-lines.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");

/**
 * A careless provider: it returns every H100 offer it has, whatever the query asks, so what the pool
 * tries is the pool's own choice. Its offers: PCIe ($1/h), one that does not say its form factor
 * ($2/h), SXM ($3/h). It never has capacity; `prepared` lists the offers the pool tried, in order.
 */
function carelessProvider(labels: readonly (string | undefined)[] = ["PCIe", undefined, "SXM"]) {
  const prepared: string[] = [];
  const queries: OfferQuery[] = [];
  const provider: sky.Provider = {
    specificationVersion: "v1",
    name: "careless",
    capabilities: { spot: false },
    async offers({ query }) {
      queries.push(query);
      return labels.map((formFactor, index) => ({
        id: formFactor ?? "unlabelled",
        provider: "careless",
        instanceType: `h100-${formFactor ?? "unlabelled"}`,
        accelerator: { name: "H100", count: 1, memoryGb: 80, ...(formFactor ? { formFactor } : {}) },
        vcpus: 16,
        memoryGb: 128,
        architecture: "x86_64" as const,
        region: "test",
        spotPrice: null,
        onDemandPrice: index + 1,
        pricesAsOf: "2026-11-25",
        specific: {},
      }));
    },
    async prepare({ spec, offer }) {
      prepared.push(offer.id);
      return {
        id: "c",
        provider: "careless",
        poolId: "",
        region: "test",
        spec,
        offer,
        ssh: null,
        specific: {},
      };
    },
    async provision() {
      throw new sky.NoCapacityError({ attempts: [{ provider: "careless", reason: "sold out" }] });
    },
    async getInstance() {
      return null;
    },
    async launchWorker() {
      throw new Error("never provisioned");
    },
    async terminate() {},
    async teardown() {},
    selfDestruct: () => "",
  };
  return { provider, prepared, queries };
}

async function tried(accelerator: sky.Accelerator, labels?: readonly (string | undefined)[]) {
  const careless = carelessProvider(labels);
  const error = await sky
    .compute({
      provider: careless.provider,
      accelerator,
      options: { console: false, maxProvisionAttempts: 1 },
    })
    .catch((caught: unknown) => caught);
  return { error, prepared: careless.prepared, queries: careless.queries };
}

describe("a form factor asked for", () => {
  it("reaches the provider's query, and offers of another known form factor are never tried", async () => {
    const sxm = await tried(sky.accelerators.H100({ formFactor: "SXM" }));
    expect(sky.NoCapacityError.isInstance(sxm.error)).toBe(true);
    expect(sxm.queries[0]?.accelerator).toEqual({ name: "H100", count: 1, memoryGb: 80, formFactor: "SXM" });
    // The PCIe offer left out; the SXM one first (known to fit), then the cheaper unlabelled one.
    expect(sxm.prepared).toEqual(["SXM", "unlabelled"]);
    const pcie = await tried(sky.accelerators.H100({ formFactor: "PCIe" }));
    expect(pcie.prepared).toEqual(["PCIe", "unlabelled"]);
    // No form factor asked: every offer, cheapest first.
    const any = await tried(sky.accelerators.H100());
    expect(any.queries[0]?.accelerator).toEqual({ name: "H100", count: 1, memoryGb: 80 });
    expect(any.prepared).toEqual(["PCIe", "unlabelled", "SXM"]);
    // The skyward.toml string form asks the same.
    const toml = await tried(acceleratorFromName("H100-SXM", "accelerator"));
    expect(toml.prepared).toEqual(["SXM", "unlabelled"]);
  }, 60_000);

  it("with only other form factors on offer, fails before preparing anything, naming the form factor", async () => {
    const { error, prepared } = await tried(sky.accelerators.H100({ formFactor: "SXM" }), ["PCIe", "NVL"]);
    expect(prepared).toEqual([]);
    expect(sky.NoOffersError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/careless: no offer for 1x H100 SXM/);
  }, 60_000);
});

describe("an offer that does not say its form factor", () => {
  const saved = process.env.PATH;
  const scratch: string[] = [];
  afterEach(() => {
    process.env.PATH = saved;
    for (const directory of scratch.splice(0)) rmSync(directory, { recursive: true, force: true });
  });

  /** An nvidia-smi first on PATH naming one GPU as `name` (there is no GPU here). */
  function fakeNvidiaSmi(name: string): void {
    const directory = mkdtempSync(join(tmpdir(), "skyward-form-factor-"));
    scratch.push(directory);
    const script = join(directory, "nvidia-smi");
    writeFileSync(
      script,
      `#!/bin/sh\n[ "$1" = "--query-gpu=name,memory.total" ] || exit 2\necho '${name}, 81559'\n`,
    );
    chmodSync(script, 0o755);
    process.env.PATH = `${directory}:${saved}`;
  }

  it("is used, and node.provisioned and its console line say the form factor was not checked", async () => {
    // nvidia-smi's "NVIDIA H100 80GB HBM3" does not say SXM or PCIe: the Local offer is unlabelled.
    fakeNvidiaSmi("NVIDIA H100 80GB HBM3");
    const provisioned: sky.SkywardEvent[] = [];
    await using pool = await sky.compute(
      {
        accelerator: sky.accelerators.H100({ formFactor: "SXM" }),
        image: { includes: [tasks] },
        options: { console: false },
      },
      { onEvent: (event) => event.type === "node.provisioned" && provisioned.push(event) },
    );
    expect(await pool.run(add(1, 2))).toBe(3);
    expect(provisioned).toHaveLength(1);
    const event = provisioned[0] as Extract<sky.SkywardEvent, { type: "node.provisioned" }>;
    expect(event.unverifiedFormFactor).toBe("SXM");
    expect(event.accelerator).toBe("1x H100");
    expect(formatConsoleLine(event, "log")).toMatch(
      /provisioned local \(1x H100\) at local; form factor not known for this offer \(SXM asked for\)$/,
    );
  }, 120_000);

  it("is not flagged when the offer says the form factor asked for", async () => {
    fakeNvidiaSmi("NVIDIA H100 PCIe");
    const provisioned: sky.SkywardEvent[] = [];
    await using pool = await sky.compute(
      {
        accelerator: sky.accelerators.H100({ formFactor: "PCIe" }),
        image: { includes: [tasks] },
        options: { console: false },
      },
      { onEvent: (event) => event.type === "node.provisioned" && provisioned.push(event) },
    );
    expect(await pool.run(add(2, 2))).toBe(4);
    const event = provisioned[0] as Extract<sky.SkywardEvent, { type: "node.provisioned" }>;
    expect(event.accelerator).toBe("1x H100 PCIe");
    expect(event.unverifiedFormFactor).toBeUndefined();
    expect(formatConsoleLine(event, "log")).not.toMatch(/form factor/);
  }, 120_000);
});
