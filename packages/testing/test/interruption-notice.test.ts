/**
 * Interruption notices end to end on this machine: the real Local provider, given the
 * interruption-notice capability of a cloud (its nodes poll the fake IMDSv2 of `startFakeImds`, as
 * an AWS node polls 169.254.169.254), real workers, and a spot interruption notice delivered to one
 * node mid-run.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sky from "@skyward/core";
import type { InterruptionNoticeSource } from "@skyward/core/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeGceMetadata } from "../src/fake-gce-metadata.js";
import { type FakeImds, startFakeImds } from "../src/fake-imds.js";
import { isProcessRunning } from "../src/process.js";
import { poolTaskRuns, poolTasks } from "../src/testbed-pool.js";

const { file: tasks, work, whoami } = poolTasks;

let imds: FakeImds;
let scratch: string;
beforeAll(async () => {
  imds = await startFakeImds();
  scratch = await mkdtemp(join(tmpdir(), "skyward-notice-"));
});
afterAll(async () => {
  await imds?.close();
  await rm(scratch, { recursive: true, force: true });
});

const alive = isProcessRunning;

/** The real Local provider whose nodes read interruption notices from `source`, until `stopNotices()`. */
function localWithNotices(source: (instanceId: string) => InterruptionNoticeSource) {
  let interruptible = true;
  const provider: sky.ProviderV1<sky.LocalCluster> = {
    ...sky.Local(),
    interruptionNotice: ({ instance }) => (interruptible ? source(instance.id) : null),
  };
  const stopNotices = () => {
    interruptible = false;
  };
  return { provider, stopNotices };
}

describe("the fake IMDSv2", () => {
  it("answers as AWS documents: a session token first, 404 until a notice, then its JSON", async () => {
    const id = "i-0123456789abcdef0";
    const base = imds.endpointFor(id);
    expect((await fetch(`${base}/latest/meta-data/spot/instance-action`)).status).toBe(401);
    expect((await fetch(`${base}/latest/api/token`, { method: "PUT" })).status).toBe(400);
    const token = await (
      await fetch(`${base}/latest/api/token`, {
        method: "PUT",
        headers: { "X-aws-ec2-metadata-token-ttl-seconds": "21600" },
      })
    ).text();
    const get = (path: string) => fetch(`${base}${path}`, { headers: { "X-aws-ec2-metadata-token": token } });
    expect((await get("/latest/meta-data/spot/instance-action")).status).toBe(404);
    imds.interrupt(id, { time: new Date("2026-11-24T18:00:00Z") });
    imds.recommendRebalance(id, new Date("2026-11-24T17:58:00Z"));
    expect(await (await get("/latest/meta-data/spot/instance-action")).json()).toEqual({
      action: "terminate",
      time: "2026-11-24T18:00:00Z",
    });
    expect(await (await get("/latest/meta-data/events/recommendations/rebalance")).json()).toEqual({
      noticeTime: "2026-11-24T17:58:00Z",
    });
  });
});

