/**
 * `skyward-provider-acme` against a fake of the Acme API (`fake-acme.ts`, built from the README's API
 * reference): the fault matrix (a fake without hosts), and, with machines that are real SSH hosts of a
 * `@skyward/testing` test bed, the provider conformance suite, a pool whose workers run on those
 * hosts, and its settings refused by name.
 */
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  runFaultMatrix,
  runProviderConformance,
  type ScratchSkywardHome,
  type Testbed,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Acme } from "../src/index.ts";
import { type FakeAcme, startFakeAcme } from "./fake-acme.ts";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./tasks.py", import.meta.url));

let faulty: FakeAcme;
beforeAll(async () => {
  faulty = await startFakeAcme();
});
afterAll(async () => {
  await faulty?.[Symbol.asyncDispose]();
});

// Every cell applies: Acme answers 429s, takes an idempotency key, deletes in batches (207), refuses
// to delete a provisioning machine, pages its lists. A machine whose client died is found and
// deleted by `skyward down`: Acme runs no boot command to arm a watchdog in.
runFaultMatrix({
  name: "acme",
  create: () => Acme({ apiUrl: faulty.url, apiKey: faulty.apiKey, retryDelayMs: 50 }),
  faults: () => faulty,
  spec: { region: "eu-1" },
  clientKilled: "skyward-down",
});

let bed: Testbed;
let acme: FakeAcme;
let home: ScratchSkywardHome;

if (skipReason === undefined) {
  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-acme-");
    bed = await createTestbed({ hosts: 2 });
    acme = await startFakeAcme(bed.hosts);
  });
  afterAll(async () => {
    await acme?.[Symbol.asyncDispose]();
    await bed?.teardown();
    await home?.[Symbol.asyncDispose]();
  });

  runProviderConformance({
    name: "acme",
    create: () => Acme({ apiUrl: acme.url, apiKey: acme.apiKey, retryDelayMs: 50 }),
    spec: { region: "eu-1" },
    provisionCount: 2,
    leftovers: () => acme.machinesLeft(),
    pool: { image: { includes: [tasks] } },
  });

  describe("a pool on Acme machines", () => {
    it("runs tasks on every machine and deletes them all when it closes", async () => {
      const where = sky.python<[], { node: number; total: number; cwd: string }>("tasks:where");
      {
        await using pool = await sky.compute({
          provider: Acme({ apiUrl: acme.url, apiKey: acme.apiKey }),
          nodes: 2,
          image: { includes: [tasks] },
          options: { console: false },
        });
        const seen = await pool.broadcast(where());
        expect(seen.map((entry) => [entry.node, entry.total])).toEqual([
          [0, 2],
          [1, 2],
        ]);
        // Each worker runs in the scratch directory of its own machine (the hosts' own roots).
        const roots = bed.hosts.map((host) => host.root);
        for (const entry of seen) expect(roots.some((root) => entry.cwd.startsWith(root))).toBe(true);
        expect(acme.machinesLeft()).toHaveLength(2);
      }
      expect(acme.machinesLeft()).toEqual([]);
      expect(acme.requests).toContain("POST /v1/machines");
    });
  });
} else {
  // Outside CI without root or sshd: say why. Under CI requireTestbed fails instead of skipping.
  it.skip(`the Acme provider on the test bed: ${skipReason}`, () => {});
}

describe("Acme settings", () => {
  it("are refused by name before anything is asked", () => {
    expect(() => Acme({ apiUrl: "not a url" })).toThrow(/apiUrl/);
    expect(() => Acme({ maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => Acme({ colour: "blue" } as never)).toThrow(/colour/);
  });

  it("say where the API key comes from when there is none", async () => {
    const saved = process.env.ACME_API_KEY;
    delete process.env.ACME_API_KEY;
    try {
      const provider = Acme({ apiUrl: "http://127.0.0.1:9" });
      const failure = await provider
        .offers({
          query: { accelerator: null, allocation: "on-demand" },
          signal: AbortSignal.timeout(10_000),
        })
        .catch((error: unknown) => error);
      expect(String(failure)).toMatch(/ACME_API_KEY/);
    } finally {
      if (saved !== undefined) process.env.ACME_API_KEY = saved;
    }
  });
});

describe("docs/providers.md", () => {
  it("shows this provider file as it is (its imports from the package's published subpaths)", async () => {
    const source = await readFile(new URL("../src/index.ts", import.meta.url), "utf8");
    const doc = await readFile(new URL("../../../docs/providers.md", import.meta.url), "utf8");
    const shown = /<!-- acme-provider:start -->\n```ts\n([\s\S]*?)```\n<!-- acme-provider:end -->/.exec(
      doc,
    )?.[1];
    // The file without its module comment, its own modules named as an outside reader imports them.
    const expected = source
      .slice(source.indexOf("*/\n") + 3)
      .replace('from "./acme-api.js";', 'from "skyward-provider-acme/api";')
      .replace('from "./acme-settings.js";', 'from "skyward-provider-acme/settings";');
    expect(shown, "docs/providers.md has the acme-provider block").toBeDefined();
    expect(shown).toBe(expected);
    expect(source.split("\n").length, "the provider file stays under 200 lines").toBeLessThan(200);
  });
});
