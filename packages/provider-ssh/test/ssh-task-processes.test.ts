/**
 * The processes a task starts end with the SSH node's worker when it is SIGKILLed (the OOM killer):
 * on your own machines they would keep the GPU busy and collide with the next pool. Test bed: real
 * sshd hosts, the real bootstrap and launcher (the worker in a session of its own, its keeper
 * beside it).
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { eventually, requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("../../core/test/fixtures/task_process_tasks.py", import.meta.url));
const startSleep = sky.python<[], [number, number]>("task_process_tasks:start_sleep");

describe.skipIf(skipReason !== undefined)("a task's own processes on an SSH host (test bed)", () => {
  const scratch = useTestbedAndHome({ hosts: 1, homePrefix: "skyward-ssh-task-processes-" });

  it("end when the worker is SIGKILLed", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
      nodes: 1,
      ttl: 60,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const [sleep, worker] = await pool.run(startSleep());
    try {
      expect(alive(sleep)).toBe(true);
      process.kill(worker, "SIGKILL");
      expect(await eventually(() => !alive(sleep), 60_000)).toBe(true);
    } finally {
      if (alive(sleep)) process.kill(sleep, "SIGKILL");
    }
  }, 300_000);
});
