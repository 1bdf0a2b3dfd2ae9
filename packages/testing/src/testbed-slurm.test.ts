import { existsSync, readdirSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isProcessRunning, processCommandLine, runCommand } from "./process.js";
import { findExecutable } from "./testbed.js";
import {
  createSlurmTestbed,
  requireSlurmTestbed,
  SLURM_TESTBED_PREEMPTIBLE_PARTITION,
  type SlurmTestbed,
} from "./testbed-slurm.js";

const skipReason = await requireSlurmTestbed();
const IP = findExecutable("ip") ?? "/usr/sbin/ip";

async function jobState(slurm: SlurmTestbed, jobId: string): Promise<string> {
  const result = await slurm.exec(["squeue", "-h", "-j", jobId, "-o", "%T"]);
  return result.stdout.trim();
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`never saw ${what}`);
}

describe.skipIf(skipReason !== undefined)("the Slurm test bed", () => {
  let slurm: SlurmTestbed;

  beforeAll(async () => {
    slurm = await createSlurmTestbed({ computeNodes: 2, gpusPerNode: 2 });
  }, 120_000);

  afterEach(async () => {
    // A failed test's jobs must not hold the nodes the next one needs.
    await slurm?.exec(["scancel", "--user=root"]);
    await until(
      () => slurm.exec(["squeue", "-h"]).then((result) => result.stdout.trim()),
      (text) => text === "",
      "an empty queue",
    );
  }, 60_000);

  afterAll(async () => {
    await slurm?.teardown();
  }, 60_000);

  it("gives each compute node a directory of its own, which the login node does not see", async () => {
    const directory = slurm.nodeLocalDirectory;
    const step = await slurm.exec([
      "srun",
      `--nodes=${slurm.computeNodes.length}`,
      "--ntasks-per-node=1",
      "sh",
      "-c",
      `touch ${directory}/"$SLURMD_NODENAME" && printf '%s:%s\n' "$SLURMD_NODENAME" "$(ls ${directory})"`,
    ]);
    expect(step.exitCode, step.stderr).toBe(0);
    expect(step.stdout.trim().split("\n").sort()).toEqual(["node1:node1", "node2:node2"]);
    expect(readdirSync(directory)).toEqual([]);
  });

  it("runs a batch job on a compute node, with the GPUs it asked for, and scancel ends it", async () => {
    const submitted = await slurm.exec([
      "sbatch",
      "--parsable",
      "--nodes=1",
      "--gres=gpu:2",
      "--job-name=skyward-testbed-probe",
      `--output=${slurm.directory}/probe-%j.out`,
      "--wrap",
      "srun --gres=gpu:2 sh -c 'echo \"host=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES\"'; sleep 600",
    ]);
    expect(submitted.exitCode, submitted.stderr).toBe(0);
    const jobId = submitted.stdout.trim();
    expect(jobId).toMatch(/^\d+$/);
    await until(
      () => jobState(slurm, jobId),
      (state) => state === "RUNNING",
      "the job running",
    );
    const nodeName = (await slurm.exec(["squeue", "-h", "-j", jobId, "-o", "%N"])).stdout.trim();
    expect(slurm.computeNodes.map((node) => node.name)).toContain(nodeName);

    // The job's step ran inside the compute node's namespace: its address is the node's, not the login's.
    const node = slurm.computeNodes.find((candidate) => candidate.name === nodeName);
    const step = await slurm.exec(["srun", `--jobid=${jobId}`, "--overlap", "-N1", "-n1", "hostname", "-I"]);
    expect(step.stdout.trim()).toBe(node?.address);
    const output = await until(
      () => runCommand("cat", [`${slurm.directory}/probe-${jobId}.out`]).then((result) => result.stdout),
      (text) => text.includes("host="),
      "the job's output",
    );
    expect(output).toContain(`host=${nodeName} gpus=0,1`);

    const cancelled = await slurm.exec(["scancel", jobId]);
    expect(cancelled.exitCode).toBe(0);
    await until(
      () => jobState(slurm, jobId),
      (state) => state === "",
      "the job gone from the queue",
    );
    // No process of the job is left in its node's namespace: only slurmd (and the mount shell's exec of it).
    const left = await runCommand(IP, ["netns", "pids", node?.namespace ?? ""]);
    const commands = left.stdout
      .split(/\s+/)
      .filter(Boolean)
      .map((pid) => processCommandLine(Number(pid)) ?? "");
    expect(commands.filter((command) => !command.includes("slurmd -D"))).toEqual([]);
  });

  it("queues a job the cluster cannot run yet, with its reason", async () => {
    const sbatch = (extra: string[]) =>
      slurm.exec([
        "sbatch",
        "--parsable",
        `--nodes=${slurm.computeNodes.length}`,
        ...extra,
        "--wrap",
        "sleep 600",
      ]);
    const holder = (await sbatch(["--exclusive"])).stdout.trim();
    await until(
      () => jobState(slurm, holder),
      (state) => state === "RUNNING",
      "the holder running",
    );
    const waiting = (await sbatch(["--exclusive"])).stdout.trim();
    const reason = await until(
      () => slurm.exec(["squeue", "-h", "-j", waiting, "-o", "%T %r"]).then((result) => result.stdout.trim()),
      (text) => text.startsWith("PENDING") && !text.endsWith("None"),
      "a pending reason",
    );
    expect(reason).toMatch(/^PENDING (Resources|Priority)$/);
    await slurm.exec(["scancel", holder, waiting]);
  });

  it("requeues a preemptible job when the main partition needs its nodes", async () => {
    const all = `--nodes=${slurm.computeNodes.length}`;
    const low = (
      await slurm.exec([
        "sbatch",
        "--parsable",
        all,
        "--exclusive",
        "--requeue",
        `--partition=${SLURM_TESTBED_PREEMPTIBLE_PARTITION}`,
        "--wrap",
        "sleep 600",
      ])
    ).stdout.trim();
    await until(
      () => jobState(slurm, low),
      (state) => state === "RUNNING",
      "the preemptible job running",
    );
    const high = (
      await slurm.exec(["sbatch", "--parsable", all, "--exclusive", "--wrap", "sleep 600"])
    ).stdout.trim();
    await until(
      () => jobState(slurm, high),
      (state) => state === "RUNNING",
      "the main job running",
    );
    const restarts = await slurm.exec(["scontrol", "show", "job", low]);
    expect(restarts.stdout).toMatch(/Restarts=[1-9]/);
    await slurm.exec(["scancel", low, high]);
  });

  it("rejects at submit a job asking for more GPUs than a node has", async () => {
    const refused = await slurm.exec([
      "sbatch",
      "--parsable",
      `--gres=gpu:${slurm.gpusPerNode + 1}`,
      "--wrap",
      "true",
    ]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/Requested node configuration is not available/);
  });
});

describe.skipIf(skipReason !== undefined)("the Slurm test bed's teardown", () => {
  it("leaves no daemon, job or file behind", async () => {
    const slurm = await createSlurmTestbed({ computeNodes: 1, gpusPerNode: 0 });
    await slurm.exec(["sbatch", "--wrap", "sleep 600"]);
    const namespaces = [slurm.login.namespace, ...slurm.computeNodes.map((node) => node.namespace)];
    const pids: number[] = [];
    for (const namespace of namespaces) {
      const listed = await runCommand(IP, ["netns", "pids", namespace]);
      pids.push(...listed.stdout.split(/\s+/).filter(Boolean).map(Number));
    }
    expect(pids.length).toBeGreaterThanOrEqual(3);
    await slurm.teardown();
    expect(pids.filter((pid) => isProcessRunning(pid))).toEqual([]);
    expect(existsSync(slurm.directory)).toBe(false);
  }, 120_000);
});
