/**
 * `skyward offers --provider hyperstack` end to end: the built CLI (`@skyward/cli`'s `dist/cli.js`) runs
 * as a child process in a temporary project whose skyward.toml points a `type = "hyperstack"` provider
 * at the fake Infrahub API, with the key in `HYPERSTACK_API_KEY`; the package is installed there as a
 * user would have it (its built `dist`).
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Offer } from "@skyward/core/contract";
import { type CliProject, createCliProject, isCi } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeHyperstack, startFakeHyperstack } from "./fake-hyperstack.js";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const cliDirectory = dirname(createRequire(import.meta.url).resolve("@skyward/cli/package.json"));
const cli = join(cliDirectory, "dist", "cli.js");
const built = existsSync(join(packageDirectory, "dist", "index.js")) && existsSync(cli);

describe.skipIf(!built && !isCi())("skyward offers --provider hyperstack", () => {
  let fake: FakeHyperstack;
  let project: CliProject;
  const run = (args: readonly string[]) => project.run(args);

  beforeAll(async () => {
    fake = await startFakeHyperstack();
    project = await createCliProject({
      cli,
      prefix: "skyward-hyperstack-cli-",
      packages: { "provider-hyperstack": packageDirectory },
      toml: `[providers.hyperstack]\ntype = "hyperstack"\napi_url = "${fake.apiUrl}"\nmax_retries = 0\n`,
      env: { NO_COLOR: "1", HYPERSTACK_API_KEY: fake.apiKey },
    });
  });
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
    await project?.[Symbol.asyncDispose]();
  });

  it("prints the fake's A100 flavors with their prices, cheapest first, and never the key", async () => {
    const one = await run(["offers", "--provider", "hyperstack", "--accelerator", "A100"]);
    expect(one.stderr).toBe("");
    expect(one.code).toBe(0);
    expect(one.stdout).toContain("n3-A100x1");
    expect(one.stdout).toContain("1.35");
    // Two per VM: n3-A100x2 (2 × $1.35) before n3-A100x2-NVLink (2 × $1.40); n3-A100x8 is out of stock.
    const two = await run(["offers", "--provider", "hyperstack", "--accelerator", "A100:2"]);
    expect(two.code).toBe(0);
    const names = two.stdout.split("\n").flatMap((line) => line.match(/n3-A100\S*/)?.[0] ?? []);
    expect(names).toEqual(["n3-A100x2", "n3-A100x2-NVLink"]);
    expect(two.stdout).toContain("2.7");
    expect(two.stdout).toContain("2.8");
    expect(`${one.stdout}${one.stderr}${two.stdout}${two.stderr}`).not.toContain(fake.apiKey);
    const flavors = fake.requests.filter((request) => request.path === "/core/flavors");
    expect(flavors.length).toBeGreaterThan(0);
    expect(flavors.every((request) => request.apiKey === fake.apiKey)).toBe(true);
  });

  it("--accelerator H100-SXM lists only SXM flavors; each offer shows its form factor", async () => {
    const sxm = await run(["offers", "--provider", "hyperstack", "--accelerator", "H100-SXM"]);
    expect(sxm.code).toBe(0);
    expect(sxm.stderr).toBe("");
    expect(sxm.stdout).toContain("n3-H100-SXM5x1");
    expect(sxm.stdout).toContain("H100 SXM 80GB");
    expect(sxm.stdout).not.toContain("n3-H100x1 ");
    const pcie = await run(["offers", "--provider", "hyperstack", "--accelerator", "H100 PCIe"]);
    expect(pcie.stdout).toContain("n3-H100x1");
    expect(pcie.stdout).not.toContain("n3-H100-SXM5x1");
    const any = await run(["offers", "--provider", "hyperstack", "--accelerator", "H100"]);
    expect(any.stdout).toContain("n3-H100-SXM5x1");
    expect(any.stdout).toContain("H100 PCIe 80GB");
  });

  it("--json prints the offers themselves, --region narrows them", async () => {
    const result = await run(["offers", "--provider", "hyperstack", "--region", "NORWAY-1", "--json"]);
    expect(result.code).toBe(0);
    const offers = JSON.parse(result.stdout) as Offer[];
    expect(offers.map((offer) => [offer.id, offer.onDemandPrice])).toEqual([
      ["hyperstack:NORWAY-1:n1-cpu-small", 0.02],
      ["hyperstack:NORWAY-1:n1-cpu-medium", 0.05],
    ]);
    expect(offers[0]).toMatchObject({ provider: "hyperstack", vcpus: 4, memoryGb: 4, diskGb: 100 });
  });
});
