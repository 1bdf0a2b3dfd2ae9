/**
 * An elastic pool on the Slurm test bed: what `squeue` shows as it gives nodes back and takes them
 * again — its first job shrunk to the node it keeps, a node added under load as a job of its own,
 * cancelled when that node idles.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireSlurmTestbed } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { Slurm } from "../src/index.js";
import { useSlurmSuite } from "./fixtures/slurm-suite.js";

const skipReason = await requireSlurmTestbed();
const tasks = fileURLToPath(new URL("./fixtures/slurm_tasks.py", import.meta.url));

const info = sky.python<[], { slurm_node: string | null; slurm_job: string | null }>("slurm_tasks:info");
const sleep = sky.python<[number], number>("slurm_tasks:sleep");

describe.skipIf(skipReason !== undefined)("An elastic Slurm pool on the Slurm test bed", () => {
  const suite = useSlurmSuite("skyward-slurm-elastic-", { computeNodes: 2, gpusPerNode: 0 });

  /** The queue, one `<job> <state> <node count> <nodes>` line per job, by job id. */
  const squeue = async () =>
    (await suite.slurm.exec(["squeue", "-h", "--sort=i", "-o", "%i %T %D %N"])).stdout.trim().split("\n");

  it("gives an idle node back by shrinking its job, grows under load with a job of its own, and cancels that job when its node idles", async () => {
    const scaling: sky.ScalingEvent[] = [];
    {
      await using pool = await sky.compute(
        {
          provider: Slurm({
            login: suite.slurm.loginSettings,
            sharedDirectory: suite.slurm.sharedDirectory,
            timeLimit: 10,
          }),
          nodes: { desired: 2, min: 1, max: 2 },
          image: { includes: [tasks] },
          ttl: 0,
          options: {
            console: false,
            bootstrapTimeout: 240,
            reconcileTickInterval: 0.2,
            autoscaleCooldown: 0.5,
            autoscaleIdleTimeout: 5,
          },
        },
        { onEvent: (event) => (event.type === "scaling" ? scaling.push(event) : undefined) },
      );
      // The pool's first nodes are one job.
      const [started] = await squeue();
      expect(started).toMatch(/^\d+ RUNNING 2 node\[1-2\]$/);
      const job = started?.split(" ")[0] as string;

      // Idle, the pool gives one node back: Slurm shrinks the job to the node it keeps, its batch host.
      await expect.poll(squeue, { timeout: 60_000 }).toEqual([`${job} RUNNING 1 node1`]);
      expect(scaling[0]).toMatchObject({ from: 2, to: 1, reason: expect.stringMatching(/idle/) });
      expect(pool.currentNodes()).toBe(1);
      expect(await pool.run(info())).toEqual(
        expect.objectContaining({ slurm_node: "node1", slurm_job: job }),
      );

      // Under load it grows again: the added node is a job of its own, beside the first.
      const mapped = pool.map(
        sleep,
        Array.from({ length: 16 }, () => [2] as [number]),
      );
      await expect
        .poll(squeue, { timeout: 90_000 })
        .toEqual([`${job} RUNNING 1 node1`, expect.stringMatching(/^\d+ RUNNING 1 node2$/)]);
      expect(await mapped).toEqual(Array(16).fill(2));
      expect(scaling.some((event) => event.from === 1 && event.to === 2)).toBe(true);

      // Idle again, that node goes back by cancelling its job; the first job keeps running.
      await expect.poll(squeue, { timeout: 60_000 }).toEqual([`${job} RUNNING 1 node1`]);
      expect(pool.currentNodes()).toBe(1);
      expect((await pool.run(info())).slurm_job).toBe(job);
    }
    await expect.poll(squeue, { timeout: 30_000 }).toEqual([""]);
  }, 240_000);
});
