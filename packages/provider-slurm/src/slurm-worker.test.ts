/**
 * The worker's start probe, run by a real bash: the `srun` step runs detached on the login node, so
 * when it ends it is the login node's init that reaps it; where that init does not reap (a container
 * whose PID 1 is `sleep infinity`), the ended step stays a zombie, which still answers `kill -0`. The
 * probe must see it ended (and print its log), or the launch waits its whole `timeoutSeconds`.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { workerProbeCommand } from "./slurm-worker.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A process that ends at once and that its parent never reaps: a zombie, and its pid. */
async function zombie(): Promise<number> {
  const parent: ChildProcess = spawn(
    "python3",
    [
      "-c",
      "import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(3)\nprint(pid, flush=True)\ntime.sleep(120)",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  cleanups.push(async () => {
    parent.kill("SIGKILL");
  });
  const line = await new Promise<string>((resolve) =>
    createInterface({ input: parent.stdout! }).once("line", resolve),
  );
  const pid = Number(line);
  // Wait until it has ended (its state Z), as the probe would find it.
  for (;;) {
    const state = execFileSync("sh", ["-c", `sed 's/.*) //' /proc/${pid}/stat | cut -c1`], {
      encoding: "utf8",
    });
    if (state.trim() === "Z") return pid;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function stepDirectory(srunPid: number): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), "skyward-slurm-probe-"));
  cleanups.push(() => rm(directory, { recursive: true, force: true }));
  await writeFile(join(directory, "srun.pid"), `${srunPid}\n`);
  await writeFile(join(directory, "srun.log"), "srun: error: step ended\n");
  await writeFile(join(directory, "worker.log"), "worker started\n");
  return directory;
}

describe("the worker's start probe", () => {
  it("sees an ended srun step that nobody reaped (a zombie) as dead, with its log", async () => {
    const output = execFileSync("bash", ["-c", workerProbeCommand(await stepDirectory(await zombie()))], {
      encoding: "utf8",
    });
    expect(output).toMatch(/^::dead$/m);
    expect(output).toContain("srun: error: step ended");
  });

  it("sees a running srun step as alive", async () => {
    const running = spawn("sleep", ["120"], { stdio: "ignore" });
    cleanups.push(async () => {
      running.kill("SIGKILL");
    });
    const output = execFileSync(
      "bash",
      ["-c", workerProbeCommand(await stepDirectory(running.pid as number))],
      {
        encoding: "utf8",
      },
    );
    expect(output).toMatch(/^::alive$/m);
    expect(output).toContain("worker started");
  });
});
