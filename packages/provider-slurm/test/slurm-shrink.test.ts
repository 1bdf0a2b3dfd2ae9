/**
 * Giving nodes of a pool's first job back, on the Slurm test bed, through the provider's own calls: a
 * node given back leaves the job (Slurm's `scontrol update NodeList`) even after the job's batch host
 * (its node 0, which Slurm keeps until the whole job goes) was given back first, a give-back that
 * failed is carried out when asked again, and a node given back before the provider knew the job's
 * nodes (the job still queued, or started but never looked at) leaves it all the same.
 */
import * as sky from "@skyward/core";
import { type Cluster, type Instance, offerQuery, resolvePoolSpec } from "@skyward/core/contract";
import { requireSlurmTestbed } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { Slurm, type SlurmClusterData } from "../src/index.js";
import { useSlurmSuite } from "./fixtures/slurm-suite.js";

const skipReason = await requireSlurmTestbed();

describe.skipIf(skipReason !== undefined)("Giving back nodes of a Slurm job", () => {
  const suite = useSlurmSuite("skyward-slurm-shrink-", { computeNodes: 3, gpusPerNode: 0 });

  /** The queue, one `<state> <node count> <nodes>` line per job. */
  const squeue = async () =>
    (await suite.slurm.exec(["squeue", "-h", "--sort=i", "-o", "%T %D %N"])).stdout.trim();

  const signal = () => AbortSignal.timeout(60_000);

  type Job = {
    provider: ReturnType<typeof Slurm>;
    cluster: Cluster<SlurmClusterData>;
    instances: readonly Instance[];
  };

  /** A cluster whose first job of `count` nodes was submitted; `use` gets it, and it is torn down after. */
  async function withJob(count: number, use: (job: Job) => Promise<void>) {
    const provider = Slurm({
      login: suite.slurm.loginSettings,
      sharedDirectory: suite.slurm.sharedDirectory,
      timeLimit: 10,
    });
    const spec = resolvePoolSpec(sky.spec({ provider, nodes: count }), sky.options({}));
    const [offer] = await provider.offers({ query: offerQuery(spec), signal: signal() });
    if (!offer) throw new Error("the test bed offers no partition");
    const cluster = await provider.prepare({ spec, offer, poolId: `given${count}`, signal: signal() });
    try {
      await use({
        provider,
        cluster,
        instances: await provider.provision({ cluster, count, signal: signal() }),
      });
    } finally {
      await provider.teardown({ cluster, signal: signal() });
    }
  }

  /**
   * {@link withJob} once the job runs, each instance knowing its node (what a pool's watch learns
   * before it gives one back).
   */
  const withRunningJob = (count: number, use: (job: Job) => Promise<void>) =>
    withJob(count, async (job) => {
      const { provider, cluster, instances } = job;
      const statuses = async () =>
        (
          await Promise.all(
            instances.map((instance) => provider.getInstance({ cluster, id: instance.id, signal: signal() })),
          )
        ).map((instance) => instance?.status);
      await expect.poll(statuses, { timeout: 60_000 }).toEqual(instances.map(() => "running"));
      await use(job);
    });

  it("gives a node back while the job waits in the queue: the job starts without it, the others on their nodes", async () => {
    // Every node busy with another job: the pool's job waits in the queue.
    const blocker = (
      await suite.slurm.exec(["sbatch", "--parsable", "--exclusive", "-N", "3", "--wrap", "sleep 600"])
    ).stdout.trim();
    await expect.poll(squeue, { timeout: 30_000 }).toBe("RUNNING 3 node[1-3]");
    await withJob(3, async ({ provider, cluster, instances }) => {
      const [first, second, third] = instances as [Instance, Instance, Instance];
      expect(await squeue()).toMatch(/^RUNNING 3 node\[1-3\]\nPENDING 3$/);
      await provider.terminate({ cluster, ids: [second.id], signal: signal() });
      expect(await squeue()).toMatch(/^RUNNING 3 node\[1-3\]\nPENDING 2$/);
      await suite.slurm.exec(["scancel", blocker]);
      // The blocker may sit COMPLETING a while on a loaded machine before its nodes are free, and
      // Slurm starts the job on the first two that are: node[1-2], or node[2-3] when node 1 is the
      // one still completing.
      await expect.poll(squeue, { timeout: 120_000 }).toMatch(/^RUNNING 2 node\[\d[-,]\d\]$/);
      const [, low, high] = /\[(\d)[-,](\d)\]/.exec(await squeue()) as RegExpExecArray;
      const shown = async (instance: Instance) =>
        (await provider.getInstance({ cluster, id: instance.id, signal: signal() }))?.tags["slurm:node"];
      expect(await shown(first)).toBe(`node${low}`);
      expect(await shown(third)).toBe(`node${high}`);
      expect(await provider.getInstance({ cluster, id: second.id, signal: signal() })).toBeNull();
      // The node that stays on after its neighbour went: given back, it leaves the job too.
      await provider.terminate({ cluster, ids: [third.id], signal: signal() });
      await expect.poll(squeue, { timeout: 30_000 }).toBe(`RUNNING 1 node${low}`);
    });
  }, 240_000);

  it("gives a node back from a running job whose nodes it never read: the node leaves the job", async () => {
    await withJob(3, async ({ provider, cluster, instances }) => {
      // Started, but never looked at through getInstance: the provider does not know its nodes yet.
      await expect.poll(squeue, { timeout: 60_000 }).toBe("RUNNING 3 node[1-3]");
      await provider.terminate({ cluster, ids: [(instances[1] as Instance).id], signal: signal() });
      await expect.poll(squeue, { timeout: 30_000 }).toBe("RUNNING 2 node[1,3]");
    });
  }, 240_000);

  it("gives a node back after the batch host was given back: the job keeps node 0 and the nodes still used", async () => {
    await withRunningJob(3, async ({ provider, cluster, instances }) => {
      const [batchHost, second, third] = instances as [Instance, Instance, Instance];
      expect(await squeue()).toBe("RUNNING 3 node[1-3]");
      // The batch host first: Slurm cannot take it from the job, which keeps all three for now.
      await provider.terminate({ cluster, ids: [batchHost.id], signal: signal() });
      expect(await squeue()).toBe("RUNNING 3 node[1-3]");
      // Then another node: it leaves the job, which keeps its batch host and the node still used.
      await provider.terminate({ cluster, ids: [second.id], signal: signal() });
      await expect.poll(squeue, { timeout: 30_000 }).toBe("RUNNING 2 node[1,3]");
      // The last node given back ends the job.
      await provider.terminate({ cluster, ids: [third.id], signal: signal() });
      await expect.poll(squeue, { timeout: 30_000 }).toBe("");
    });
  }, 240_000);

  it("gives a node back when asked again after a give-back failed: the failed one leaves nothing marked as given", async () => {
    await withRunningJob(2, async ({ provider, cluster, instances }) => {
      const second = instances[1] as Instance;
      // The give-back fails (here: its call aborted before Slurm was asked) and says so…
      const aborted = AbortSignal.abort();
      await expect(provider.terminate({ cluster, ids: [second.id], signal: aborted })).rejects.toThrow(
        /scontrol/,
      );
      expect(await squeue()).toBe("RUNNING 2 node[1-2]");
      // …and asked again, the node leaves the job, never taken as given back already.
      await provider.terminate({ cluster, ids: [second.id], signal: signal() });
      await expect.poll(squeue, { timeout: 30_000 }).toBe("RUNNING 1 node1");
    });
  }, 240_000);
});
