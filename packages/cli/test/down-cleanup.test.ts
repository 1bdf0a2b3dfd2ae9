/**
 * `skyward down` and the providers' `cleanup`, end to end with the built `dist/cli.js` and the fake
 * provider package: after terminating, what the pools shared goes too — also for pools with no live
 * instance left — and what has to stay is named on stderr with exit code 1. (The same against AWS on
 * moto, with a client killed for real: packages/provider-aws/test/killed-client.test.ts.)
 */
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type CliRun, runCli } from "./run-cli.js";

const fixturePackage = fileURLToPath(new URL("./fixtures/fake-provider-package", import.meta.url));
const API_KEY = "sk-fake-cleanup-0123456789abcdef";

let scratch = "";
let project = "";

function run(args: readonly string[], cwd = project): Promise<CliRun> {
  return runCli(args, {
    cwd,
    env: { PATH: process.env.PATH ?? "", HOME: join(scratch, "home"), FAKE_CLOUD_API_KEY: API_KEY },
  });
}

const instance = (id: string, cluster: string, pool: string) => ({
  id,
  status: "running",
  publicIp: "203.0.113.7",
  privateIp: "10.0.0.7",
  ssh: null,
  spot: false,
  hourlyPrice: 1,
  offerId: "x",
  createdAt: Date.now() - 60_000,
  tags: { "skyward:cluster": cluster, "skyward:pool": pool },
});

/** What a detached cloud pool leaves (state.ts's DetachedPoolState; no token is read here). */
const detached = (id: string, provider = "fake", instanceId = "i-a") => ({
  version: 1,
  id,
  provider,
  providerSettings: {},
  clusterId: `c-${id}`,
  root: null,
  workdir: null,
  instanceType: "x",
  region: "r",
  spot: false,
  nodes: [{ index: 0, instanceId, pid: 0, hourlyPrice: 1 }],
  tasks: [],
  ttl: 600,
  detachedAt: Date.now() - 60_000,
  pid: 1,
  token: "unused",
});

async function clusters(): Promise<string[]> {
  return JSON.parse(await readFile(join(scratch, "state.json"), "utf8")).clusters;
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-cli-cleanup-"));
  project = join(scratch, "project");
  await mkdir(join(project, "node_modules"), { recursive: true });
  await mkdir(join(scratch, "home"));
  await symlink(fixturePackage, join(project, "node_modules", "skyward-provider-fake"), "dir");
  await writeFile(
    join(project, "skyward.toml"),
    [
      "[providers.fake]",
      'type = "fake"',
      'package = "skyward-provider-fake"',
      `state_file = "${join(scratch, "state.json")}"`,
      'slow_to_stop = ["i-slow"]',
      "",
    ].join("\n"),
  );
});

