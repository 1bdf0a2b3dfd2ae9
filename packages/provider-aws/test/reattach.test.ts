/**
 * Detach and attach on AWS (moto), whose EC2 instances are test-bed hosts (the `sshAddress` seam): a
 * client process starts a two-node pool and tasks, detaches it and is killed with SIGKILL; this
 * process attaches through a new AWS provider (the state file records no credential and no key: the
 * key is read again from its file), gets every outcome exactly once — with the items a stream
 * yielded while nobody was attached — runs more tasks on the same workers, and closes: the
 * instances are terminated, and nothing is left in moto.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  type Testbed,
  testbedSshHost,
  testbedSshHosts,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const client = fileURLToPath(new URL("./fixtures/detach-client.mjs", import.meta.url));
const tasks = fileURLToPath(new URL("./fixtures/aws_detach_tasks.py", import.meta.url));
const double = sky.python<[x: number], number>("aws_detach_tasks:double");
const pid = sky.python<[], number>("aws_detach_tasks:pid");

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

const alive = (processId: number) => {
  try {
    process.kill(processId, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(skipReason !== undefined)("detach and attach on AWS (moto) with test-bed hosts", () => {
  const suite = useMotoSuite("skyward-aws-reattach-");
  let bed: Testbed;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
  }, 180_000);

  afterAll(async () => {
    await bed?.teardown();
  });

  it("a SIGKILLed client's detached pool is attached, every result handed over once, and closed with nothing left in moto", async () => {
    const scratch = suite.home.path;
    const markers = join(scratch, "markers");
    await mkdir(markers, { recursive: true });
    const config = join(scratch, "detach-client.json");
    await writeFile(
      config,
      JSON.stringify({
        endpoint: suite.moto.endpoint,
        tasks,
        markers,
        ttl: 10,
        hosts: testbedSshHosts(bed, { keyFile: true }),
      }),
    );
    await chmod(config, 0o600);
    const started = spawn(process.execPath, [client, config], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise((resolve) => started.once("exit", resolve));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: started.stdout }).once("line", resolve);
      started.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
    });
    const { id, outcomes, pids, consumed, instances } = JSON.parse(line) as {
      id: string;
      outcomes: string[];
      pids: number[];
      consumed: number[];
      instances: [string, number][];
    };
    expect(outcomes).toEqual(Array(5).fill("CancelledError"));
    started.kill("SIGKILL");
    await exited;
    expect(pids.every(alive)).toBe(true);
    const before = await motoInventory(suite.moto.endpoint);
    expect(before.liveInstances.sort()).toEqual(instances.map(([instance]) => instance).sort());
    expect(before.securityGroups).toHaveLength(1);
    expect(before.keyPairs).toHaveLength(1);

    // The state file: no credential, no key, no token in clear; the key file's path is enough.
    const stateFile = join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`);
    const text = readFileSync(stateFile, "utf8");
    expect(text).not.toMatch(/PRIVATE KEY|privateKey|[0-9a-f]{48}/);
    expect(text).not.toContain(process.env.AWS_SECRET_ACCESS_KEY as string);
    const state = JSON.parse(text) as { provider: string; cost: { total: number; hourlyRate: number } };
    expect(state.provider).toBe("aws");
    expect(state.cost.hourlyRate).toBeGreaterThan(0);

    // Items come, and the short tasks finish, while nobody is attached.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // A new provider, as another process builds it: each instance maps onto the host it had.
    const hostOf = new Map(instances);
    const provider = AWS({
      endpoint: suite.moto.endpoint,
      sshAddress: (instance) => {
        const index = hostOf.get(instance.id) as number;
        const host = bed.hosts[index];
        if (!host) throw new Error(`no test-bed host for ${instance.id}`);
        return {
          ...testbedSshHost(host),
          privateIp: host.host,
          selfDestruct: `touch '${join(markers, `self-destructed-${index}`)}'`,
        };
      },
    });
    const pool = await sky.attach(id, { provider, options: { console: false } });
    // The cost goes on from the detached pool's.
    expect(pool.cost().total).toBeGreaterThan(state.cost.total);
    const collected = await pool.collected();
    expect(collected).toHaveLength(5);
    expect(new Set(collected.map((entry) => entry.taskId)).size).toBe(5);
    expect(
      collected
        .filter((entry) => entry.name === "aws_detach_tasks:slow")
        .map((entry) => (entry.ok ? entry.value : entry.errorType))
        .sort(),
    ).toEqual(["a", "b", "y", "z"]);
    const stream = collected.find((entry) => entry.name === "aws_detach_tasks:count");
    expect(stream).toMatchObject({ ok: true, dropped: 0 });
    const items = stream?.items as number[];
    const from = items[0] as number;
    expect(from).toBeGreaterThanOrEqual(consumed.length);
    expect(items).toEqual(Array.from({ length: 12 - from }, (_, index) => from + index));

    // Carries on: the same workers run more tasks.
    expect(await pool.map(double, [[1], [2], [3]])).toEqual([2, 4, 6]);
    expect([...(await pool.broadcast(pid()))].sort()).toEqual([...pids].sort());

    // Closing terminates the instances and removes what the pool made: nothing bills, nothing is left.
    await pool.close();
    expect(await motoInventory(suite.moto.endpoint)).toEqual({
      liveInstances: [],
      securityGroups: [],
      keyPairs: [],
      skywardVolumes: [],
    });
    expect(existsSync(stateFile)).toBe(false);
    // The released workers wait out their TTL, then run the self-destruct (a mark here) and stop.
    expect(await waitUntil(() => pids.every((workerPid) => !alive(workerPid)), 40_000)).toBe(true);
    expect([0, 1].every((index) => existsSync(join(markers, `self-destructed-${index}`)))).toBe(true);
  }, 420_000);
});
