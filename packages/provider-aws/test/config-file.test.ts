/**
 * `skyward.toml` → this package: core's config loader imports `@skyward/provider-aws` (its built
 * `dist`, as an installed package is) and calls `createProviderFromConfig` with the table's settings.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ConfigurationError } from "@skyward/core";
import { createProviderFromEntry, parseConfigText, validateConfig } from "@skyward/core/config";
import { isProvider } from "@skyward/core/contract";
import { isCi } from "@skyward/testing";
import { describe, expect, it } from "vitest";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const built = existsSync(new URL("../dist/index.js", import.meta.url));

describe.skipIf(!built && !isCi())('[providers.x] type = "aws" in skyward.toml', () => {
  const providerEntry = (toml: string) => {
    const config = validateConfig(parseConfigText(toml));
    const entry = config.providers.cloud;
    if (!entry) throw new Error("no providers.cloud");
    return entry;
  };

  it("loads this package and creates the provider from the table's settings", async () => {
    const entry = providerEntry(`
[providers.cloud]
type = "aws"
region = "eu-west-1"
ssh_user = "ec2-user"
instance_profile = "skyward-s3"
on_demand_prices = { "g5.xlarge" = 0.9 }
`);
    expect(entry.package).toBe("@skyward/provider-aws");
    const provider = await createProviderFromEntry(entry, packageDirectory);
    expect(isProvider(provider)).toBe(true);
    expect(provider.name).toBe("aws");
  });

  it("takes a credentials table in snake_case, as the Python project's files write it", async () => {
    const entry = providerEntry(`
[providers.cloud]
type = "aws"
region = "eu-west-1"
credentials = { access_key_id = "AKIAEXAMPLE", secret_access_key = "s3cr3t-value" }
`);
    expect(isProvider(await createProviderFromEntry(entry, packageDirectory))).toBe(true);
    // Its fields are checked as the credentials' own: an unknown one is named at its path.
    const bad = providerEntry(`
[providers.cloud]
type = "aws"
credentials = { access_key_id = "AKIAEXAMPLE", secret_access_key = "s3cr3t-value", role = "x" }
`);
    const error = await createProviderFromEntry(bad, packageDirectory).catch((caught: unknown) => caught);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).issues.map((issue) => issue.path)).toEqual([
      "providers.cloud.credentials.role",
    ]);
    expect((error as Error).message).not.toContain("s3cr3t-value");
  });

  it("reports a bad setting at its path in the file", async () => {
    const entry = providerEntry(`
[providers.cloud]
type = "aws"
region = "nowhere"
zone = "a"
`);
    const error = await createProviderFromEntry(entry, packageDirectory).catch((caught: unknown) => caught);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).issues).toEqual([
      { path: "providers.cloud.region", message: 'expected a region such as "us-east-1"' },
      { path: "providers.cloud.zone", message: "unknown field" },
    ]);
  });
});
