/**
 * The scheduling figures: `map` throughput with default options (the adaptive buffer) beside the
 * tuned `buffer` figure, on the same 2-node Local pool shape, runs alternated; and fan-out
 * efficiency — many sleep tasks over many nodes with default options, ideal time / measured.
 */
import { join } from "node:path";
import * as sky from "../dist/index.js";
import { benchDirectory } from "./python.ts";
import { median, progress } from "./stats.ts";

const image = { includes: [join(benchDirectory, "bench_tasks.py")] };
const noop = sky.python<[], null>("bench_tasks:noop");
const nap = sky.python<[number], number>("bench_tasks:nap");

/** What the scheduling part measures and how much. */
export interface ScheduleSettings {
  /** The tuned `worker.buffer` the default is compared with. */
  readonly buffer: number;
  /** No-op tasks per `map` run, and timed runs of each pool (after one warm-up each). */
  readonly tasks: number;
  readonly mapRuns: number;
  /** Fan-out: nodes, sleep tasks per node, and each task's sleep in seconds. */
  readonly fanoutNodes: number;
  readonly fanoutTasksPerNode: number;
  readonly fanoutSeconds: number;
}

/** Default-options throughput beside the tuned figure. */
export interface DefaultsResult {
  readonly tasks: number;
  readonly buffer: number;
  readonly defaultRuns: readonly number[];
  readonly tunedRuns: readonly number[];
  readonly defaultMedian: number;
  readonly tunedMedian: number;
  /** default / tuned (medians); the target is >= 0.5. */
  readonly ratio: number;
}

/** Fan-out efficiency: ideal time (total sleep / nodes) over measured. */
export interface FanoutResult {
  readonly nodes: number;
  readonly tasks: number;
  readonly seconds: number;
  readonly idealMs: number;
  readonly measuredMs: number;
  /** Tasks each node ran (an even spread is `tasks / nodes` each). */
  readonly perNode: readonly number[];
  /** ideal / measured; the target is >= 0.99. */
  readonly efficiency: number;
  /** Mean time from a task's send to its result: above `seconds` by the sleep's own overshoot and the round trip. */
  readonly meanTaskMs: number;
}

const where = sky.python<[], number>("bench_tasks:pid");

async function timedMap(pool: sky.Pool, tasks: number): Promise<number> {
  const items = Array.from({ length: tasks }, () => [] as []);
  const started = performance.now();
  const results = await pool.map(noop, items);
  const elapsed = performance.now() - started;
  if (results.length !== tasks) throw new Error(`map returned ${results.length} results for ${tasks} tasks`);
  return (tasks / elapsed) * 1000;
}

/** `map` of no-op tasks on a 2-node pool with default options and with `buffer: N`, runs alternated. */
export async function measureDefaults(settings: ScheduleSettings): Promise<DefaultsResult> {
  progress(
    `defaults: 2-node pools with default options and with buffer ${settings.buffer}, ${settings.mapRuns} alternated map runs of ${settings.tasks} no-op tasks each`,
  );
  const defaults = await sky.compute({ nodes: 2, image, options: { console: false } });
  try {
    const tuned = await sky.compute({
      nodes: 2,
      image,
      options: { console: false, worker: { buffer: settings.buffer } },
    });
    try {
      const warmup = Math.min(10_000, settings.tasks);
      await timedMap(defaults, warmup);
      await timedMap(tuned, warmup);
      const defaultRuns: number[] = [];
      const tunedRuns: number[] = [];
      for (let run = 0; run < settings.mapRuns; run += 1) {
        tunedRuns.push(await timedMap(tuned, settings.tasks));
        defaultRuns.push(await timedMap(defaults, settings.tasks));
      }
      const defaultMedian = median(defaultRuns);
      const tunedMedian = median(tunedRuns);
      return {
        tasks: settings.tasks,
        buffer: settings.buffer,
        defaultRuns,
        tunedRuns,
        defaultMedian,
        tunedMedian,
        ratio: defaultMedian / tunedMedian,
      };
    } finally {
      await tuned.close();
    }
  } finally {
    await defaults.close();
  }
}

/** Many sleep tasks over many nodes with default options: how close to the ideal spread it finishes. */
export async function measureFanout(settings: ScheduleSettings): Promise<FanoutResult> {
  const nodes = settings.fanoutNodes;
  const tasks = nodes * settings.fanoutTasksPerNode;
  const seconds = settings.fanoutSeconds;
  progress(`fan-out: ${tasks} tasks of ${seconds} s sleep over ${nodes} nodes, default options`);
  const pool = await sky.compute({ nodes, image, options: { console: false } });
  try {
    const pids = await pool.broadcast(where());
    const ran = new Map<number, number>();
    let taskMs = 0;
    pool.on("task.completed", (event) => {
      ran.set(event.node, (ran.get(event.node) ?? 0) + 1);
      taskMs += event.durationMs;
    });
    const started = performance.now();
    await pool.map(
      nap,
      Array.from({ length: tasks }, () => [seconds] as [number]),
    );
    const measuredMs = performance.now() - started;
    const idealMs = (tasks * seconds * 1000) / nodes;
    return {
      nodes: pids.length,
      tasks,
      seconds,
      idealMs,
      measuredMs,
      perNode: Array.from({ length: nodes }, (_, node) => ran.get(node) ?? 0),
      efficiency: idealMs / measuredMs,
      meanTaskMs: taskMs / tasks,
    };
  } finally {
    await pool.close();
  }
}
