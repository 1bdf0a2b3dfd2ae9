/**
 * The fault suite, with real parts: a pool on AWS (moto) whose instances are test-bed hosts (real
 * sshd in network namespaces, real SSH tunnels, real workers), hit with one real fault after another
 * while tasks run on it — a worker SIGKILLed, a worker SIGSTOPped, a host's link taken down, a spot
 * interruption notice (a fake IMDSv2 the host polls), and an instance terminated at EC2 behind the
 * pool's back. After each: every task's result arrived exactly once, the pool is back to its size
 * with a fresh host in the lost node's rank, and the old worker is gone. A summary line counts the
 * faults injected, tasks retried, results lost and duplicates delivered.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { TerminateInstancesCommand } from "@aws-sdk/client-ec2";
import * as sky from "@skyward/core";
import {
  createTestbed,
  eventually,
  type FakeImds,
  isProcessRunning,
  requireTestbed,
  startFakeImds,
  type Testbed,
  testbedSshHost,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS, type SshAddressMapping } from "../src/index.js";
import { motoSkipReason } from "./moto-server.js";
import { useMotoSuite } from "./moto-suite.js";

const skipReason = motoSkipReason() ?? (await requireTestbed());
const tasks = fileURLToPath(new URL("./fixtures/fault_tasks.py", import.meta.url));
type Work = { key: string; node: number; pid: number };
const work = sky.python<[string, number, string], Work>("fault_tasks:work");
const whoami = sky.python<[], { node: number; pid: number }>("fault_tasks:whoami");

/** Two nodes, then one fresh host per fault's replacement. */
const FAULTS = 5;
const HOSTS = 2 + FAULTS;

const alive = isProcessRunning;

