/**
 * `skyward offers --provider verda` end to end: the built CLI, in a project whose skyward.toml points
 * a `type = "verda"` provider at the fake of Verda's API (`@skyward/provider-verda`'s
 * `test/fake-verda.ts`, built from Verda's API reference), with the client credentials in the
 * environment only.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CliProject, createCliProject, tableRows as rows } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type FakeVerda,
  startFakeVerda,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
} from "../../provider-verda/test/fake-verda.js";
import { CLI } from "./run-cli.js";

const cliModules = fileURLToPath(new URL("../node_modules/@skyward", import.meta.url));

let project: CliProject;
let fake: FakeVerda;
const run = (args: readonly string[]) => project.run(args);

beforeAll(async () => {
  fake = await startFakeVerda();
  project = await createCliProject({
    cli: CLI,
    prefix: "skyward-cli-verda-",
    packages: { "provider-verda": join(cliModules, "provider-verda") },
    toml: `[providers.fin]\ntype = "verda"\napi_url = "${fake.apiUrl}"\n`,
    env: { VERDA_CLIENT_ID: TEST_CLIENT_ID, VERDA_CLIENT_SECRET: TEST_CLIENT_SECRET },
  });
});

afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await project?.[Symbol.asyncDispose]();
});

describe("skyward offers --provider verda", () => {
  it("lists Verda's GPU offers with spot and on-demand prices, per location with capacity", async () => {
    const result = await run(["offers", "--provider", "verda", "--accelerator", "A100"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(rows(result.stdout)).toEqual([
      ["fin", "1A100.80S.22V", "A100 SXM 80GB", "22", "120 GB", "0.560", "1.290", "ICE-01"],
    ]);
    // The token came from the client credentials; every later call carried it.
    const token = fake.requests.find((request) => request.path === "/v1/oauth2/token");
    expect(token?.body).toMatchObject({ grant_type: "client_credentials", client_id: TEST_CLIENT_ID });
    expect(
      fake.requests
        .filter((request) => request.path !== "/v1/oauth2/token")
        .every((request) => request.authorization?.startsWith("Bearer eyJ")),
    ).toBe(true);
  });

  it("without --accelerator lists CPU instances, and --spot keeps those with a spot price", async () => {
    const all = await run(["offers", "--provider", "fin"]);
    expect(all.code).toBe(0);
    expect(rows(all.stdout).map((row) => [row[1], row[5], row[6], row[7]])).toEqual([
      ["CPU.4V.16G", "0.0155", "0.0387", "FIN-01"],
      ["CPU.4V.16G", "-", "0.0387", "ICE-01"],
      ["CPU.8V.32G", "-", "0.0774", "FIN-01"],
    ]);
    const spot = await run(["offers", "--provider", "verda", "--spot", "--json"]);
    expect(spot.code).toBe(0);
    const offers = JSON.parse(spot.stdout) as { id: string; provider: string; spotPrice: number }[];
    expect(offers.map((offer) => [offer.id, offer.provider, offer.spotPrice])).toEqual([
      ["verda:FIN-01:CPU.4V.16G", "verda", 0.0155],
    ]);
    for (const output of [all.stdout, all.stderr, spot.stdout, spot.stderr])
      expect(output).not.toContain(TEST_CLIENT_SECRET);
  });

  it("says which credential is missing, naming the variables", async () => {
    const result = await project.run(["offers", "--provider", "verda"], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("VERDA_CLIENT_ID");
    expect(result.stderr).toContain("VERDA_CLIENT_SECRET");
  });
});
