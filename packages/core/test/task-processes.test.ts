/**
 * The processes a task starts (a training script, `torchrun` and its workers, here a `sleep` in a
 * session of its own) end with the Local node's worker: when it is SIGKILLed (the OOM killer), and
 * when the pool closes while the task runs. Left behind, they keep the GPU busy and collide with the
 * next pool on the machine.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/task_process_tasks.py", import.meta.url));
const startSleep = sky.python<[], [number, number]>("task_process_tasks:start_sleep");
const startSleepThenWait = sky.python<[string], never>("task_process_tasks:start_sleep_then_wait");
const options = { console: false } as const;

function kill(pid: number | undefined): void {
  if (pid !== undefined && alive(pid)) process.kill(pid, "SIGKILL");
}

describe("a task's own processes on a Local node", () => {
  it("end when the worker is SIGKILLed", async () => {
    await using pool = await sky.compute({ nodes: 1, image: { includes: [tasks] }, options });
    const [sleep, worker] = await pool.run(startSleep());
    try {
      expect(alive(sleep)).toBe(true);
      process.kill(worker, "SIGKILL");
      expect(await until(() => !alive(sleep), 60_000)).toBe(true);
    } finally {
      kill(sleep);
    }
  }, 180_000);

  it("end when the pool closes while the task runs", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-task-processes-"));
    const marker = join(scratch, "pid");
    let sleep: number | undefined;
    try {
      {
        await using pool = await sky.compute({ nodes: 1, image: { includes: [tasks] }, options });
        // Settled (as interrupted) by the close below.
        pool.run(startSleepThenWait(marker).withRetry(false)).catch(() => undefined);
        const written = () => existsSync(marker) && readFileSync(marker, "utf8") !== "";
        expect(await until(written, 60_000)).toBe(true);
        sleep = Number(readFileSync(marker, "utf8"));
        expect(alive(sleep)).toBe(true);
      }
      const gone = sleep;
      expect(await until(() => !alive(gone), 60_000)).toBe(true);
    } finally {
      kill(sleep);
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 180_000);
});
