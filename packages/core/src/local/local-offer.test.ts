/**
 * The Local provider's offer counts this machine's NVIDIA GPUs: it asks `nvidia-smi --query-gpu`
 * (a fake one first on PATH here, as there is no GPU), so one worker per accelerator and specs
 * asking for GPUs work on a GPU machine.
 */
import { chmodSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compute } from "../compute.js";
import type { OfferQuery } from "../contract/types.js";
import { NoOffersError } from "../errors/errors.js";
import { Local } from "./local-provider.js";

const saved = process.env.PATH;
const scratch: string[] = [];

afterEach(() => {
  process.env.PATH = saved;
  for (const directory of scratch.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** Puts an nvidia-smi first on PATH that prints `lines` for the query Local asks (and fails otherwise). */
function fakeNvidiaSmi(lines: readonly string[], exitCode = 0): void {
  const directory = mkdtempSync(join(tmpdir(), "skyward-local-gpus-"));
  scratch.push(directory);
  const script = join(directory, "nvidia-smi");
  writeFileSync(
    script,
    [
      "#!/bin/sh",
      '[ "$1" = "--query-gpu=name,memory.total" ] && [ "$2" = "--format=csv,noheader,nounits" ] || exit 2',
      ...lines.map((line) => `echo '${line}'`),
      `exit ${exitCode}`,
      "",
    ].join("\n"),
  );
  chmodSync(script, 0o755);
  process.env.PATH = `${directory}:${saved}`;
}

function query(accelerator: OfferQuery["accelerator"]): OfferQuery {
  return { accelerator, allocation: "on-demand" } as OfferQuery;
}

function offers(asked: OfferQuery) {
  return Local().offers({ query: asked, signal: new AbortController().signal });
}

describe("the Local offer's GPUs", () => {
  it("are the GPUs nvidia-smi lists: the model (canonical name), how many, their memory", async () => {
    fakeNvidiaSmi(["NVIDIA H100 80GB HBM3, 81559", "NVIDIA H100 80GB HBM3, 81559"]);
    const [offer] = await offers(query(null));
    expect(offer?.accelerator).toEqual({ name: "H100", count: 2, memoryGb: 80 });
    expect(offer?.instanceType).toBe("local (2x H100)");
    // A spec asking for them matches; more of them, another model or more memory does not.
    expect(await offers(query({ name: "H100", count: 2 }))).toHaveLength(1);
    expect(await offers(query({ name: "H100", count: 4 }))).toEqual([]);
    expect(await offers(query({ name: "A100", count: 1 }))).toEqual([]);
    expect(await offers(query({ name: "H100", count: 1, memoryGb: 141 }))).toEqual([]);
  });

  it("carry the form factor when nvidia-smi's name says it, and a form factor asked for is honoured", async () => {
    fakeNvidiaSmi(["NVIDIA H100 PCIe, 81559"]);
    const [pcie] = await offers(query(null));
    expect(pcie?.accelerator).toEqual({ name: "H100", count: 1, memoryGb: 80, formFactor: "PCIe" });
    expect(await offers(query({ name: "H100", count: 1, formFactor: "PCIe" }))).toHaveLength(1);
    expect(await offers(query({ name: "H100", count: 1, formFactor: "SXM" }))).toEqual([]);
    fakeNvidiaSmi(["NVIDIA A100-SXM4-80GB, 81920"]);
    expect((await offers(query(null)))[0]?.accelerator?.formFactor).toBe("SXM");
    // "NVIDIA H100 80GB HBM3" does not say: the offer has no form factor and is kept (the pool says so).
    fakeNvidiaSmi(["NVIDIA H100 80GB HBM3, 81559"]);
    const [unlabelled] = await offers(query({ name: "H100", count: 1, formFactor: "SXM" }));
    expect(unlabelled?.accelerator).toEqual({ name: "H100", count: 1, memoryGb: 80 });
    expect(unlabelled?.accelerator && "formFactor" in unlabelled.accelerator).toBe(false);
  });

  it("are none without nvidia-smi, or when it fails or lists none", async () => {
    process.env.PATH = "/nonexistent";
    expect((await offers(query(null)))[0]?.accelerator).toBeNull();
    fakeNvidiaSmi(["NVIDIA H100 80GB HBM3, 81559"], 9);
    expect((await offers(query(null)))[0]?.accelerator).toBeNull();
    fakeNvidiaSmi([]);
    expect((await offers(query(null)))[0]?.accelerator).toBeNull();
    expect(await offers(query({ name: "H100", count: 1 }))).toEqual([]);
  });
});

describe("the Local offer's disk and region", () => {
  const signal = new AbortController().signal;
  const base = { accelerator: null, allocation: "on-demand" } as const;

  it("has the free disk of the work root's filesystem, and matches a spec's diskGb against it", async () => {
    const parent = mkdtempSync(join(tmpdir(), "skyward-local-disk-"));
    scratch.push(parent);
    // The work root need not exist yet: its nearest existing ancestor's filesystem is asked.
    const local = Local({ workRoot: join(parent, "not", "yet") });
    const info = statfsSync(parent);
    const free = Math.floor((info.bavail * info.bsize) / 1024 ** 3);
    const [offer] = await local.offers({ query: base, signal });
    // Free space moves while the test runs (other processes write): within a GB of statfs's.
    expect(Math.abs((offer?.diskGb as number) - free)).toBeLessThanOrEqual(1);
    expect(await local.offers({ query: { ...base, diskGb: 1 }, signal })).toHaveLength(free >= 2 ? 1 : 0);
    expect(await local.offers({ query: { ...base, diskGb: free + 1_000_000 }, signal })).toEqual([]);
  });

  it('is in region "local": a spec naming another region finds no offer', async () => {
    expect(await Local().offers({ query: { ...base, region: "local" }, signal })).toHaveLength(1);
    expect(await Local().offers({ query: { ...base, region: "us-east-1" }, signal })).toEqual([]);
  });

  it("refuses a pool whose disk or region this machine does not have before starting anything", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-local-disk-pool-"));
    scratch.push(workRoot);
    for (const spec of [{ diskGb: 1_000_000_000 }, { region: "eu-west-1" }]) {
      const started = compute({ provider: Local({ workRoot }), ...spec, options: { console: false } });
      await expect(started).rejects.toSatisfy((error) => NoOffersError.isInstance(error));
    }
    // Nothing was prepared: no pool root under the work root.
    expect((await import("node:fs")).readdirSync(workRoot)).toEqual([]);
  });
});