beforeEach(async () => {
  // Pool p1 runs; pools p5 and p6 lost their instances (their clients died) but left their networks;
  // pool p7's instance takes its time to stop.
  await writeFile(
    join(scratch, "state.json"),
    JSON.stringify({
      offers: [],
      instances: [instance("i-a", "c1", "p1"), instance("i-slow", "c7", "p7")],
      clusters: ["c1", "c5", "c6", "c7"],
      clusterPools: { c1: "p1", c5: "p5", c6: "p6", c7: "p7" },
    }),
  );
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("skyward down removes what the pools shared", () => {
  it("--pool with no live instance left still removes that pool's leftovers, and only that pool's", async () => {
    const result = await run(["down", "--pool", "p5"]);
    expect(result).toEqual({
      code: 0,
      stdout: "No live instances in pool p5.\nRemoved network c5 (fake, pool p5)\n",
      stderr: "",
    });
    expect(await clusters()).toEqual(["c1", "c6", "c7"]);
    // Once gone, there is nothing more to remove.
    expect(await run(["down", "--pool", "p5"])).toEqual({
      code: 0,
      stdout: "No live instances in pool p5.\n",
      stderr: "",
    });
  });

  it("--all terminates, then removes every pool's leftovers; what is still in use is named, with exit code 1", async () => {
    const result = await run(["down", "--all", "--yes", "--wait", "0"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("Terminated i-a (fake, pool p1)\n");
    expect(result.stdout).toContain("Terminated i-slow (fake, pool p7)\n");
    expect(result.stdout.split("\n").filter((line) => line.startsWith("Removed "))).toEqual([
      "Removed network c1 (fake, pool p1)",
      "Removed network c5 (fake, pool p5)",
      "Removed network c6 (fake, pool p6)",
    ]);
    expect(result.stderr).toBe("skyward: left network c7 (fake, pool p7): instance i-slow still stopping\n");
    expect(await clusters()).toEqual(["c7"]);
  });

  it("--json lists the terminated instances, then each resource removed or left (with why)", async () => {
    const result = await run(["down", "--pool", "p7", "--json", "--wait", "1"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual([
      { provider: "fake", id: "i-slow", pool: "p7" },
      {
        provider: "fake",
        id: "c7",
        pool: "p7",
        resource: "network",
        removed: false,
        reason: "instance i-slow still stopping",
      },
    ]);
    const cleaned = await run(["down", "--pool", "p6", "--json"]);
    expect(cleaned.code).toBe(0);
    expect(JSON.parse(cleaned.stdout)).toEqual([
      { provider: "fake", id: "c6", pool: "p6", resource: "network", removed: true },
    ]);
  });

  it("forgets a detached pool whose instances it terminated: `skyward pools` no longer lists it", async () => {
    const pools = join(scratch, "home", ".skyward", "pools");
    await mkdir(pools, { recursive: true });
    await writeFile(join(pools, "p1.json"), JSON.stringify(detached("p1")));
    await writeFile(join(pools, "p9.json"), JSON.stringify(detached("p9")));
    expect((await run(["pools", "--json"])).stdout).toContain('"p1"');
    const result = await run(["down", "--pool", "p1", "--yes"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Terminated i-a (fake, pool p1)\nForgot detached pool p1\n");
    const listed = (await run(["pools", "--json"])).stdout;
    expect(listed).not.toContain('"p1"');
    expect(listed).toContain('"p9"'); // another pool's state stays
    await rm(pools, { recursive: true, force: true });
  });

  it("a provider that could list only some regions: what it listed is terminated, the rest named, exit code 1, nothing of its pools removed or forgotten", async () => {
    const inRegion = (id: string, pool: string, region: string) => {
      const base = instance(id, `c-${pool}`, pool);
      return { ...base, tags: { ...base.tags, "fake:region": region } };
    };
    await writeFile(
      join(scratch, "regions.json"),
      JSON.stringify({
        offers: [],
        // Pool q1 has a node in each region; pool q2 lives in the region that is listed.
        instances: [
          inRegion("i-east", "q1", "r-1"),
          inRegion("i-west", "q1", "r-2"),
          inRegion("i-q2", "q2", "r-1"),
        ],
        clusters: ["c-q1", "c-q2"],
        clusterPools: { "c-q1": "q1", "c-q2": "q2" },
      }),
    );
    // The same fake over a state of its own, one of whose regions refuses to be listed.
    const regions = join(scratch, "regions-project");
    await mkdir(join(regions, "node_modules"), { recursive: true });
    await symlink(fixturePackage, join(regions, "node_modules", "skyward-provider-fake"), "dir");
    await writeFile(
      join(regions, "skyward.toml"),
      [
        "[providers.regions]",
        'type = "fake"',
        'package = "skyward-provider-fake"',
        'provider_name = "regions"',
        `state_file = "${join(scratch, "regions.json")}"`,
        'refused_region = "r-2"',
        "",
      ].join("\n"),
    );
    const pools = join(scratch, "home", ".skyward", "pools");
    await mkdir(pools, { recursive: true });
    await writeFile(join(pools, "q1.json"), JSON.stringify(detached("q1", "regions", "i-east")));
    const listedOnly = await run(["instances", "--json"], regions);
    expect(listedOnly.stderr).toBe(
      "skyward: regions listed in part: could not list the instances of a region (r-2: UnauthorizedOperation)\n",
    );
    expect(JSON.parse(listedOnly.stdout).map((row: { id: string }) => row.id)).toEqual(["i-east", "i-q2"]);

    const result = await run(["down", "--all", "--yes"], regions);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("Terminated i-east (regions, pool q1)\n");
    expect(result.stdout).toContain("Terminated i-q2 (regions, pool q2)\n");
    expect(result.stderr).toContain(
      "skyward: regions listed in part: could not list the instances of a region (r-2",
    );
    const state = JSON.parse(await readFile(join(scratch, "regions.json"), "utf8"));
    expect(
      Object.fromEntries(
        state.instances.map((entry: { id: string; status: string }) => [entry.id, entry.status]),
      ),
    ).toEqual({ "i-east": "terminated", "i-west": "running", "i-q2": "terminated" });
    // No cleanup at a provider whose listing was incomplete: the unlisted node may still use them.
    expect(state.clusters).toEqual(["c-q1", "c-q2"]);
    // Pool q1 still has its unlisted node: it is not forgotten.
    expect(result.stdout).not.toContain("Forgot detached pool");
    expect((await run(["pools", "--json"], regions)).stdout).toContain('"q1"');
    await rm(pools, { recursive: true, force: true });
  });

  it("--wait must be a number of seconds", async () => {
    const result = await run(["down", "--all", "--wait", "soon"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--wait expects a number > 0, received "soon"');
  });
});
