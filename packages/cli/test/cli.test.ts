/**
 * The `skyward` command end to end: the built `dist/cli.js` run as a child process in a temporary
 * project whose skyward.toml loads a fake third-party provider package (`test/fixtures/fake-provider-package`)
 * whose offers and instances live in JSON files.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Instance, Offer } from "@skyward/core/contract";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const bin = fileURLToPath(new URL("../bin/skyward.js", import.meta.url));
const fixturePackage = fileURLToPath(new URL("./fixtures/fake-provider-package", import.meta.url));

const ENV_KEY = "sk-fake-env-0123456789abcdef";
const TOML_KEY = "toml-secret-key-9876543210";
const PRIVATE_KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAfakefakefake\n-----END OPENSSH PRIVATE KEY-----";
const HOUR = 3_600_000;

function offer(fields: Partial<Offer> & Pick<Offer, "id" | "provider">): Offer {
  return {
    instanceType: fields.id,
    accelerator: null,
    vcpus: 8,
    memoryGb: 32,
    architecture: "x86_64",
    region: "eu-1",
    spotPrice: null,
    onDemandPrice: null,
    pricesAsOf: "2025-06-01",
    specific: {},
    ...fields,
  };
}

function instance(fields: Partial<Instance> & Pick<Instance, "id" | "tags">): Instance {
  return {
    status: "running",
    publicIp: "203.0.113.5",
    privateIp: "10.0.0.5",
    ssh: null,
    spot: false,
    hourlyPrice: 1,
    offerId: "x",
    createdAt: Date.now() - HOUR,
    ...fields,
  };
}

const a100 = (count: number, memoryGb: number) => ({ name: "A100", count, memoryGb });

function fakeState() {
  const now = Date.now();
  return {
    offers: [
      offer({
        id: "fake.a100x1",
        provider: "fake",
        accelerator: a100(1, 80),
        spotPrice: 1.1,
        onDemandPrice: 2.5,
      }),
      offer({
        id: "fake.a100x8",
        provider: "fake",
        accelerator: a100(8, 80),
        vcpus: 96,
        memoryGb: 1152,
        onDemandPrice: 16,
      }),
      offer({
        id: "fake.h100",
        provider: "fake",
        accelerator: { name: "H100", count: 1, memoryGb: 80 },
        spotPrice: 0.5,
        onDemandPrice: 3.5,
      }),
      // Labelled H100s: the fake provider ignores a query's form factor, the CLI does not.
      offer({
        id: "fake.h100-sxm",
        provider: "fake",
        accelerator: { name: "H100", count: 1, memoryGb: 80, formFactor: "SXM" },
        onDemandPrice: 3.9,
      }),
      offer({
        id: "fake.h100-pcie",
        provider: "fake",
        accelerator: { name: "H100", count: 1, memoryGb: 80, formFactor: "PCIe" },
        onDemandPrice: 2.9,
      }),
      offer({ id: "fake.cpu", provider: "fake", spotPrice: 0.02, onDemandPrice: 0.05 }),
    ],
    instances: [
      instance({
        id: "i-a",
        hourlyPrice: 2.5,
        createdAt: now - 3 * HOUR,
        tags: { "skyward:cluster": "c1", "skyward:pool": "p1" },
      }),
      instance({
        id: "i-b",
        status: "pending",
        hourlyPrice: 1.1,
        createdAt: now - 30 * 60_000,
        tags: { "skyward:cluster": "c1", "skyward:pool": "p1" },
      }),
      instance({
        id: "i-c",
        spot: true,
        hourlyPrice: 0.9,
        createdAt: now - 50 * HOUR,
        ssh: { host: "203.0.113.5", port: 22, user: "root", privateKey: PRIVATE_KEY },
        tags: { "skyward:cluster": "c2" },
      }),
      instance({ id: "i-d", status: "terminated", tags: { "skyward:cluster": "c1", "skyward:pool": "p1" } }),
      instance({ id: "i-f", tags: { "skyward:cluster": "c3", "skyward:pool": "p3" } }),
    ],
  };
}

function cheapState() {
  return {
    offers: [
      offer({
        id: "cheap.a100",
        provider: "cheapfake",
        accelerator: a100(1, 40),
        region: "us-2",
        onDemandPrice: 1.2,
      }),
      offer({
        id: "cheap.a100x2",
        provider: "cheapfake",
        accelerator: a100(2, 40),
        region: "us-2",
        spotPrice: 0.9,
        onDemandPrice: 3,
      }),
    ],
    instances: [
      instance({ id: "i-e", hourlyPrice: 1.2, tags: { "skyward:cluster": "c9", "skyward:pool": "p2" } }),
    ],
  };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let scratch = "";
let project = "";
let home = "";

function run(
  args: readonly string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args],
      {
        cwd: options.cwd ?? project,
        // A minimal environment: the fake's key, and a HOME without ~/.skyward/defaults.toml.
        env: { PATH: process.env.PATH ?? "", HOME: home, FAKE_CLOUD_API_KEY: ENV_KEY, ...options.env },
        timeout: 30_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

async function state(name: "fake" | "cheap"): Promise<{
  instances: Instance[];
  calls: { method: string; cluster: string; ids: string[] }[];
}> {
  const saved = JSON.parse(await readFile(join(scratch, `${name}.json`), "utf8"));
  return { instances: saved.instances, calls: saved.calls ?? [] };
}

/** The table's data lines, as arrays of cells. */
function rows(stdout: string): string[][] {
  return stdout
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s{2,}/));
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-cli-"));
  project = join(scratch, "project");
  home = join(scratch, "home");
  await mkdir(join(project, "node_modules"), { recursive: true });
  await mkdir(home);
  await symlink(fixturePackage, join(project, "node_modules", "skyward-provider-fake"), "dir");
  const entry = (name: string, lines: string[]) =>
    [`[providers.${name}]`, 'type = "fake"', 'package = "skyward-provider-fake"', ...lines, ""].join("\n");
  await writeFile(
    join(project, "skyward.toml"),
    [
      entry("fake", [`state_file = "${join(scratch, "fake.json")}"`]),
      entry("cheapfake", [`state_file = "${join(scratch, "cheap.json")}"`, 'provider_name = "cheapfake"']),
      entry("leaky-env", [`state_file = "${join(scratch, "fake.json")}"`, "leak_secrets = true"]),
      entry("leaky-toml", [
        `state_file = "${join(scratch, "fake.json")}"`,
        "leak_secrets = true",
        `api_key = "${TOML_KEY}"`,
      ]),
      '[providers.missing]\ntype = "fake"\npackage = "skyward-provider-missing"\n',
    ].join("\n"),
  );
});

