/**
 * `skyward.toml` → this package: core's config loader imports `@skyward/provider-gcp` (its built
 * `dist`, as an installed package is) and calls `createProviderFromConfig` with the table's settings.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isProvider } from "@skyward/core/contract";
import { isCi, providerFromToml, tomlProviderIssues } from "@skyward/testing";
import { describe, expect, it } from "vitest";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const built = existsSync(new URL("../dist/index.js", import.meta.url));

describe.skipIf(!built && !isCi())('[providers.x] type = "gcp" in skyward.toml', () => {
  it("loads this package and creates the provider from the table's settings", async () => {
    const { entry, provider } = await providerFromToml(
      `
[providers.cloud]
type = "gcp"
project = "my-project-123"
zone = "europe-west4-a"
ssh_user = "ml"
disk_gb = 200
disk_type = "pd-ssd"
service_account = "skyward@my-project-123.iam.gserviceaccount.com"
`,
      packageDirectory,
    );
    expect(entry.package).toBe("@skyward/provider-gcp");
    expect(isProvider(provider)).toBe(true);
    expect(provider.name).toBe("gcp");
    expect(provider.capabilities.spot).toBe(true);
  });

  it("reports bad settings at their paths in the file", async () => {
    const issues = await tomlProviderIssues(
      `
[providers.cloud]
type = "gcp"
zone = "us-central1"
disk_type = "floppy"
region = "us-central1"
`,
      packageDirectory,
    );
    expect(issues).toEqual([
      { path: "providers.cloud.zone", message: 'expected a zone such as "us-central1-a"' },
      {
        path: "providers.cloud.diskType",
        message: 'expected one of "pd-balanced", "pd-ssd", "pd-standard", "pd-extreme", "hyperdisk-balanced"',
      },
      { path: "providers.cloud.region", message: "unknown field" },
    ]);
  });
});
