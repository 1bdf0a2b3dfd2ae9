/**
 * `skyward offers --provider novita` end to end: the built CLI, in a project whose skyward.toml points
 * a `type = "novita"` provider at the fake of Novita's API (`@skyward/provider-novita`'s
 * `test/fake-novita.ts`, built from Novita's API reference), with the API key in the environment only.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CliProject, createCliProject, tableRows as rows } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeNovita, startFakeNovita, TEST_API_KEY } from "../../provider-novita/test/fake-novita.js";
import { CLI } from "./run-cli.js";

const cliModules = fileURLToPath(new URL("../node_modules/@skyward", import.meta.url));

let project: CliProject;
let fake: FakeNovita;
const run = (args: readonly string[], env: Record<string, string> = { NOVITA_API_KEY: TEST_API_KEY }) =>
  project.run(args, env);

beforeAll(async () => {
  fake = await startFakeNovita();
  project = await createCliProject({
    cli: CLI,
    prefix: "skyward-cli-novita-",
    packages: { "provider-novita": join(cliModules, "provider-novita") },
    toml: `[providers.gpus]\ntype = "novita"\napi_url = "${fake.apiUrl}"\n`,
  });
});

afterAll(async () => {
  await fake?.[Symbol.asyncDispose]();
  await project?.[Symbol.asyncDispose]();
});

describe("skyward offers --provider novita", () => {
  it("lists Novita's GPU products with spot and on-demand prices in USD per hour", async () => {
    const result = await run(["offers", "--provider", "novita", "--accelerator", "RTX_4090"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(rows(result.stdout)).toEqual([
      ["gpus", "RTX 4090 24GB", "RTX_4090 24GB", "16", "62 GB", "0.170", "0.350", "any"],
    ]);
    expect(fake.requests.every((request) => request.authorization === `Bearer ${TEST_API_KEY}`)).toBe(true);
    expect(result.stdout + result.stderr).not.toContain(TEST_API_KEY);
  });

  it("--json gives the offers themselves; --spot asks the spot market only", async () => {
    const result = await run(["offers", "--provider", "gpus", "--accelerator", "A100", "--spot", "--json"]);
    expect(result.code).toBe(0);
    const offers = JSON.parse(result.stdout) as { id: string; spotPrice: number; onDemandPrice: number }[];
    expect(offers.map((offer) => [offer.id, offer.spotPrice, offer.onDemandPrice])).toEqual([
      ["novita:8:x1", 0.75, null],
    ]);
  });

  it("without a key, says which variable to set", async () => {
    const result = await run(["offers", "--provider", "novita", "--accelerator", "A100"], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("NOVITA_API_KEY");
  });
});