beforeEach(async () => {
  await writeFile(join(scratch, "fake.json"), JSON.stringify(fakeState()));
  await writeFile(join(scratch, "cheap.json"), JSON.stringify(cheapState()));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("skyward offers", () => {
  it("prints every provider's offers for the accelerator as one table, cheapest first", async () => {
    const result = await run(["offers", "--accelerator", "A100", "--provider", "fake,cheapfake"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const [header] = result.stdout.split("\n");
    expect(header?.split(/\s{2,}/)).toEqual([
      "PROVIDER",
      "INSTANCE TYPE",
      "ACCELERATOR",
      "VCPUS",
      "MEMORY",
      "SPOT $/H",
      "ON-DEMAND $/H",
      "REGION",
    ]);
    expect(rows(result.stdout)).toEqual([
      ["cheapfake", "cheap.a100x2", "2x A100 40GB", "8", "32 GB", "0.900", "3.000", "us-2"],
      ["fake", "fake.a100x1", "A100 80GB", "8", "32 GB", "1.100", "2.500", "eu-1"],
      ["cheapfake", "cheap.a100", "A100 40GB", "8", "32 GB", "-", "1.200", "us-2"],
      ["fake", "fake.a100x8", "8x A100 80GB", "96", "1152 GB", "-", "16.000", "eu-1"],
    ]);
  });

  it("--spot keeps offers with a spot price, ranked by it; --max-price caps the price", async () => {
    const spot = await run([
      "offers",
      "--accelerator",
      "A100",
      "--provider",
      "fake",
      "--provider",
      "cheapfake",
      "--spot",
    ]);
    expect(spot.code).toBe(0);
    expect(rows(spot.stdout).map((cells) => cells[1])).toEqual(["cheap.a100x2", "fake.a100x1"]);

    const capped = await run([
      "offers",
      "--accelerator",
      "A100",
      "--provider",
      "fake,cheapfake",
      "--max-price",
      "1.15",
    ]);
    expect(capped.code).toBe(0);
    expect(rows(capped.stdout).map((cells) => cells[1])).toEqual(["cheap.a100x2", "fake.a100x1"]);

    const eight = await run(["offers", "--accelerator", "A100:8", "--provider", "fake,cheapfake"]);
    expect(rows(eight.stdout).map((cells) => cells[1])).toEqual(["fake.a100x8"]);

    const memory = await run(["offers", "--accelerator", "A100-80GB", "--provider", "fake,cheapfake"]);
    expect(rows(memory.stdout).map((cells) => cells[1])).toEqual(["fake.a100x1", "fake.a100x8"]);

    const none = await run(["offers", "--accelerator", "A100", "--provider", "fake", "--max-price", "0.5"]);
    expect(none).toMatchObject({ code: 0, stdout: "No offers match.\n" });
  });

  it("a form factor asked for leaves out offers labelled with another, and marks those that do not say", async () => {
    const sxm = await run(["offers", "--accelerator", "H100-SXM", "--provider", "fake"]);
    expect(sxm.code).toBe(0);
    expect(rows(sxm.stdout).map((cells) => [cells[1], cells[2]])).toEqual([
      ["fake.h100", "H100 SXM? 80GB"],
      ["fake.h100-sxm", "H100 SXM 80GB"],
    ]);
    expect(sxm.stderr).toBe(
      "skyward: 1 offer does not say its form factor (marked SXM?); listed, not checked\n",
    );
    const pcie = await run(["offers", "--accelerator", "H100 PCIe", "--provider", "fake", "--json"]);
    expect((JSON.parse(pcie.stdout) as Offer[]).map((entry) => entry.id)).toEqual([
      "fake.h100",
      "fake.h100-pcie",
    ]);
    const any = await run(["offers", "--accelerator", "H100", "--provider", "fake"]);
    expect(any.stderr).toBe("");
    expect(rows(any.stdout).map((cells) => [cells[1], cells[2]])).toEqual([
      ["fake.h100", "H100 80GB"],
      ["fake.h100-pcie", "H100 PCIe 80GB"],
      ["fake.h100-sxm", "H100 SXM 80GB"],
    ]);
  });

  it("--json prints the offers themselves, in the same order; no --accelerator means CPU-only machines", async () => {
    const result = await run(["offers", "--accelerator", "a100", "--provider", "fake,cheapfake", "--json"]);
    expect(result.code).toBe(0);
    const offers = JSON.parse(result.stdout) as Offer[];
    expect(offers.map((entry) => entry.id)).toEqual([
      "cheap.a100x2",
      "fake.a100x1",
      "cheap.a100",
      "fake.a100x8",
    ]);
    expect(offers[1]).toEqual(fakeState().offers[0]);

    const cpu = await run(["offers", "--provider", "fake", "--json"]);
    expect((JSON.parse(cpu.stdout) as Offer[]).map((entry) => entry.id)).toEqual(["fake.cpu"]);
  });

  it("asks every configured provider; one that cannot be loaded or used is reported in one line and skipped", async () => {
    const result = await run(["offers", "--accelerator", "A100"]);
    expect(result.code).toBe(0);
    expect(rows(result.stdout).map((cells) => cells[1])).toEqual([
      "cheap.a100x2",
      "fake.a100x1",
      "cheap.a100",
      "fake.a100x8",
    ]);
    expect(result.stderr.trim().split("\n").sort()).toEqual(
      [
        "skyward: skipped leaky-env: 401 Unauthorized: the API key [redacted] was rejected",
        "skyward: skipped leaky-toml: 401 Unauthorized: the API key [redacted] was rejected",
        "skyward: skipped missing: package skyward-provider-missing is not installed (npm install skyward-provider-missing)",
        // The leaky providers print their key too; the CLI masks it there as well.
        "[fake] GET /v1/offers Authorization: Bearer [redacted]",
        "[fake] GET /v1/offers Authorization: Bearer [redacted]",
      ].sort(),
    );
  });

  it("fails with exit code 1 when no provider could be asked, with the reason", async () => {
    const missing = await run(["offers", "--provider", "missing"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      "skyward: skipped missing: package skyward-provider-missing is not installed (npm install skyward-provider-missing)\n" +
        "skyward: no provider could be asked for offers\n",
    );
    const noKey = await run(["offers", "--provider", "fake"], { env: { FAKE_CLOUD_API_KEY: "" } });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain("skyward: skipped fake: fake: set FAKE_CLOUD_API_KEY or pass api_key\n");
  });
});

describe("skyward offers' failed providers", () => {
  it("are reported in the order they were asked for, each naming the provider, whichever fails first", async () => {
    const other = join(scratch, "order-project");
    await mkdir(join(other, "node_modules"), { recursive: true });
    await symlink(fixturePackage, join(other, "node_modules", "skyward-provider-fake"), "dir").catch(
      () => {},
    );
    const entry = (name: string, lines: string[]) =>
      [`[providers.${name}]`, 'type = "fake"', 'package = "skyward-provider-fake"', ...lines, ""].join("\n");
    const stateFile = `state_file = "${join(scratch, "fake.json")}"`;
    await writeFile(
      join(other, "skyward.toml"),
      [
        entry("quick-refused", [stateFile, "leak_secrets = true"]),
        // Asked first, it fails last: its answer takes a while.
        entry("slow-refused", [stateFile, "leak_secrets = true", "offers_delay_ms = 500"]),
        entry("fine", [stateFile]),
        '[providers.missing]\ntype = "fake"\npackage = "skyward-provider-missing"\n',
      ].join("\n"),
    );
    const skipped = (stderr: string) =>
      stderr
        .split("\n")
        .filter((line) => line.startsWith("skyward: skipped "))
        .map((line) => line.slice("skyward: skipped ".length).split(":")[0]);
    const asked = await run(
      ["offers", "--accelerator", "A100", "--provider", "slow-refused,missing,fine,quick-refused"],
      { cwd: other },
    );
    expect(asked.code).toBe(0);
    expect(skipped(asked.stderr)).toEqual(["slow-refused", "missing", "quick-refused"]);
    // Without --provider: the order of skyward.toml.
    const all = await run(["offers", "--accelerator", "A100"], { cwd: other });
    expect(skipped(all.stderr)).toEqual(["quick-refused", "slow-refused", "missing"]);
    // skyward instances and down list the same way.
    for (const command of [["instances"], ["down", "--all", "--yes"]]) {
      const listed = await run([...command, "--provider", "slow-refused,missing,fine,quick-refused"], {
        cwd: other,
      });
      expect(skipped(listed.stderr)).toEqual(["slow-refused", "missing", "quick-refused"]);
    }
  });
});

describe("skyward instances", () => {
  it("lists the live instances Skyward tagged, with pool, hourly price, cost so far and age, then each pool's cost", async () => {
    const result = await run(["instances", "--provider", "fake,cheapfake"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const [instances = "", pools = ""] = result.stdout.split("\n\n");
    expect(instances.split("\n")[0]?.split(/\s{2,}/)).toEqual([
      "PROVIDER",
      "INSTANCE",
      "STATUS",
      "POOL",
      "SPOT",
      "$/H",
      "COST",
      "AGE",
      "ADDRESS",
    ]);
    // Cost so far: the hourly price times the age (the fixtures' ages are whole hours or half of one).
    expect(rows(instances)).toEqual([
      ["cheapfake", "i-e", "running", "p2", "no", "1.200", "1.20", "1h", "203.0.113.5"],
      ["fake", "i-c", "running", "c2", "yes", "0.900", "45.00", "2d2h", "203.0.113.5"],
      ["fake", "i-a", "running", "p1", "no", "2.500", "7.50", "3h", "203.0.113.5"],
      ["fake", "i-f", "running", "p3", "no", "1.000", "1.00", "1h", "203.0.113.5"],
      ["fake", "i-b", "pending", "p1", "no", "1.100", "0.55", "30m", "203.0.113.5"],
    ]);
    expect(pools.split("\n")[0]?.split(/\s{2,}/)).toEqual(["POOL", "PROVIDER", "INSTANCES", "$/H", "COST"]);
    expect(rows(pools)).toEqual([
      ["p2", "cheapfake", "1", "1.200", "1.20"],
      ["c2", "fake", "1", "0.900", "45.00"],
      ["p1", "fake", "2", "3.600", "8.05"],
      ["p3", "fake", "1", "1.000", "1.00"],
    ]);
  });

  it("--json prints them without private keys", async () => {
    const result = await run(["instances", "--provider", "fake", "--json"]);
    expect(result.code).toBe(0);
    const listed = JSON.parse(result.stdout) as (Instance & { provider: string })[];
    expect(listed.map((entry) => entry.id)).toEqual(["i-c", "i-a", "i-f", "i-b"]);
    expect(listed[0]).toMatchObject({
      provider: "fake",
      ssh: { host: "203.0.113.5", port: 22, user: "root" },
    });
    // 0.9 $/h for 50 hours (and the seconds the test has run since the fixture was written)
    expect((listed[0] as unknown as { costSoFar: number }).costSoFar).toBeCloseTo(45, 1);
    expect(result.stdout).not.toContain("PRIVATE KEY");
    expect(result.stdout).not.toContain("privateKey");
  });
});

describe("skyward down", () => {
  it("--pool terminates only that pool's live instances, and says which", async () => {
    const result = await run(["down", "--pool", "p1", "--provider", "fake,cheapfake"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Terminated i-a (fake, pool p1)\n");
    expect(result.stdout).toContain("Terminated i-b (fake, pool p1)\n");
    expect((await state("fake")).calls).toEqual([
      { method: "terminate", cluster: "c1", ids: ["i-a", "i-b"] },
    ]);
    expect((await state("cheap")).calls).toEqual([]);

    const after = await run(["instances", "--provider", "fake,cheapfake"]);
    expect(rows(after.stdout.split("\n\n")[0] ?? "").map((cells) => cells[1])).toEqual(["i-e", "i-c", "i-f"]);

    const again = await run(["down", "--pool", "p1", "--provider", "fake"]);
    expect(again).toMatchObject({ code: 0, stdout: "No live instances in pool p1.\n" });
  });

  it("--pool also accepts a cluster id (pools without a skyward:pool tag)", async () => {
    const result = await run(["down", "--pool", "c2", "--provider", "fake", "--json"]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([{ provider: "fake", id: "i-c", pool: "c2" }]);
  });

  it("--all terminates every live instance at every provider asked", async () => {
    const result = await run(["down", "--all", "--yes", "--provider", "fake,cheapfake"]);
    expect(result.code).toBe(0);
    for (const id of ["i-a", "i-b", "i-c", "i-e", "i-f"])
      expect(result.stdout).toContain(`Terminated ${id} `);
    expect(result.stdout).not.toContain("i-d");
    expect((await state("fake")).calls.flatMap((call) => call.ids).sort()).toEqual([
      "i-a",
      "i-b",
      "i-c",
      "i-f",
    ]);
    const after = await run(["instances", "--provider", "fake,cheapfake"]);
    expect(after).toMatchObject({ code: 0, stdout: "No live instances.\n" });
  });

  it("an empty --provider (a script's unset variable) or --pool is refused, never taken as every provider or pool", async () => {
    const cases: [string[], string][] = [
      [["down", "--all", "--yes", "--provider", ""], '--provider expects provider names, received ""'],
      [["down", "--all", "--yes", "--provider", " , "], '--provider expects provider names, received " , "'],
      [
        ["down", "--all", "--yes", "--provider", "fake,"],
        '--provider expects provider names, received "fake,"',
      ],
      [["down", "--pool", "", "--provider", "fake"], '--pool expects a pool id, received ""'],
      [["instances", "--provider", ""], '--provider expects provider names, received ""'],
    ];
    for (const [args, message] of cases) {
      const result = await run(args);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toContain(message);
      expect(result.stdout).toBe("");
    }
    expect((await state("fake")).calls).toEqual([]);
    expect((await state("cheap")).calls).toEqual([]);
  });

  it("in a terminal, asks first and terminates nothing unless the answer is yes", async () => {
    const script = `
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
output = b""
while b"[y/N]" not in output:
    output += os.read(fd, 4096)
os.write(fd, sys.stdin.readline().encode())
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    output += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(output.decode())
sys.exit(os.waitstatus_to_exitcode(status))
`;
    const ask = (answer: string) =>
      spawnSync("python3", ["-c", script, process.execPath, cli, "down", "--all", "--provider", "fake"], {
        cwd: project,
        env: { PATH: process.env.PATH ?? "", HOME: home, FAKE_CLOUD_API_KEY: ENV_KEY },
        input: `${answer}\n`,
        encoding: "utf8",
        timeout: 30_000,
      });
    const declined = ask("n");
    expect(declined.stdout).toContain("Terminate 4 instances? [y/N]");
    expect(declined.stdout).toContain("Nothing terminated.");
    expect(declined.status).toBe(1);
    expect((await state("fake")).calls).toEqual([]);

    const accepted = ask("y");
    expect(accepted.status).toBe(0);
    expect(accepted.stdout).toContain("Terminated i-a (fake, pool p1)");
    expect((await state("fake")).calls).toHaveLength(3);
  });
});

describe("errors", () => {
  it("an unknown provider type in skyward.toml fails with the field, what is expected, and exit code 2", async () => {
    const other = join(scratch, "bad-project");
    await mkdir(other, { recursive: true });
    await writeFile(join(other, "skyward.toml"), '[providers.bad]\ntype = "nope"\n');
    const result = await run(["offers", "--accelerator", "A100"], { cwd: other });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(
      'providers.bad.type: unknown provider type "nope": expected one of "aws", "gcp", "hyperstack", "kubernetes", "novita", "runpod", "slurm", "ssh", "tensordock", "vastai", "verda", or set package = "…" for a third-party provider',
    );
  });

  it("an unknown --provider, command, flag or accelerator is a usage error (exit code 2)", async () => {
    const provider = await run(["instances", "--provider", "nope"]);
    expect(provider.code).toBe(2);
    expect(provider.stderr).toContain(
      'skyward: unknown provider "nope": expected one of "fake", "cheapfake", "leaky-env", "leaky-toml", "missing", "aws", "gcp", "hyperstack", "kubernetes", "novita", "runpod", "slurm", "ssh", "tensordock", "vastai", "verda"',
    );
    const command = await run(["launch"]);
    expect(command.code).toBe(2);
    expect(command.stderr).toContain(
      'skyward: unknown command "launch" (expected offers, instances, down, logs, pools, status or attach)',
    );
    const flag = await run(["offers", "--gpu", "A100"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--gpu'");
    const accelerator = await run(["offers", "--accelerator", "A1000000"]);
    expect(accelerator.code).toBe(2);
    expect(accelerator.stderr).toContain('skyward: --accelerator: unknown accelerator "A1000000"');
    const down = await run(["down", "--provider", "fake"]);
    expect(down.code).toBe(2);
    expect(down.stderr).toContain("skyward: down needs either --pool ID or --all");
    // Past the longest timer Node keeps (about 24.8 days): it would fire at once, aborting the command.
    const wait = await run(["down", "--all", "--yes", "--provider", "fake", "--wait", "2200000"]);
    expect(wait.code).toBe(2);
    expect(wait.stderr).toContain(
      '--wait expects at most 2147423 seconds (about 24 days), received "2200000"',
    );
    const timeout = await run(["instances", "--provider", "fake", "--timeout", "1e9"]);
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toContain(
      '--timeout expects at most 2147483 seconds (about 24 days), received "1e9"',
    );
    expect((await state("fake")).calls).toEqual([]);
    const price = await run(["offers", "--max-price", "cheap"]);
    expect(price.code).toBe(2);
    expect(price.stderr).toContain('--max-price expects a number > 0, received "cheap"');
  });
});

describe("the package's bin", () => {
  it("bin/skyward.js runs the built CLI, with its output and exit code", () => {
    const result = spawnSync(bin, ["launch"], {
      cwd: project,
      env: { PATH: process.env.PATH ?? "", HOME: home },
    });
    expect(result.status).toBe(2);
    expect(result.stderr.toString()).toContain('skyward: unknown command "launch"');
  });
});

describe("secrets", () => {
  it("API keys from the environment and from skyward.toml never reach stdout or stderr, even on errors", async () => {
    const runs = await Promise.all([
      run(["offers", "--accelerator", "A100"]),
      run(["offers", "--provider", "leaky-env"]),
      run(["offers", "--provider", "leaky-toml", "--json"]),
      run(["instances", "--provider", "leaky-env,leaky-toml"]),
      run(["instances", "--provider", "leaky-toml", "--json"], { env: { SKYWARD_DEBUG: "1" } }),
      run(["down", "--all", "--provider", "leaky-env,leaky-toml"]),
      run(["instances", "--provider", "fake", "--json"]),
    ]);
    for (const result of runs) {
      const output = result.stdout + result.stderr;
      expect(output).not.toContain(ENV_KEY);
      expect(output).not.toContain(TOML_KEY);
      expect(output).not.toContain("fakefakefake");
    }
    expect(runs.slice(1, 6).map((result) => result.code)).toEqual([1, 1, 1, 1, 1]);
    expect(runs[1]?.stderr).toContain("401 Unauthorized: the API key [redacted] was rejected");
  });
});
