/**
 * The cost of a replacement asked for at an interruption notice: the cloud bills it from its
 * creation, at the notice, not from when the interrupted node has drained and hands it its place.
 * The real Local provider with a fixture price, its nodes polling the fake IMDSv2 for notices, real
 * workers, and a task on the interrupted node that ends only when the test says.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sky from "@skyward/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeImds, startFakeImds } from "../src/fake-imds.js";
import { eventually } from "../src/testbed-pool.js";

const PRICE = 36; // USD per hour

let imds: FakeImds;
let scratch: string;
let tasks: string;
beforeAll(async () => {
  imds = await startFakeImds();
  scratch = await mkdtemp(join(tmpdir(), "skyward-notice-cost-"));
  tasks = join(scratch, "notice_cost_tasks.py");
  await writeFile(
    tasks,
    [
      "import os, time",
      "",
      "def hold(marker):",
      '    """Says it started, then runs until `marker` exists."""',
      '    open(marker + ".started", "w").close()',
      "    while not os.path.exists(marker):",
      "        time.sleep(0.05)",
      "    return os.getpid()",
      "",
    ].join("\n"),
  );
});
afterAll(async () => {
  await imds?.close();
  await rm(scratch, { recursive: true, force: true });
});

const hold = sky.python<[marker: string], number>("notice_cost_tasks:hold");

/**
 * The real Local provider at the fixture price, its instances polling the fake IMDS for notices
 * until `quiet()` (replacements then get none); `created` hears each provision's instances and how
 * many provisions there were (the pool's own is the first).
 */
function noticeGivingLocal(created: (instances: readonly { id: string }[], provisions: number) => void): {
  local: ReturnType<typeof sky.Local>;
  provider: sky.ProviderV1<sky.LocalCluster>;
  quiet: () => void;
} {
  const local = sky.Local({ hourlyPrice: PRICE });
  let interruptible = true;
  let provisions = 0;
  const provider: sky.ProviderV1<sky.LocalCluster> = {
    ...local,
    interruptionNotice: ({ instance }) =>
      interruptible
        ? { kind: "aws-imds", endpoint: imds.endpointFor(instance.id), intervalSeconds: 0.2 }
        : null,
    async provision(options) {
      provisions += 1;
      const instances = await local.provision(options);
      created(instances, provisions);
      return instances;
    },
  };
  return {
    local,
    provider,
    quiet: () => {
      interruptible = false;
    },
  };
}

describe("a replacement asked for at an interruption notice", () => {
  it("costs from its creation at the notice, while the interrupted node drains", async () => {
    let createdAt = 0;
    const { provider, quiet } = noticeGivingLocal((_, provisions) => {
      if (provisions > 1) createdAt ||= Date.now();
    });
    const events: sky.SkywardEvent[] = [];
    await using pool = await sky.compute(
      { provider, nodes: 2, image: { includes: [tasks], metrics: null }, options: { console: false } },
      { onEvent: (event) => events.push(event) },
    );
    quiet(); // the replacement gets no notices
    const victim = pool.nodes()[1]?.instanceId ?? "";
    const marker = join(scratch, "release");
    const running = pool.run(hold(marker), { target: 1 });
    expect(await eventually(() => existsSync(`${marker}.started`), 60_000)).toBe(true);
    const replaced = new Promise<sky.NodeReplacedEvent>((resolve) => pool.on("node.replaced", resolve));
    imds.interrupt(victim);
    // The replacement is asked for at once; node 1 drains meanwhile (its task still runs).
    expect(await eventually(() => createdAt > 0, 60_000)).toBe(true);
    // Three instances bill now: the two nodes' and the replacement's.
    expect(pool.cost().hourlyRate).toBe(3 * PRICE);
    const releasedAt = Date.now();
    await writeFile(marker, "");
    await running;
    const event = await replaced;
    expect(event.previousInstanceId).toBe(victim);
    const destroyed = events.find((each) => each.type === "node.destroyed" && each.instanceId === victim);
    expect(destroyed).toBeDefined();
    const cost = pool.cost();
    expect(cost.hourlyRate).toBe(2 * PRICE);
    const node1 = cost.nodes.find((entry) => entry.node === 1);
    expect(node1?.instanceId).toBe(event.instanceId);
    // Counted from its creation (after the provider returned it, before the node was released),
    // not from when it took node 1's place (after the old instance was destroyed).
    expect(node1?.since).toBeGreaterThanOrEqual(createdAt);
    expect(node1?.since).toBeLessThanOrEqual(releasedAt);
    expect(node1?.since).toBeLessThan(destroyed?.timestamp ?? 0);
  }, 120_000);
});

describe("a replacement asked for at a notice, when terminating the interrupted instance fails", () => {
  it("is terminated with the node let go of, not left running", async () => {
    let asked = "";
    let victim = "";
    let refused = false;
    const terminated: string[] = [];
    const noticed = noticeGivingLocal((instances, provisions) => {
      if (provisions === 2) asked = instances[0]?.id ?? "";
    });
    const { local, quiet } = noticed;
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...noticed.provider,
      async terminate(options) {
        // The cloud's API fails once on the interrupted instance (a throttle, a timeout).
        if (!refused && options.ids.includes(victim)) {
          refused = true;
          throw new Error("RequestLimitExceeded (test)");
        }
        await local.terminate(options);
        terminated.push(...options.ids);
      },
    };
    const pool = await sky.compute({
      provider,
      nodes: 2,
      image: { metrics: null },
      options: { console: false, reconcileTickInterval: 1 },
    });
    try {
      quiet(); // replacements get no notices
      victim = pool.nodes()[1]?.instanceId ?? "";
      imds.interrupt(victim);
      // Nothing runs on node 1: it drains at once, its terminate fails, the node is let go of.
      expect(await eventually(() => refused && asked !== "", 60_000)).toBe(true);
      expect(await eventually(() => terminated.includes(victim), 60_000)).toBe(true);
      // The instance asked for at the notice went with it (it bills from its creation otherwise).
      expect(await eventually(() => terminated.includes(asked), 30_000)).toBe(true);
    } finally {
      await pool.close();
    }
    expect(terminated).toContain(asked);
  }, 120_000);
});
