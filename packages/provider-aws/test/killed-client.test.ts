/**
 * What a killed client leaves on AWS, and the `skyward` command cleaning it up, as a user would: a
 * separate Node process starts a two-node pool on AWS (moto; each EC2 instance is reached on a test-bed
 * host through the provider's `sshAddress` seam, so the pool really is ready) and is killed with
 * SIGKILL, so no teardown runs. Then the built `skyward` CLI, in a project whose `skyward.toml` names
 * the AWS provider (installed in the project's node_modules) and moto's endpoint, lists the orphaned
 * instances and `down --all` removes them, the pool's security group and key pair, and the key's file —
 * and a second, instance-less pool's leftovers too. No credential or private key reaches the output.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DescribeInstancesCommand, EC2Client } from "@aws-sdk/client-ec2";
import { options, spec } from "@skyward/core";
import { type Cluster, resolvePoolSpec } from "@skyward/core/contract";
import { createTestbed, isCi, requireTestbed, type Testbed, testbedSshHosts } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, type AwsClusterData } from "../src/index.js";
import { type MotoServer, motoInventory, motoSkipReason, startMoto } from "./moto-server.js";

const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const cli = join(
  dirname(createRequire(import.meta.url).resolve("@skyward/cli/package.json")),
  "dist",
  "cli.js",
);
const client = fileURLToPath(new URL("./fixtures/killed-client.mjs", import.meta.url));
const tasks = fileURLToPath(new URL("./fixtures/aws_tasks.py", import.meta.url));

// moto takes any credentials: distinctive ones, so the test can tell that none reaches the output.
const ACCESS_KEY_ID = "killedclientaccessid42";
const SECRET_ACCESS_KEY = "killed-client-secret-access-key-0123456789";

function cliSkipReason(): string | undefined {
  if (existsSync(cli)) return undefined;
  const reason = `the skyward CLI is not built (${cli}): run \`pnpm --filter @skyward/cli build\``;
  if (isCi()) throw new Error(reason);
  return reason;
}

const skipReason = motoSkipReason() ?? cliSkipReason() ?? (await requireTestbed());

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return condition();
}

/** The table's data lines, as arrays of cells. */
function rows(stdout: string): string[][] {
  const lines = stdout.trim().split("\n");
  const end = lines.findIndex((line, index) => index > 0 && !/^aws\s/.test(line));
  return lines.slice(1, end === -1 ? undefined : end).map((line) => line.trim().split(/\s{2,}/));
}

