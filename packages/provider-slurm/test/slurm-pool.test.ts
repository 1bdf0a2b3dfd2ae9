/**
 * Pools on a real Slurm cluster (the Slurm test bed: slurmctld and sshd on a login host, slurmd on
 * two compute hosts without sshd), end to end: the job, the srun steps, the tunnels through the
 * login node, the Python worker.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { isCi, providerFromToml, requireSlurmTestbed } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { Slurm, type SlurmSettings } from "../src/index.js";
import { useSlurmSuite } from "./fixtures/slurm-suite.js";

const skipReason = await requireSlurmTestbed();
const tasks = fileURLToPath(new URL("./fixtures/slurm_tasks.py", import.meta.url));
const packageDirectory = fileURLToPath(new URL("..", import.meta.url));
const built = existsSync(new URL("../dist/index.js", import.meta.url));

const info = sky.python<
  [],
  {
    node: number;
    total_nodes: number;
    head_addr: string;
    is_head: boolean;
    slurm_node: string | null;
    slurm_job: string | null;
    gpus: string | null;
  }
>("slurm_tasks:info");
const square = sky.python<[number], number>("slurm_tasks:square");
const sleep = sky.python<[number], number>("slurm_tasks:sleep");

describe.skipIf(skipReason !== undefined)("Slurm pools on the Slurm test bed", () => {
  const suite = useSlurmSuite("skyward-slurm-e2e-", { computeNodes: 2, gpusPerNode: 2 });

  const settings = (extra: Partial<SlurmSettings> = {}): SlurmSettings => {
    return {
      login: suite.slurm.loginSettings,
      sharedDirectory: suite.slurm.sharedDirectory,
      accelerator: sky.accelerators.T4(),
      timeLimit: 10,
      ...extra,
    };
  };

  const squeue = async () => (await suite.slurm.exec(["squeue", "-h", "-o", "%i %j %T %N"])).stdout.trim();

  it("runs a 2-node pool as one job: run, broadcast and map, node 0 the head", async () => {
    {
      await using pool = await sky.compute({
        provider: Slurm(settings()),
        nodes: 2,
        accelerator: sky.accelerators.T4({ count: 2 }),
        image: { includes: [tasks] },
        ttl: 0,
        options: { console: false, bootstrapTimeout: 240 },
      });
      const jobs = (await squeue()).split("\n");
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatch(/^\d+ skyward-slurm-\S+ RUNNING node\[1-2\]$/);

      const all = await pool.broadcast(info());
      expect(all.map((entry) => entry.node)).toEqual([0, 1]);
      expect(new Set(all.map((entry) => entry.slurm_node))).toEqual(new Set(["node1", "node2"]));
      expect(new Set(all.map((entry) => entry.slurm_job)).size).toBe(1);
      expect(all.every((entry) => entry.total_nodes === 2)).toBe(true);
      // The head is node 0 of the job, at its cluster address; each worker's step sees its GPUs.
      const head = all.find((entry) => entry.is_head);
      expect(head?.node).toBe(0);
      expect(suite.slurm.computeNodes.map((node) => node.address)).toContain(head?.head_addr);
      expect(all.map((entry) => entry.gpus)).toEqual(["0,1", "0,1"]);

      expect(await pool.run(square(7))).toBe(49);
      expect(await pool.map(square, [[1], [2], [3], [4], [5]])).toEqual([1, 4, 9, 16, 25]);
    }
    // The pool's end cancelled its job.
    await expect.poll(squeue, { timeout: 20_000 }).toBe("");
  });

  it("refuses a pool asking for more nodes than the partition has, before anything is queued", async () => {
    const started = sky.compute({
      provider: Slurm(settings()),
      nodes: 3,
      image: { includes: [tasks] },
      options: { console: false },
    });
    await expect(started).rejects.toThrow(/asks for 3 nodes; partition "main" has 2/);
    expect(await squeue()).toBe("");
  });

  it("refuses more GPUs per node than the partition's nodes have, naming the numbers", async () => {
    const started = sky.compute({
      provider: Slurm(settings()),
      nodes: 1,
      accelerator: sky.accelerators.T4({ count: 4 }),
      options: { console: false },
    });
    await expect(started).rejects.toThrow(
      /asks for 4 GPUs per node; partition "main" has at most 2 per node/,
    );
    expect(await squeue()).toBe("");
  });

  it("refuses a partition that does not exist, and a job Slurm rejects at submit", async () => {
    await expect(
      sky.compute({
        provider: Slurm(settings({ partition: "nope" })),
        nodes: 1,
        options: { console: false },
      }),
    ).rejects.toThrow(/no such partition "nope".*partitions: main, preemptible/s);
    await expect(
      sky.compute({
        provider: Slurm(settings({ sbatchOptions: ["--constraint=no-such-feature"] })),
        nodes: 1,
        options: { console: false },
      }),
    ).rejects.toThrow(/Slurm refused the pool's job at submit.*Invalid feature specification/s);
    expect(await squeue()).toBe("");
  });

  const submit = async (args: readonly string[]) => {
    const result = await suite.slurm.exec(["sbatch", "--parsable", ...args, "--wrap", "exec sleep 600"]);
    expect(result.exitCode, result.stderr).toBe(0);
    return result.stdout.trim();
  };
  const stateOf = async (jobId: string) =>
    (await suite.slurm.exec(["squeue", "-h", "-j", jobId, "-o", "%T"])).stdout.trim();

  it("waits in the queue behind a busy partition, with Slurm's reason and its position, and starts when nodes free up", async () => {
    const all = `--nodes=${suite.slurm.computeNodes.length}`;
    const holder = await submit([all, "--exclusive"]);
    await expect.poll(() => stateOf(holder), { timeout: 20_000 }).toBe("RUNNING");
    const ahead = await submit([all, "--exclusive"]);
    const provider = Slurm(settings());
    const progress: sky.ProvisionProgressEvent[] = [];
    const starting = sky.compute(
      {
        provider,
        nodes: 1,
        image: { includes: [tasks] },
        ttl: 0,
        options: { console: false },
      },
      { onEvent: (event) => (event.type === "provision.progress" ? progress.push(event) : undefined) },
    );
    starting.catch(() => undefined);
    // What `skyward instances` lists while the pool waits: pending, why, and where in the queue.
    await expect
      .poll(
        async () =>
          (await provider.listInstances?.({ signal: AbortSignal.timeout(20_000) }))?.find(
            (instance) => instance.tags["slurm:queue-position"] !== undefined,
          ),
        { timeout: 20_000 },
      )
      .toBeDefined();
    const listed = await provider.listInstances?.({ signal: AbortSignal.timeout(20_000) });
    const mine = listed?.find(
      (instance) => instance.tags["slurm:job"] !== holder && instance.tags["slurm:job"] !== ahead,
    );
    expect(mine?.status).toBe("pending");
    expect(mine?.tags["slurm:reason"]).toMatch(/^(Priority|Resources)$/);
    expect(mine?.tags["slurm:queue-position"]).toBe("2");
    // What the console and the log show meanwhile: the job's wait (said when it changes), then its start.
    const job = mine?.tags["slurm:job"];
    const said = () =>
      progress.map((event) => `${event.instanceId} ${event.phase} ${event.status}: ${event.detail}`);
    const waiting = new RegExp(
      `^${job}-0 queue started: job ${job} pending \\((Priority|Resources)\\), position 2 in partition main's queue$`,
    );
    await expect.poll(() => said().some((line) => waiting.test(line)), { timeout: 20_000 }).toBe(true);
    await suite.slurm.exec(["scancel", holder, ahead]);
    await using pool = await starting;
    expect(await pool.run(square(3))).toBe(9);
    expect(said().at(-1)).toMatch(new RegExp(`^${job}-0 queue finished: job ${job} running on \\S+$`));
    // Polled every few seconds, said only when it changes.
    expect(said().filter((line, index, lines) => line === lines[index - 1])).toEqual([]);
  });

  it("replaces the nodes of a preempted job and retries the task that was running there, its result once", async () => {
    const provider = Slurm(settings({ partition: "preemptible" }));
    await using pool = await sky.compute({
      provider,
      nodes: 1,
      image: { includes: [tasks] },
      ttl: 0,
      options: { console: false },
    });
    const replaced: string[] = [];
    pool.on("node.replaced", (event) => replaced.push(event.previousInstanceId));
    const lost: string[] = [];
    pool.on("node.lost", (event) => lost.push(event.instanceId));
    const preempted: string[] = [];
    pool.on("node.preempted", (event) => preempted.push(event.reason ?? ""));
    const before = await pool.run(info());
    // A preemptible partition's job is spot capacity.
    const listed = await provider.listInstances?.({ signal: AbortSignal.timeout(20_000) });
    expect(listed?.map((instance) => instance.spot)).toEqual([true]);
    const running = pool.run(sleep(12));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The main partition's higher tier takes the node: Slurm preempts the pool's job there.
    const urgent = await submit(["--partition=main", `--nodelist=${before.slurm_node}`, "--exclusive"]);
    expect(await running).toBe(12);
    const after = await pool.run(info());
    expect(after.slurm_node).not.toBe(before.slurm_node);
    expect(after.slurm_job).not.toBe(before.slurm_job);
    // One loss, one replacement: the node the job held, under the same index.
    expect(lost).toEqual(replaced);
    expect(replaced).toHaveLength(1);
    // Said once, by the worker Slurm sent SIGTERM to (or by the job's state, read first).
    expect(preempted).toHaveLength(1);
    expect(preempted[0]).toMatch(/^(preempted SIGTERM at \S+|the provider reports its instance \S+ \w+)$/);
    expect(await stateOf(urgent)).toBe("RUNNING");
  }, 120_000);

  it.skipIf(!built && !isCi())(
    'is what [providers.x] type = "slurm" in skyward.toml makes, login table included',
    async () => {
      const { host, identityFile } = suite.slurm.loginSettings;
      const { entry, provider } = await providerFromToml(
        `
[providers.cloud]
type = "slurm"
partition = "main"
time_limit = "0:10:00"
accelerator = "T4"
rate_per_hour = { main = 1.5 }
shared_directory = "${suite.slurm.sharedDirectory}"
login = { host = "${host}", user = "root", identity_file = "${identityFile}" }
`,
        packageDirectory,
      );
      expect(entry.package).toBe("@skyward/provider-slurm");
      const offers = await provider.offers({
        query: { accelerator: { name: "T4", count: 2 }, allocation: "on-demand" },
        signal: AbortSignal.timeout(30_000),
      });
      expect(offers.map((offer) => [offer.region, offer.accelerator?.count, offer.onDemandPrice])).toEqual([
        ["main", 2, 1.5],
      ]);
    },
  );
});