describe("a spot interruption notice on one node", () => {
  it("drains it, moves its queued tasks, replaces it at once; every result arrives once", async () => {
    // The real Local provider, with a cloud's interruption notices (this fake IMDS) on its nodes.
    const { provider, stopNotices } = localWithNotices((id) => ({
      kind: "aws-imds",
      endpoint: imds.endpointFor(id),
      intervalSeconds: 0.2,
    }));
    const events: sky.SkywardEvent[] = [];
    await using pool = await sky.compute(
      {
        provider,
        nodes: 2,
        image: { includes: [tasks] },
        // One slot and two prefetched per node: node 1's worker holds tasks it has not started.
        options: { console: false, worker: { concurrency: 1, buffer: 2 } },
      },
      { onEvent: (event) => events.push(event) },
    );
    stopNotices(); // the replacement is on-demand: no notices
    const path = join(scratch, "notice.jsonl");
    const [, victim] = await pool.broadcast(whoami());
    const victimInstance = pool.nodes()[1]?.instanceId ?? "";
    const keys = Array.from({ length: 8 }, (_, index) => `k${index}`);
    const deliveries = new Map<string, number>();
    const results = Promise.all(
      keys.map((key) =>
        pool.run(work(key, 1, path)).then((result) => {
          deliveries.set(key, (deliveries.get(key) ?? 0) + 1);
          return result;
        }),
      ),
    );
    while ((await poolTaskRuns(path)).length < 2) await new Promise((resolve) => setTimeout(resolve, 50));
    const preempted = new Promise<sky.NodePreemptedEvent>((resolve) => pool.on("node.preempted", resolve));
    const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => pool.on("node.replaced", resolve));
    imds.interrupt(victimInstance);
    const notice = await preempted;
    expect(notice.node).toBe(1);
    expect(notice.reason).toMatch(/^spot-instance-action terminate at \d{4}-\d\d-\d\dT/);

    const done = await results;
    expect(done.map((result) => result.key)).toEqual(keys);
    expect([...deliveries.values()]).toEqual(keys.map(() => 1));
    const starts = await poolTaskRuns(path);
    // Nothing ran twice: the tasks node 1 held unstarted were handed back, not retried.
    expect(starts.map((entry) => entry.key).sort()).toEqual([...keys].sort());
    expect(events.some((event) => event.type === "task.failed")).toBe(false);
    // After the notice node 1 started nothing new: only what it had started before.
    const onVictim = starts.filter((entry) => entry.pid === victim?.pid);
    expect(onVictim.length).toBeLessThanOrEqual(1);

    const event = await replaced;
    expect(event.node).toBe(1);
    expect(event.previousInstanceId).toBe(victimInstance);
    expect(pool.currentNodes()).toBe(2);
    const after = await pool.broadcast(whoami());
    expect(after.map((entry) => entry.node)).toEqual([0, 1]);
    expect(after[1]?.pid).not.toBe(victim?.pid);
    expect(alive(victim?.pid ?? 0)).toBe(false);
    // The preemption came before the node was let go, and the replacement was asked for at once.
    const order = events.map((entry) => entry.type);
    expect(order.indexOf("node.preempted")).toBeLessThan(order.indexOf("node.lost"));
    // The worker polled with a session token, as IMDSv2 requires.
    expect(
      imds.requests.some((request) => request.instanceId === victimInstance && request.status === 200),
    ).toBe(true);
  }, 120_000);
});

describe("a GCP Spot VM's preemption on one node", () => {
  it("is read from the metadata server (Metadata-Flavor: Google): the node is drained and replaced at once", async () => {
    await using metadata = await startFakeGceMetadata();
    // The real Local provider, with Compute Engine's notices (this fake metadata server) on its nodes.
    const { provider, stopNotices } = localWithNotices((id) => ({
      kind: "gcp-metadata",
      endpoint: metadata.endpointFor(id),
      intervalSeconds: 0.2,
    }));
    await using pool = await sky.compute({
      provider,
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    stopNotices(); // the replacement gets no notices
    const [, victim] = await pool.broadcast(whoami());
    const victimInstance = pool.nodes()[1]?.instanceId ?? "";
    const preempted = new Promise<sky.NodePreemptedEvent>((resolve) => pool.on("node.preempted", resolve));
    const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => pool.on("node.replaced", resolve));
    // A live migration keeps the VM and its worker: no notice for it.
    metadata.scheduleMaintenance(victimInstance, "MIGRATE_ON_HOST_MAINTENANCE");
    metadata.preempt(victimInstance);
    const notice = await preempted;
    expect(notice.node).toBe(1);
    expect(notice.reason).toBe("spot-preempted terminate");
    const event = await replaced;
    expect(event.previousInstanceId).toBe(victimInstance);
    const after = await pool.broadcast(whoami());
    expect(after[1]?.pid).not.toBe(victim?.pid);
    // The worker asked as Compute Engine requires: none of its reads was refused.
    const reads = metadata.requests.filter((request) => request.vm === victimInstance);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((request) => request.status === 200)).toBe(true);
  }, 120_000);
});
