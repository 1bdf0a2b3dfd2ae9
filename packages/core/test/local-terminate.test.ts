/**
 * Closing a Local pool ends everything its workers started, and never waits for ever: what ignores
 * SIGTERM is killed after a grace period, and a worker whose `exit` event this process no longer
 * hears (its listener removed) does not hang the close.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { detachLocalWorkers } from "../src/local/local-provider.js";
import { alive, until } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/local_terminate_tasks.py", import.meta.url));
const stubbornChild = sky.python<[], number>("local_terminate_tasks:stubborn_child");
const workerPid = sky.python<[], number>("local_terminate_tasks:worker_pid");

/** The real Local provider, recording the instances it provisions. */
function recordingLocal() {
  const local = sky.Local();
  const instances: string[] = [];
  const provider: sky.Provider = {
    ...local,
    async provision(options) {
      const made = await local.provision(options as never);
      instances.push(...made.map((instance) => instance.id));
      return made;
    },
  };
  return { local, provider, instances };
}

/**
 * Starts a 1-node Local pool, a task's process that ignores SIGTERM, `before` (given the worker's
 * pid), closes the pool, and says whether that process is gone afterwards.
 */
async function stubbornChildGoneAfterClose(before: (worker: number) => Promise<void>): Promise<boolean> {
  let child: number | undefined;
  try {
    const pool = await sky.compute({
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false, logging: false },
    });
    try {
      child = await pool.run(stubbornChild());
      expect(alive(child)).toBe(true);
      await before(await pool.run(workerPid()));
    } finally {
      await pool.close();
    }
    const pid = child;
    return await until(() => !alive(pid), 10_000);
  } finally {
    if (child !== undefined && alive(child)) process.kill(child, "SIGKILL");
  }
}

describe("closing a Local pool", () => {
  it("kills a process of a task that ignores SIGTERM", async () => {
    expect(await stubbornChildGoneAfterClose(async () => {})).toBe(true);
  }, 120_000);

  it("kills what a task started when its worker was killed before", async () => {
    const gone = await stubbornChildGoneAfterClose(async (worker) => {
      // The worker alone is killed (out of memory, say): its task's process stays in its group (the
      // worker's keeper also ends it, after its own grace period; whichever comes first).
      process.kill(worker, "SIGKILL");
      expect(await until(() => !alive(worker), 10_000)).toBe(true);
    });
    expect(gone).toBe(true);
  }, 120_000);

  it("does not wait for ever for a worker whose exit listener is gone", async () => {
    const { local, provider, instances } = recordingLocal();
    let worker: number | undefined;
    const pool = await sky.compute({
      provider,
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false, logging: false },
    });
    try {
      worker = await pool.run(workerPid());
      const id = instances[0] as string;
      // A terminate under way when the worker's exit listener goes (detachLocalWorkers removes it):
      // before, it waited for that event for ever (this test ran out of time).
      const terminated = local.terminate({
        cluster: undefined as never,
        ids: [id],
        signal: AbortSignal.timeout(60_000),
      });
      detachLocalWorkers([id]);
      await terminated;
      const pid = worker;
      expect(await until(() => !alive(pid), 10_000)).toBe(true);
    } finally {
      await pool.close().catch(() => undefined);
      if (worker !== undefined && alive(worker)) process.kill(worker, "SIGKILL");
    }
  }, 120_000);
});
