/**
 * A task that may not run twice (retries off, or its retries used up) and a node lost while it
 * waits: when it never started, nothing of it ran, so it runs elsewhere whatever its retry setting;
 * only the task that had started fails. On the Local provider with real workers and a real SIGKILL.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/healing_tasks.py", import.meta.url));
const image = { includes: [tasks] };

type Work = { key: string; node: number; pid: number };
const work = sky.python<[string, number, string?], Work>("healing_tasks:work");
const whoami = sky.python<[], { node: number; pid: number }>("healing_tasks:whoami");

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-prefetch-loss-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function journal(path: string): Promise<Work[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

/** Resolves once the journal shows `count` task starts. */
async function started(path: string, count: number): Promise<Work[]> {
  for (;;) {
    const entries = await journal(path);
    if (entries.length >= count) return entries;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("a node lost with tasks that run once waiting on it", () => {
  it("fails only the task that started there; those that never started run elsewhere", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image,
      options: { console: false, worker: { concurrency: 1, buffer: 2 } },
    });
    const victim = await pool.run(whoami(), { target: 1 });
    const path = join(scratch, "once.jsonl");
    const keys = Array.from({ length: 6 }, (_, index) => `k${index}`);
    // Each node has one slot running and two prefetch slots: all six are placed at once.
    const outcomes = keys.map((key) =>
      pool.run(work(key, 1.5, path).withRetry(false)).then(
        (result) => ({ key, result }),
        (error: unknown) => ({ key, error }),
      ),
    );
    // One task runs on each node; the others wait.
    const first = await started(path, 2);
    const onVictim = first.find((entry) => entry.pid === victim.pid);
    expect(onVictim).toBeDefined();
    process.kill(victim.pid, "SIGKILL");
    const settled = await Promise.all(outcomes);
    const failed = settled.filter((outcome) => "error" in outcome);
    // Only the task that had started on the killed worker fails, as retry-disabled.
    expect(failed.map((outcome) => outcome.key)).toEqual([onVictim?.key]);
    const error = (failed[0] as { error: unknown }).error;
    expect(sky.TaskInterruptedError.isInstance(error)).toBe(true);
    if (sky.TaskInterruptedError.isInstance(error)) expect(error.reason).toBe("retry-disabled");
    // Every other task completed, on a live worker, and each ran exactly once.
    const starts = await journal(path);
    for (const key of keys) expect(starts.filter((entry) => entry.key === key)).toHaveLength(1);
    for (const outcome of settled) {
      if ("result" in outcome) expect(outcome.result.pid).not.toBe(victim.pid);
    }
  }, 120_000);
});
