/**
 * A task stopped on the thread executor (timeout or AbortSignal) stops running its Python code:
 * its thread is interrupted, not left burning CPU after the client was told it ended.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/spin_tasks.py", import.meta.url));

const spin = sky.python<[string], number>("spin_tasks:spin");
const spinState = sky.python<[string], { count: number; ended: boolean; cpu: number }>(
  "spin_tasks:spin_state",
);

describe("stopping a running task on the thread executor", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  async function expectStopped(key: string): Promise<void> {
    // Its `finally` has run within half a second, and from then on it neither counts nor burns CPU.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = await pool.run(spinState(key));
    expect(before.ended).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await pool.run(spinState(key));
    expect(after.count).toBe(before.count);
    expect(after.cpu - before.cpu).toBeLessThan(0.25);
  }

  it("stops the Python code of a task that timed out", async () => {
    await expect(pool.run(spin("timeout").withTimeout(0.3))).rejects.toSatisfy((error) =>
      sky.TaskTimeoutError.isInstance(error),
    );
    await expectStopped("timeout");
  });

  it("stops the Python code of a task aborted with an AbortSignal", async () => {
    const running = pool.run(spin("abort"), { signal: AbortSignal.timeout(300) });
    await expect(running).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
    await expectStopped("abort");
    // Both slots serve on.
    const states = await Promise.all([pool.run(spinState("abort")), pool.run(spinState("abort"))]);
    expect(states.every((state) => state.ended)).toBe(true);
  });
});
