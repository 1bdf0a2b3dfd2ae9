/**
 * `skyward.toml` → this package: core's config loader imports `@skyward/provider-tensordock` (its built
 * `dist`, as an installed package is) and calls `createProviderFromConfig` with the table's settings,
 * whose provider then answers from the fake v2 API.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isProvider } from "@skyward/core/contract";
import { isCi, providerFromToml, tomlProviderIssues } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeTensorDock, startFakeTensorDock } from "./fake-tensordock.js";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const built = existsSync(new URL("../dist/index.js", import.meta.url));

describe.skipIf(!built && !isCi())('[providers.x] type = "tensordock" in skyward.toml', () => {
  let fake: FakeTensorDock;
  beforeAll(async () => {
    fake = await startFakeTensorDock();
  });
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
  });

  it("loads this package and creates the provider from the table's settings", async () => {
    const { entry, provider } = await providerFromToml(
      `
[providers.cloud]
type = "tensordock"
api_url = "${fake.apiUrl}"
api_key = "${fake.token}"
location = "Germany"
storage_gb = 200
min_vcpus = 8
min_ram_gb = 32
`,
      packageDirectory,
    );
    expect(entry.package).toBe("@skyward/provider-tensordock");
    expect(isProvider(provider)).toBe(true);
    expect(provider.name).toBe("tensordock");
    // The settings took: the fake's API and token, only Frankfurt, and the sizes asked for.
    const offers = await provider.offers({
      query: { accelerator: { name: "RTX_4090", count: 1 }, allocation: "on-demand" },
      signal: AbortSignal.timeout(10_000),
    });
    expect(offers.map((offer) => [offer.region, offer.vcpus, offer.memoryGb, offer.diskGb])).toEqual([
      ["Frankfurt, Germany", 8, 32, 200],
    ]);
    expect(fake.requests.every((request) => request.token === fake.token)).toBe(true);
  });

  it("reports a bad setting at its path in the file", async () => {
    const issues = await tomlProviderIssues(
      `
[providers.cloud]
type = "tensordock"
storage_gb = 50
api_token = "x"
`,
      packageDirectory,
    );
    expect(issues).toEqual([
      { path: "providers.cloud.storageGb", message: "expected at least 100 GB (TensorDock's minimum)" },
      { path: "providers.cloud.apiToken", message: "unknown field" },
    ]);
  });
});
