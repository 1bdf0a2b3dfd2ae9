/**
 * `skyward.toml` → this package: core's config loader imports `@skyward/provider-hyperstack` (its built
 * `dist`, as an installed package is) and calls `createProviderFromConfig` with the table's settings,
 * whose provider then answers from the fake Infrahub API.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isProvider } from "@skyward/core/contract";
import { isCi, providerFromToml, tomlProviderIssues } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeHyperstack, startFakeHyperstack } from "./fake-hyperstack.js";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const built = existsSync(new URL("../dist/index.js", import.meta.url));

describe.skipIf(!built && !isCi())('[providers.x] type = "hyperstack" in skyward.toml', () => {
  let fake: FakeHyperstack;
  beforeAll(async () => {
    fake = await startFakeHyperstack();
  });
  afterAll(async () => {
    await fake?.[Symbol.asyncDispose]();
  });

  it("loads this package and creates the provider from the table's settings", async () => {
    const { entry, provider } = await providerFromToml(
      `
[providers.cloud]
type = "hyperstack"
api_url = "${fake.apiUrl}"
api_key = "${fake.apiKey}"
region = ["norway-1"]
ssh_user = "ubuntu"
max_retries = 0
`,
      packageDirectory,
    );
    expect(entry.package).toBe("@skyward/provider-hyperstack");
    expect(isProvider(provider)).toBe(true);
    expect(provider.name).toBe("hyperstack");
    // The settings took: the fake's API, its key, and only NORWAY-1's flavors.
    const offers = await provider.offers({
      query: { accelerator: null, allocation: "on-demand" },
      signal: AbortSignal.timeout(10_000),
    });
    expect(offers.map((offer) => offer.instanceType).sort()).toEqual(["n1-cpu-medium", "n1-cpu-small"]);
    expect(fake.calls(/flavors/)).toEqual(["GET /core/flavors"]);
    const flavors = fake.requests.find((request) => request.path === "/core/flavors");
    expect(flavors?.query.get("region")).toBe("NORWAY-1");
    expect(flavors?.apiKey).toBe(fake.apiKey);
  });

  it("reports a bad setting at its path in the file", async () => {
    const issues = await tomlProviderIssues(
      `
[providers.cloud]
type = "hyperstack"
ssh_user = "Not A User"
network_optimised = true
`,
      packageDirectory,
    );
    expect(issues).toEqual([
      { path: "providers.cloud.sshUser", message: "expected a user name" },
      { path: "providers.cloud.networkOptimised", message: "unknown field" },
    ]);
  });
});