describe.skipIf(skipReason !== undefined)("the fault suite on AWS (moto) with test-bed hosts", () => {
  const suite = useMotoSuite("skyward-aws-faults-");
  let bed: Testbed;
  let imds: FakeImds;
  let pool: sky.Pool;
  const hostOf = new Map<string, number>();
  const counts = { faults: 0, retried: 0, lost: 0, duplicates: 0 };
  const completions = new Map<string, number>();
  let round = 0;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: HOSTS });
    // On the bridge: every host reaches it, as an EC2 instance reaches 169.254.169.254.
    imds = await startFakeImds({ host: bed.bridgeAddress });
    const provider = AWS({
      endpoint: suite.moto.endpoint,
      sshAddress: (instance): SshAddressMapping => {
        let index = hostOf.get(instance.id);
        if (index === undefined) {
          index = hostOf.size;
          hostOf.set(instance.id, index);
        }
        const host = bed.hosts[index];
        if (!host) throw new Error(`no test-bed host left for ${instance.id}`);
        return {
          ...testbedSshHost(host),
          privateIp: host.host,
          selfDestruct: "true",
          imdsEndpoint: imds.endpointFor(instance.id),
        };
      },
    });
    pool = await sky.compute({
      provider,
      nodes: 2,
      vcpus: 2,
      memoryGb: 4,
      architecture: "x86_64",
      allocation: "spot",
      ttl: 0,
      image: { includes: [tasks] },
      options: {
        console: false,
        bootstrapTimeout: 240,
        worker: { concurrency: 2 },
        livenessTimeout: 3,
        reconcileTickInterval: 1,
        maxProvisionAttempts: 2,
        provisionRetryDelay: 1,
      },
    });
    pool.on("task.failed", (event) => {
      if (event.willRetry) counts.retried += 1;
    });
    // Counted where results are delivered: a task completed twice is a duplicate.
    pool.on("task.completed", (event) => {
      const seen = (completions.get(event.taskId) ?? 0) + 1;
      completions.set(event.taskId, seen);
      if (seen === 2) counts.duplicates += 1;
    });
  }, 300_000);

  afterAll(async () => {
    await pool?.close();
    await imds?.close();
    await bed?.teardown();
    console.log(
      `fault suite (AWS on moto, test-bed hosts): ${counts.faults} faults injected, ${counts.retried} tasks retried, ${counts.lost} results lost, ${counts.duplicates} duplicates delivered`,
    );
  });

  /**
   * Runs four 2-second tasks over the pool, injects `fault` into node 1 once its two slots are busy,
   * and checks what every fault must leave: each result once, the pool whole again with node 1 on a
   * new instance (and host), and the old worker gone (`cleanup` first undoes what keeps it from
   * ending by itself, as a reclaimed machine's end would).
   */
  async function survive(
    name: string,
    fault: (victim: { pid: number; instanceId: string; host: number }) => Promise<void>,
    cleanup?: (victim: { pid: number; host: number }) => Promise<void>,
  ): Promise<void> {
    round += 1;
    const journal = join(suite.home.path, `faults-${round}.jsonl`);
    const starts = async () =>
      (await readFile(journal, "utf8").catch(() => ""))
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Work);
    const { pid } = await pool.run(whoami(), { target: 1 });
    const instanceId = pool.nodes()[1]?.instanceId ?? "";
    const host = hostOf.get(instanceId) ?? -1;
    const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => {
      const off = pool.on("node.replaced", (event) => {
        off();
        resolve(event);
      });
    });
    const keys = Array.from({ length: 4 }, (_, index) => `${name}-${index}`);
    const delivered = new Set<string>();
    const results = Promise.all(
      keys.map((key) =>
        pool.run(work(key, 2, journal)).then((result) => {
          delivered.add(key);
          return result;
        }),
      ),
    );
    await eventually(async () => (await starts()).filter((entry) => entry.pid === pid).length >= 2, 30_000);
    await fault({ pid, instanceId, host });
    counts.faults += 1;
    const done = await results.catch((error: unknown) => {
      counts.lost += keys.filter((key) => !delivered.has(key)).length;
      throw error;
    });
    // Late duplicates would come after the batch: give them a moment.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(done.map((result) => result.key)).toEqual(keys);
    expect(counts.duplicates).toBe(0);
    const event = await replaced;
    expect(event).toMatchObject({ node: 1, previousInstanceId: instanceId });
    expect(pool.currentNodes()).toBe(2);
    const after = await pool.broadcast(whoami());
    expect(after.map((entry) => entry.node)).toEqual([0, 1]);
    expect(hostOf.get(pool.nodes()[1]?.instanceId ?? "")).not.toBe(host);
    await cleanup?.({ pid, host });
    // The old worker lost its client and, with ttl 0, stopped at once.
    expect(await eventually(() => !alive(pid), 60_000)).toBe(true);
  }

  it("a worker SIGKILLed mid-task", async () => {
    await survive("sigkill", async ({ pid }) => {
      process.kill(pid, "SIGKILL");
    });
  }, 300_000);

  it("a worker SIGSTOPped mid-task (lost at the liveness timeout)", async () => {
    await survive(
      "sigstop",
      async ({ pid }) => {
        process.kill(pid, "SIGSTOP");
      },
      async ({ pid }) => {
        process.kill(pid, "SIGCONT");
      },
    );
  }, 300_000);

  it("a host's link taken down mid-run (a partition)", async () => {
    await survive(
      "link",
      async ({ host }) => {
        const down = await bed.exec(host, "ip link set eth0 down");
        expect(down.exitCode, down.stderr).toBe(0);
      },
      async ({ host }) => {
        expect((await bed.exec(host, "ip link set eth0 up")).exitCode).toBe(0);
      },
    );
  }, 300_000);

  it("a spot interruption notice on a host", async () => {
    const preempted = new Promise<sky.NodePreemptedEvent>((resolve) => {
      const off = pool.on("node.preempted", (event) => {
        off();
        resolve(event);
      });
    });
    await survive("notice", async ({ instanceId }) => {
      imds.interrupt(instanceId);
    });
    expect((await preempted).reason).toMatch(/^spot-instance-action terminate/);
  }, 300_000);

  it("an instance terminated behind the pool's back", async () => {
    const preempted = new Promise<sky.NodePreemptedEvent>((resolve) => {
      const off = pool.on("node.preempted", (event) => {
        off();
        resolve(event);
      });
    });
    let terminated = "";
    await survive("terminated", async ({ instanceId }) => {
      terminated = instanceId;
      await suite.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
    });
    // Read from EC2 on the reconcile tick; a spot instance ended so was reclaimed.
    expect((await preempted).reason).toBe(`the provider reports its instance ${terminated} terminated`);
  }, 300_000);

  it("lost nothing and delivered nothing twice", () => {
    expect(counts).toMatchObject({ faults: FAULTS, lost: 0, duplicates: 0 });
    expect(counts.retried).toBeGreaterThan(0);
  });
});
