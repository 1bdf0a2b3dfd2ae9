/**
 * Recovery after a lost node, on the `Local` provider: a 2-node pool, a task running on node 1, node
 * 1's worker SIGKILLed. Two figures per run — kill → the interrupted task's result (it runs again on
 * node 0; the figure includes the task's own run time) and kill → the pool back to its size (node 1
 * replaced and ready).
 */
import { join } from "node:path";
import * as sky from "../dist/index.js";
import { benchDirectory } from "./python.ts";
import { median, progress } from "./stats.ts";

/** How long recovering took, per run and as medians. */
export interface RecoveryResult {
  /** Seconds the interrupted task takes to run (included in `resultMs`). */
  readonly taskSeconds: number;
  /** Kill → the retried task's result, ms. */
  readonly resultMs: { readonly median: number; readonly runs: readonly number[] };
  /** Kill → the replacement ready (the pool back to 2 nodes), ms. */
  readonly poolMs: { readonly median: number; readonly runs: readonly number[] };
}

const image = { includes: [join(benchDirectory, "bench_tasks.py")] };
const pid = sky.python<[], number>("bench_tasks:pid");
const sleep = sky.python<[number], number>("bench_tasks:sleep");

/** Kills node 1's worker `runs` times under a running task and times the recovery. */
export async function measureRecovery(runs: number, taskSeconds = 0.2): Promise<RecoveryResult> {
  progress(`recovery: ${runs} x SIGKILL of a worker running a ${taskSeconds} s task (2-node local pool)`);
  const resultRuns: number[] = [];
  const poolRuns: number[] = [];
  await using pool = await sky.compute({ nodes: 2, image, options: { console: false } });
  for (let run = 0; run < runs; run += 1) {
    const victim = await pool.run(pid(), { target: 1 });
    const replaced = new Promise<number>((resolve) => {
      const off = pool.on("node.replaced", () => {
        off();
        resolve(performance.now());
      });
    });
    const started = new Promise<void>((resolve) => {
      const off = pool.on("task.started", (event) => {
        if (event.node === 1) {
          off();
          resolve();
        }
      });
    });
    // An idle pool places these round-robin: one on each node.
    const tasks = [pool.run(sleep(taskSeconds)), pool.run(sleep(taskSeconds))];
    await started;
    // Let the worker pick it up before it is killed.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const killed = performance.now();
    process.kill(victim, "SIGKILL");
    await Promise.all(tasks);
    resultRuns.push(performance.now() - killed);
    poolRuns.push((await replaced) - killed);
  }
  return {
    taskSeconds,
    resultMs: { median: median(resultRuns), runs: resultRuns },
    poolMs: { median: median(poolRuns), runs: poolRuns },
  };
}
