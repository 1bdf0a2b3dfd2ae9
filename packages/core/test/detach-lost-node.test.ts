// A node lost while its pool is being detached — after the detach's snapshot and the state file's
// write began, before the workers are released: the detach completes (the others are released and
// keep their tasks), says which node was lost, and does not fail with a TypeError after writing the
// state file. The loss is made to fall in that window by holding the state file's write until the
// pool has seen node 1's worker (SIGKILLed) go. The pool's replacement of node 1, cut short by the
// detach, waits for that worker's exit: the detach must not let go of it (it hung when the exit came
// after the release, about one run in six).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";
import * as sky from "../src/index.js";
import type { DetachedPoolState } from "../src/session/state.js";
import { alive, cleanUpDetached, until } from "./fixtures/processes.js";

const hold = vi.hoisted(() => ({
  before: undefined as ((state: DetachedPoolState) => Promise<void>) | undefined,
}));
vi.mock("../src/session/state.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../src/session/state.js")>();
  return {
    ...actual,
    writePoolState: async (state: DetachedPoolState) => {
      const before = hold.before;
      hold.before = undefined;
      await before?.(state);
      return actual.writePoolState(state);
    },
  };
});

const tasks = fileURLToPath(new URL("./fixtures/detach_tasks.py", import.meta.url));
const slow = sky.python<[value: string, seconds: number], string>("detach_tasks:slow");

describe("a node lost during a detach", () => {
  it("the detach completes, releasing the others, and names the node lost", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detach-lost-"));
    const pids: number[] = [];
    let id: string | undefined;
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 2,
        image: { includes: [tasks] },
        options: { console: false },
      });
      const errors: string[] = [];
      pool.on("error", (event) => errors.push(event.message));
      const lost = new Promise<void>((resolve) => pool.on("node.lost", () => resolve()));
      const kept = pool.run(slow("kept", 1), { target: 0 }).catch((error: Error) => error.name);
      await new Promise((resolve) => setTimeout(resolve, 300));
      hold.before = async (state) => {
        pids.push(...state.nodes.map((node) => node.pid));
        process.kill(state.nodes[1]?.pid as number, "SIGKILL");
        await lost;
      };
      id = await pool.detach();
      expect(await kept).toBe("TaskDetachedError");
      expect(errors.some((message) => /node 1 .*lost while the pool was being detached/.test(message))).toBe(
        true,
      );
      // Node 0's worker was released with its task's result kept: it waits for a client.
      expect(alive(pids[0] as number)).toBe(true);
      expect(await until(() => !alive(pids[1] as number))).toBe(true);
    } finally {
      cleanUpDetached({ pids, workRoot, ...(id ? { id } : {}) });
    }
  }, 60_000);
});
