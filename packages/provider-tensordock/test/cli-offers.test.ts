/**
 * `skyward offers --provider tensordock` end to end: the built CLI (`@skyward/cli`'s `dist/cli.js`) runs
 * as a child process in a temporary project whose skyward.toml points a `type = "tensordock"` provider
 * at the fake v2 API, with the token in `TENSORDOCK_API_TOKEN`; the package is installed there as a
 * user would have it (its built `dist`).
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Offer } from "@skyward/core/contract";
import { type CliProject, createCliProject, isCi } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeTensorDock, startFakeTensorDock } from "./fake-tensordock.js";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const cliDirectory = dirname(createRequire(import.meta.url).resolve("@skyward/cli/package.json"));
const cli = join(cliDirectory, "dist", "cli.js");
const built = existsSync(join(packageDirectory, "dist", "index.js")) && existsSync(cli);

describe.skipIf(!built && !isCi())("skyward offers --provider tensordock", () => {
  let fake: FakeTensorDock;
  let project: CliProject;
  const run = (args: readonly string[]) => project.run(args);

  beforeAll(async () => {
    fake = await startFakeTensorDock();
    project = await createCliProject({
      cli,
      prefix: "skyward-tensordock-cli-",
      packages: { "provider-tensordock": packageDirectory },
      toml: `[providers.tensordock]\ntype = "tensordock"\napi_url = "${fake.apiUrl}"\nmax_retries = 0\n`,
      env: { NO_COLOR: "1", TENSORDOCK_API_TOKEN: fake.token },
    });
  });
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
    await project?.[Symbol.asyncDispose]();
  });

  it("prints the fake's RTX 4090 offers with their prices, cheapest first, and never the token", async () => {
    const result = await run(["offers", "--provider", "tensordock", "--accelerator", "RTX_4090"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // Austin: 0.35 + 4 vCPUs × 0.003 + 16 GB × 0.002 + 100 GB × 0.00005 = 0.399; Frankfurt: 0.449.
    // Osaka has no dedicated IP: not offered.
    const regions = result.stdout
      .split("\n")
      .flatMap((line) => line.match(/Austin|Frankfurt|Osaka/)?.[0] ?? []);
    expect(regions).toEqual(["Austin", "Frankfurt"]);
    expect(result.stdout).toContain("0.399");
    expect(result.stdout).toContain("0.449");
    expect(`${result.stdout}${result.stderr}`).not.toContain(fake.token);
    const asked = fake.requests.filter((request) => request.path === "/locations");
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((request) => request.token === fake.token)).toBe(true);
  });

  it("--json prints the offers themselves, --region narrows them", async () => {
    const result = await run([
      "offers",
      "--provider",
      "tensordock",
      "--accelerator",
      "A100",
      "--region",
      "Germany",
      "--json",
    ]);
    expect(result.code).toBe(0);
    const offers = JSON.parse(result.stdout) as Offer[];
    expect(offers.map((offer) => [offer.id, offer.onDemandPrice])).toEqual([
      ["tensordock:8a0c4e2d-2f3b-4d7a-b1c9-5e6f7a8b9c02:a100-pcie-80gb:x1", 1.249],
    ]);
    expect(offers[0]).toMatchObject({
      provider: "tensordock",
      region: "Frankfurt, Germany",
      accelerator: { name: "A100", count: 1, memoryGb: 80 },
      vcpus: 4,
      memoryGb: 16,
      diskGb: 100,
    });
  });
});
