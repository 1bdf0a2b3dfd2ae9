/**
 * The guards that need no client, on the Slurm test bed: a client SIGKILLed mid-pool leaves a job
 * that the scheduler itself ends at its time limit, and `skyward down --all` (the built CLI, in a
 * project whose skyward.toml names the cluster) cancels what such a client left and removes its pool's
 * directory.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdir } from "node:fs/promises";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { builtCli, createSlurmTestbed, isCi, requireSlurmTestbed, type SlurmTestbed } from "@skyward/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { SlurmSettings } from "../src/index.js";

const skipReason = await requireSlurmTestbed();
const client = fileURLToPath(new URL("./fixtures/slurm-client.ts", import.meta.url));
const cli = builtCli(import.meta.url, "provider-slurm");

describe.skipIf(skipReason !== undefined || (!cli.built && !isCi()))(
  "Slurm guards that need no client",
  () => {
    let slurm: SlurmTestbed;
    const children: ChildProcess[] = [];

    beforeAll(async () => {
      slurm = await createSlurmTestbed({ computeNodes: 2, gpusPerNode: 0 });
    }, 120_000);

    afterEach(async () => {
      for (const child of children.splice(0)) child.kill("SIGKILL");
      await slurm?.exec(["scancel", "--user=root"]);
    });

    afterAll(async () => {
      await slurm?.teardown();
    }, 60_000);

    const settings = (timeLimit: number): SlurmSettings => {
      return {
        login: slurm.loginSettings,
        sharedDirectory: slurm.sharedDirectory,
        timeLimit,
      };
    };

    /** Starts the client and waits for its pool's first result: the job its node runs in. */
    const startClient = async (timeLimit: number): Promise<{ child: ChildProcess; jobId: string }> => {
      const child = spawn(process.execPath, [client], {
        env: { ...process.env, SKYWARD_TEST_SLURM: JSON.stringify(settings(timeLimit)) },
        stdio: ["ignore", "pipe", "inherit"],
      });
      children.push(child);
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      for await (const line of lines) {
        const parsed = JSON.parse(line) as { slurm_job: string };
        return { child, jobId: parsed.slurm_job };
      }
      throw new Error("the client exited before its pool ran a task");
    };
    const jobLine = async (jobId: string) =>
      (await slurm.exec(["squeue", "-h", "-j", jobId, "-o", "%T %l"])).stdout.trim();

    it("a SIGKILLed client's job runs no longer than its time limit: the scheduler ends it", async () => {
      // Two minutes: long enough that a loaded machine's bootstrap finishes inside the job's limit.
      const { child, jobId } = await startClient(2);
      child.kill("SIGKILL");
      // Still there without its client, and limited to the minutes it was given.
      expect(await jobLine(jobId)).toBe("RUNNING 2:00");
      await expect.poll(() => jobLine(jobId), { timeout: 210_000, interval: 2_000 }).toBe("");
    }, 300_000);

    it("skyward down --all cancels the job a killed client left", async () => {
      const { child, jobId } = await startClient(30);
      child.kill("SIGKILL");
      expect(await jobLine(jobId)).toBe("RUNNING 30:00");
      const { host, identityFile } = slurm.loginSettings;
      await using project = await cli.project({
        prefix: "skyward-slurm-cli-",
        toml: `
[providers.cluster]
type = "slurm"
shared_directory = "${slurm.sharedDirectory}"
login = { host = "${host}", user = "root", identity_file = "${identityFile}" }
`,
      });
      const listed = await project.run(["instances", "--provider", "cluster"]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain(`${jobId}-0`);
      const down = await project.run(["down", "--all", "--yes", "--wait", "30"]);
      expect(down.code, down.stderr).toBe(0);
      await expect.poll(() => jobLine(jobId), { timeout: 30_000 }).toBe("");
      // …and removed the pool's directory on the shared filesystem (its environment), the job ended.
      expect(down.stdout + down.stderr).toMatch(/pool directory/);
      expect(await readdir(`${slurm.sharedDirectory}/pools`)).toEqual([]);
    }, 120_000);
  },
);