describe.skipIf(skipReason !== undefined)("a client killed while its pool runs on AWS (moto)", () => {
  let moto: MotoServer;
  let bed: Testbed;
  let scratch = "";
  let project = "";
  let home = "";
  let child: ChildProcess | undefined;
  let environment: Record<string, string> = {};
  const previous = {
    home: process.env.SKYWARD_HOME,
    access: process.env.AWS_ACCESS_KEY_ID,
    secret: process.env.AWS_SECRET_ACCESS_KEY,
  };

  const run = (args: readonly string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        [cli, ...args],
        { cwd: project, env: environment, timeout: 120_000 },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), "skyward-killed-client-"));
    project = join(scratch, "project");
    home = join(scratch, "home");
    await mkdir(join(project, "node_modules", "@skyward"), { recursive: true });
    await mkdir(join(scratch, "markers"), { recursive: true });
    await mkdir(home);
    moto = await startMoto();
    bed = await createTestbed({ hosts: 2 });
    // The project has the AWS provider installed, and names moto's endpoint in its skyward.toml.
    await symlink(packageDirectory, join(project, "node_modules", "@skyward", "provider-aws"), "dir");
    await writeFile(
      join(project, "skyward.toml"),
      `[providers.aws]\ntype = "aws"\nendpoint = "${moto.endpoint}"\n`,
    );
    // The client and the CLI see only this: a home of their own (keys under ~/.skyward/keys), credentials
    // in the environment, and no way to reach a real credential source.
    environment = {
      PATH: process.env.PATH ?? "",
      HOME: home,
      AWS_ACCESS_KEY_ID: ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY,
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/skyward-test/credentials",
      AWS_CONFIG_FILE: "/nonexistent/skyward-test/config",
      AWS_EC2_METADATA_DISABLED: "true",
    };
  }, 180_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await bed?.teardown();
    await moto?.stop();
    for (const [key, value] of [
      ["SKYWARD_HOME", previous.home],
      ["AWS_ACCESS_KEY_ID", previous.access],
      ["AWS_SECRET_ACCESS_KEY", previous.secret],
    ] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    await rm(scratch, { recursive: true, force: true });
  }, 120_000);

  it("skyward instances finds its instances, and skyward down --all removes them and everything its pool made", async () => {
    // 1. A client starts a pool, shows it ready, and is killed.
    const config = join(scratch, "client.json");
    await writeFile(
      config,
      JSON.stringify({
        endpoint: moto.endpoint,
        tasks,
        markers: join(scratch, "markers"),
        hosts: testbedSshHosts(bed, { keyFile: true }),
      }),
    );
    await chmod(config, 0o600);
    const started = spawn(process.execPath, [client, config], {
      cwd: project,
      env: environment,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = started;
    let output = "";
    started.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    started.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<void>((resolve) => started.once("exit", () => resolve()));
    const ready = await waitUntil(() => /^READY /m.test(output) || started.exitCode !== null, 300_000);
    const line = /^READY (.*)$/m.exec(output)?.[1];
    expect(ready && line !== undefined, `the client did not get ready:\n${output}`).toBe(true);
    const { poolId, sums } = JSON.parse(line as string) as { poolId: string; sums: number[] };
    expect(sums).toEqual([3, 7]);
    expect(poolId).toMatch(/^[0-9a-f]{8}$/);

    const before = await motoInventory(moto.endpoint);
    expect(before.liveInstances).toHaveLength(2);
    expect(before.securityGroups).toHaveLength(1);
    expect(before.keyPairs).toHaveLength(1);
    const keyName = before.keyPairs[0] as string;
    const keyFile = join(home, ".skyward", "keys", `${keyName}.pem`);
    const privateKey = (await readFile(keyFile, "utf8")).trim();
    expect(privateKey).toMatch(/PRIVATE KEY/);

    started.kill("SIGKILL");
    await exited;
    expect(started.signalCode).toBe("SIGKILL");
    // Nothing was cleaned up: the instances, group and key pair are all still there.
    expect(await motoInventory(moto.endpoint)).toEqual(before);

    // A second pool whose client died right after prepare: a security group and key pair, no instance.
    process.env.SKYWARD_HOME = join(home, ".skyward");
    process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
    process.env.AWS_SECRET_ACCESS_KEY = SECRET_ACCESS_KEY;
    const aws = AWS({ endpoint: moto.endpoint });
    const call = { signal: AbortSignal.timeout(60_000), poolId: "orphan01" };
    const [offer] = (
      await aws.offers({
        query: { accelerator: null, vcpus: 2, memoryGb: 4, architecture: "x86_64", allocation: "on-demand" },
        ...call,
      })
    ).filter((candidate) => candidate.instanceType === "t3.medium");
    if (!offer) throw new Error("moto has no t3.medium offer");
    const orphan = (await aws.prepare({
      spec: resolvePoolSpec(spec({ vcpus: 2, allocation: "on-demand" }), options({})),
      offer,
      ...call,
    })) as Cluster<AwsClusterData>;
    expect(existsSync(orphan.specific.keyFile)).toBe(true);

    // 2. skyward instances: both instances of the killed client's pool, with pool, price, age, address.
    const ec2 = new EC2Client({
      region: "us-east-1",
      endpoint: moto.endpoint,
      credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
    });
    const described = new Map(
      (
        await ec2.send(new DescribeInstancesCommand({ InstanceIds: before.liveInstances }))
      ).Reservations?.flatMap((reservation) =>
        (reservation.Instances ?? []).map((instance) => [instance.InstanceId, instance] as const),
      ),
    );
    ec2.destroy();
    const priceOf = (id: string) => {
      const tag = described.get(id)?.Tags?.find((entry) => entry.Key === "skyward:hourly-price");
      const price = Number(tag?.Value);
      expect(price, `the hourly price tagged on ${id}`).toBeGreaterThan(0);
      return price < 0.1 ? price.toFixed(4) : price.toFixed(3);
    };

    const listed = await run(["instances"]);
    expect(listed.stderr).toBe("");
    expect(listed.code).toBe(0);
    expect(listed.stdout.split("\n")[0]?.split(/\s{2,}/)).toEqual([
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
    const table = rows(listed.stdout);
    expect(table.map((cells) => cells[1]).sort()).toEqual([...before.liveInstances].sort());
    for (const cells of table) {
      const id = cells[1] as string;
      expect(cells.slice(0, 6)).toEqual(["aws", id, "running", poolId, "no", priceOf(id)]);
      // Its cost so far: the hourly price times its age (seconds here: a fraction of a cent or more).
      expect(cells[6]).toMatch(/^\d+\.\d{2,4}$/);
      expect(cells[7]).toMatch(/^(\d+s|\d+m)$/);
      expect(cells[8]).toBe(described.get(id)?.PublicIpAddress);
    }
    const json = await run(["instances", "--json"]);
    expect(json.code).toBe(0);
    const listedJson = JSON.parse(json.stdout) as { id: string; ssh: Record<string, unknown> | null }[];
    expect(listedJson.map((entry) => entry.id).sort()).toEqual([...before.liveInstances].sort());
    expect(listedJson.every((entry) => entry.ssh?.identityFile === keyFile)).toBe(true);

    // 3. skyward down --all: terminates both, then removes both pools' groups, key pairs and key files.
    const down = await run(["down", "--all", "--yes"]);
    expect(down.stderr).toBe("");
    expect(down.code).toBe(0);
    const [groupId] = before.securityGroups;
    const lines = down.stdout.split("\n");
    expect(lines.filter((entry) => entry.startsWith("Terminated ")).sort()).toEqual(
      before.liveInstances.map((id) => `Terminated ${id} (aws, pool ${poolId})`).sort(),
    );
    // The killed client's pool id is hex, so it sorts before "orphan01".
    expect(lines.filter((entry) => entry.startsWith("Removed "))).toEqual([
      `Removed key file ${keyFile} (aws, pool ${poolId})`,
      `Removed key pair ${keyName} (aws, pool ${poolId})`,
      `Removed security group ${groupId} (aws, pool ${poolId})`,
      `Removed key file ${orphan.specific.keyFile} (aws, pool orphan01)`,
      `Removed key pair ${orphan.specific.keyName} (aws, pool orphan01)`,
      `Removed security group ${orphan.specific.securityGroupId} (aws, pool orphan01)`,
    ]);
    expect(await motoInventory(moto.endpoint)).toEqual({
      liveInstances: [],
      securityGroups: [],
      keyPairs: [],
      skywardVolumes: [],
    });
    expect(await readdir(join(home, ".skyward", "keys"))).toEqual([]);

    // Again: nothing left, nothing to do.
    expect(await run(["instances"])).toEqual({ code: 0, stdout: "No live instances.\n", stderr: "" });
    expect(await run(["down", "--all", "--yes"])).toEqual({
      code: 0,
      stdout: "No live instances.\n",
      stderr: "",
    });

    // The workers noticed their client was gone and, after the ttl, ran the provider's self-destruct.
    const markers = [0, 1].map((index) => join(scratch, "markers", `self-destructed-${index}`));
    expect(await waitUntil(() => markers.every((marker) => existsSync(marker)), 60_000)).toBe(true);

    // No credential and no private key reached any output.
    for (const text of [output, listed.stdout, json.stdout, down.stdout, down.stderr]) {
      expect(text).not.toContain(SECRET_ACCESS_KEY);
      expect(text).not.toContain(ACCESS_KEY_ID);
      expect(text).not.toContain(privateKey);
      expect(text).not.toContain("PRIVATE KEY");
    }
  }, 420_000);
});
