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
import { DescribeInstanceAttributeCommand, TerminateInstancesCommand } from "@aws-sdk/client-ec2";
import * as sky from "@skyward/core";
import {
  createTestbed,
  isProcessRunning,
  requireTestbed,
  type Testbed,
  testbedSshHost,
  testbedSshHosts,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, BUILT_IN_ON_DEMAND_PRICES } from "../src/index.js";
import { motoInventory, motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const client = fileURLToPath(new URL("./fixtures/detach-client.mjs", import.meta.url));
const tasks = fileURLToPath(new URL("./fixtures/aws_detach_tasks.py", import.meta.url));
const double = sky.python<[x: number], number>("aws_detach_tasks:double");
const pid = sky.python<[], number>("aws_detach_tasks:pid");
/** The fixture price of the budget test, USD an hour (a cent a second), and its budget (a minute of it). */
const PRICE = 36;
const BUDGET = 0.6;

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

const alive = isProcessRunning;

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
    expect(outcomes).toEqual(Array(5).fill("TaskDetachedError"));
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

  it("a detached pool with a budget: with no client, its worker shuts its instance down at the budget's deadline, not before", async () => {
    const host = bed.hosts[0];
    if (!host) throw new Error("no test-bed host");
    const scratch = join(suite.home.path, "budget");
    const bin = join(scratch, "bin");
    await mkdir(bin, { recursive: true });
    const record = join(scratch, "shutdown-called");
    // A `shutdown` that records when it ran and its arguments, instead of ending this machine: the
    // seam's self-destruct runs it as the provider's own (`shutdown -h now`) runs the real one.
    await writeFile(join(bin, "shutdown"), `#!/bin/sh\necho "$(date +%s%3N) $*" > '${record}'\n`);
    await chmod(join(bin, "shutdown"), 0o755);
    const provider = () =>
      AWS({
        endpoint: suite.moto.endpoint,
        // The fixture price for every type of the built-in table: whichever is the cheapest match.
        onDemandPrices: Object.fromEntries(
          Object.keys(BUILT_IN_ON_DEMAND_PRICES).map((type) => [type, PRICE]),
        ),
        sshAddress: () => ({
          ...testbedSshHost(host),
          privateIp: host.host,
          selfDestruct: `'${join(bin, "shutdown")}' -h now`,
        }),
      });
    // A cent a second: the budget lasts a minute from provisioning. The TTL (10 min) is not what stops it.
    const pool = await sky.compute({
      provider: provider(),
      nodes: 1,
      vcpus: 2,
      memoryGb: 4,
      architecture: "x86_64",
      allocation: "on-demand",
      ttl: 600,
      image: { includes: [tasks], metrics: null },
      options: { console: false, bootstrapTimeout: 240, budget: BUDGET },
    });
    const [workerPid] = await pool.broadcast(pid());
    expect(pool.cost().hourlyRate).toBe(PRICE);
    const spent = pool.cost().total;
    const [instanceId] = (await motoInventory(suite.moto.endpoint)).liveInstances;
    const id = await pool.detach();
    const entry = (await sky.detachedPools()).find((candidate) => candidate.id === id);
    const deadline = entry?.budgetDeadline as number;
    expect(deadline).toBeGreaterThan(Date.now());
    // The remaining budget at the pool's rate (a whole second of slack for the rounding of "now").
    expect(
      Math.abs(deadline - (entry?.detachedAt as number) - ((BUDGET - spent) / PRICE) * 3_600_000),
    ).toBeLessThan(1000);
    expect(alive(workerPid as number)).toBe(true);
    // Nobody attached: the worker stops itself at the deadline and runs the provider's self-destruct.
    expect(await waitUntil(() => existsSync(record), deadline - Date.now() + 60_000)).toBe(true);
    const [at, ...args] = readFileSync(record, "utf8").trim().split(" ");
    expect(args).toEqual(["-h", "now"]);
    expect(Number(at)).toBeGreaterThanOrEqual(deadline - 250);
    expect(await waitUntil(() => !alive(workerPid as number), 30_000)).toBe(true);
    // On EC2 that shutdown ends the instance: it was launched to terminate on a shutdown from inside.
    const behaviour = await suite.ec2.send(
      new DescribeInstanceAttributeCommand({
        InstanceId: instanceId,
        Attribute: "instanceInitiatedShutdownBehavior",
      }),
    );
    expect(behaviour.InstanceInitiatedShutdownBehavior?.Value).toBe("terminate");
    // moto does not act a shutdown from inside out: EC2's part (the instance terminated) is played here.
    await suite.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId as string] }));
    // The pool is not attached again: its worker is gone and its budget ran out, so its state goes.
    await expect(sky.attach(id, { provider: provider(), options: { console: false } })).rejects.toThrow(
      /cannot be reached again.*budget has run out: the pool's state was removed/,
    );
    expect((await sky.detachedPools()).map((candidate) => candidate.id)).not.toContain(id);
    // What the pool made besides (its security group and key pair) goes with `skyward down`'s cleanup.
    await provider().cleanup?.({ pools: [id], waitSeconds: 30, signal: AbortSignal.timeout(120_000) });
    expect(await motoInventory(suite.moto.endpoint)).toEqual({
      liveInstances: [],
      securityGroups: [],
      keyPairs: [],
      skywardVolumes: [],
    });
  }, 300_000);
});
