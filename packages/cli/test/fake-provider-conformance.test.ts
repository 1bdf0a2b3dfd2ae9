/**
 * The fake provider package the CLI tests load is itself held to the provider contract, so the CLI is
 * tested against a provider that behaves like a real one.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runProviderConformance } from "@skyward/testing";
import { createProviderFromConfig } from "./fixtures/fake-provider-package/index.js";

let scratch = "";
const stateFile = () => join(scratch, "state.json");

const offer = (
  id: string,
  accelerator: { name: string; count: number; memoryGb: number } | null,
  prices: [number | null, number | null],
) => ({
  id,
  provider: "fake",
  instanceType: id,
  accelerator,
  vcpus: 8,
  memoryGb: 32,
  architecture: "x86_64",
  region: "eu-1",
  spotPrice: prices[0],
  onDemandPrice: prices[1],
  pricesAsOf: "2025-06-01",
  specific: {},
});

runProviderConformance({
  name: "the CLI tests' fake provider package",
  create: async () => {
    scratch = await mkdtemp(join(tmpdir(), "skyward-fake-conformance-"));
    await writeFile(
      stateFile(),
      JSON.stringify({
        offers: [
          offer("cpu.small", null, [0.01, 0.04]),
          offer("cpu.large", null, [null, 0.3]),
          offer("gpu.a100", { name: "A100", count: 1, memoryGb: 80 }, [1.1, 2.5]),
        ],
      }),
    );
    return createProviderFromConfig({ stateFile: stateFile(), apiKey: "conformance-key" });
  },
  supports: { accelerator: "A100" },
  provisionCount: 2,
  leftovers: async () => {
    const state = JSON.parse(await readFile(stateFile(), "utf8")) as {
      clusters?: string[];
      instances?: { id: string; status: string }[];
    };
    return [
      ...(state.clusters ?? []),
      ...(state.instances ?? [])
        .filter((instance) => instance.status !== "terminated")
        .map((instance) => instance.id),
    ];
  },
  cleanup: () => rm(scratch, { recursive: true, force: true }),
});
