/**
 * A pool's secrets under `accelerate launch`, on one Local node with 2 faked GPUs (the fake
 * `nvidia-smi` of `fixtures/bin`; no real GPU, so the state is multi-CPU): the real accelerate
 * (< 0.32, as `local-pool.test.ts` installs it) launches the node's worker, which with
 * `perAccelerator` runs one worker process per accelerator, and without it is the launched process
 * itself. Each task reads the secret from `os.environ`, while no process's command line and no file
 * under the node's root holds its value.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { localSecretLeaks, poolTasks, requireSystemPython, withLocalNodeRoot } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { accelerate } from "../src/index.js";

const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));
const planted = { name: "plugin-accelerate secrets.test.ts", value: "accelerate-launch-planted-secret-9023" };

const missing = await requireSystemPython("torch", {
  python: "/usr/bin/python3",
  install: "python3-torch",
  purpose: "PyTorch for the accelerate secrets test",
});

/** The command lines of a process's ancestors, nearest first (read from /proc: Local runs here). */
function ancestorCommandLines(pid: number): string[] {
  const lines: string[] = [];
  for (let current = pid; current > 1; ) {
    const stat = readFileSync(`/proc/${current}/stat`, "utf8");
    // The parent's pid is the second field after the command name, which is in parentheses.
    current = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    lines.push(readFileSync(`/proc/${current}/cmdline`, "utf8").split("\0").join(" "));
  }
  return lines;
}

describe.skipIf(missing !== undefined)("a pool's secrets under accelerate launch", () => {
  it.each([
    ["one worker process per accelerator", true, 2],
    ["the launched worker itself", false, 1],
  ] as const)(
    "reach the tasks of %s, and no command line or file of the node",
    async (_, perAccelerator, workers) => {
      await withLocalNodeRoot(
        "skyward-accelerate-secrets-",
        async (workRoot) => {
          await using pool = await sky.compute({
            provider: sky.Local({ workRoot }),
            image: { python: "/usr/bin/python3", pip: ["accelerate<0.32"], includes: [poolTasks.file] },
            secrets: { SKYTEST_ACCELERATE_SECRET: planted.value },
            plugins: [
              accelerate({ distributed_type: "MULTI_CPU", num_processes: workers }, { perAccelerator }),
            ],
            options: { console: false },
          });
          expect(pool.workerCount()).toBe(workers);
          const seen = await pool.broadcast(poolTasks.environment("SKYTEST_ACCELERATE_SECRET"));
          expect(seen.map((task) => task.value)).toEqual(Array(workers).fill(planted.value));
          for (const task of seen) {
            const launched = ancestorCommandLines(task.pid).some((line) =>
              line.includes("-m accelerate.commands.launch"),
            );
            expect(launched).toBe(true);
          }
          // While the pool runs: accelerate's launcher, the workers it started, their processes.
          const leaks = await localSecretLeaks(workRoot, [planted]);
          expect(leaks.commandLines).toEqual([]);
          expect(leaks.files.files).toBeGreaterThan(0);
          expect(leaks.files.findings).toEqual([]);
        },
        // The client (the Local provider's offer) and the workers (their device check) ask nvidia-smi.
        { toolsFirst: fakes },
      );
    },
  );
});
