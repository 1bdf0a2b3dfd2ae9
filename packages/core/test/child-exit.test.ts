/**
 * A process-executor child ends with its worker even while its task holds the interpreter (so no
 * thread of the child can see the worker go): a child left behind keeps its task's memory, GPU
 * memory on a real machine, until someone kills it by hand.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/child_exit_tasks.py", import.meta.url));
const pids = sky.python<[], [number, number]>("child_exit_tasks:pids");
const holdTheInterpreter = sky.python<[string], never>("child_exit_tasks:hold_the_interpreter");

describe("a process-executor child whose worker died", () => {
  it("ends even while its task holds the interpreter", async () => {
    await using pool = await sky.compute({
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false, worker: { executor: "process" } },
    });
    const [child, worker] = await pool.run(pids());
    const scratch = mkdtempSync(join(tmpdir(), "skyward-child-exit-"));
    const marker = join(scratch, "holding");
    try {
      // No retry: on the node that replaces the killed one it would hold a child again.
      const holding = pool.run(holdTheInterpreter(marker).withRetry(false)).catch((error: unknown) => error);
      expect(await until(() => existsSync(marker), 60_000)).toBe(true);
      process.kill(worker, "SIGKILL");
      expect(await until(() => !alive(child), 60_000)).toBe(true);
      expect(sky.TaskInterruptedError.isInstance(await holding)).toBe(true);
    } finally {
      if (alive(child)) process.kill(child, "SIGKILL");
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 180_000);
});
