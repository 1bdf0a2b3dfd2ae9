import { join } from "node:path";
import { options, spec } from "@skyward/core";
import { type Offer, resolvePoolSpec } from "@skyward/core/contract";
import { builtCli, type CliProject, isCi, tableRows as rows } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GCP } from "../src/index.js";
import {
  type FakeGce,
  fakeGcpSettings,
  fakeLeftovers,
  PROJECT,
  startFakeGce,
  TEST_ACCESS_TOKEN,
} from "./fake-gce.js";

const cli = builtCli(import.meta.url, "provider-gcp");

describe.skipIf(!cli.built && !isCi())("skyward offers --provider gcp (fake Compute Engine)", () => {
  let fake: FakeGce;
  let project: CliProject;
  const environment = { NO_COLOR: "1", GOOGLE_OAUTH_ACCESS_TOKEN: TEST_ACCESS_TOKEN };
  const run = (args: readonly string[]) => project.run(args);

  beforeAll(async () => {
    fake = await startFakeGce();
    project = await cli.project({
      prefix: "skyward-gcp-cli-",
      toml: `[providers.gcp]\ntype = "gcp"\nproject = "${PROJECT}"\nzone = "us-central1-a"\napi_endpoint = "${fake.endpoint}"\nbilling_endpoint = "${fake.endpoint}"\n`,
      env: environment,
    });
  });

  afterAll(async () => {
    await fake?.close();
    await project?.[Symbol.asyncDispose]();
  });

  it("lists T4 offers (N1 with an attached T4) priced from the Catalog's parts, cheapest first", async () => {
    const result = await run(["offers", "--accelerator", "T4", "--provider", "gcp"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const table = rows(result.stdout);
    // n1-standard-4: 4 vCPUs × 0.031611 + 15 GiB × 0.004237 + T4 0.35 = 0.54 on demand;
    // spot 4 × 0.00698 + 15 × 0.000936 + 0.14 = 0.182.
    expect(table).toContainEqual([
      "gcp",
      "n1-standard-4 + 1x nvidia-tesla-t4",
      "T4 16GB",
      "4",
      "15 GB",
      "0.182",
      "0.540",
      "us-central1-a",
    ]);
    expect(table.map((cells) => cells[1])).toEqual([
      "n1-standard-1 + 1x nvidia-tesla-t4",
      "n1-standard-4 + 1x nvidia-tesla-t4",
      "n1-highmem-4 + 1x nvidia-tesla-t4",
      "n1-standard-8 + 1x nvidia-tesla-t4",
      // A T4 takes up to 48 vCPUs (Compute Engine's GPU machine-types table), so 32 fit beside one.
      "n1-standard-32 + 1x nvidia-tesla-t4",
    ]);
    expect(`${result.stdout}${result.stderr}`).not.toContain(TEST_ACCESS_TOKEN);
    // Every call carried the token, and nothing but reads happened.
    expect(fake.requests.every((request) => request.authorization === `Bearer ${TEST_ACCESS_TOKEN}`)).toBe(
      true,
    );
    expect(fake.requests.filter((request) => request.method !== "GET")).toEqual([]);
  });

  it("--json gives the offers themselves; no --accelerator lists CPU machine types, never shared-core or unpriced ones", async () => {
    const gpu = await run(["offers", "--accelerator", "L4", "--provider", "gcp", "--json"]);
    expect(gpu.code).toBe(0);
    const l4 = JSON.parse(gpu.stdout) as Offer[];
    expect(l4.map((offer) => offer.instanceType)).toEqual(["g2-standard-4"]);
    expect(l4[0]).toMatchObject({
      provider: "gcp",
      accelerator: { name: "L4", count: 1, memoryGb: 24 },
      region: "us-central1-a",
      specific: { zone: "us-central1-a", machineType: "g2-standard-4", acceleratorType: null, gpu: true },
    });

    const cpu = await run(["offers", "--provider", "gcp", "--json"]);
    expect(cpu.code).toBe(0);
    const types = (JSON.parse(cpu.stdout) as Offer[]).map((offer) => offer.instanceType);
    expect(types).toContain("e2-standard-2");
    expect(types).not.toContain("e2-micro");
    expect(types).not.toContain("n2-standard-4");
    expect(types.some((type) => type.startsWith("g2-") || type.startsWith("a2-"))).toBe(false);
  });

  it("skyward instances lists what a dead client's pool left, and skyward down --all removes its VMs and firewall rules", async () => {
    // A client prepared a pool and started a VM, then died: nothing was torn down.
    const gcp = GCP({
      ...fakeGcpSettings(fake),
      keysDirectory: join(project.scratch, "skyward-home", "keys"),
    });
    const signal = AbortSignal.timeout(60_000);
    const [offer] = await gcp.offers({
      query: { accelerator: null, allocation: "on-demand", vcpus: 2 },
      signal,
    });
    const pool = resolvePoolSpec(spec({ nodes: 1, allocation: "on-demand" }), options({}));
    const cluster = await gcp.prepare({ spec: pool, offer: offer as Offer, poolId: "orphan", signal });
    const [vm] = await gcp.provision({ cluster, count: 1, signal });
    expect(fakeLeftovers(fake)).toHaveLength(3);

    const listed = await run(["instances", "--provider", "gcp"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(vm?.id ?? "?");
    expect(listed.stdout).toContain("orphan");

    const down = await run(["down", "--all", "--yes", "--provider", "gcp"]);
    expect(down.code).toBe(0);
    expect(fakeLeftovers(fake)).toEqual([]);
    expect(`${listed.stdout}${listed.stderr}${down.stdout}${down.stderr}`).not.toContain(TEST_ACCESS_TOKEN);
    // Two CLI processes after a provision: 41 s on a machine loaded by a whole CI run, so two minutes.
  }, 120_000);

  it("a wrong token is reported in one line naming the provider, without the token", async () => {
    const result = await project.run(["offers", "--accelerator", "T4", "--provider", "gcp"], {
      ...environment,
      GOOGLE_OAUTH_ACCESS_TOKEN: "ya29.not-the-right-token",
      SKYWARD_HOME: join(project.scratch, "other-home"),
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("gcp");
    expect(result.stderr).toContain("401");
    expect(`${result.stdout}${result.stderr}`).not.toContain("ya29.not-the-right-token");
  });
});
