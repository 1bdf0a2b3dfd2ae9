/**
 * Skyward's own figures, on the `Local` provider: sync round-trip latency, `map` throughput, a 64 MiB
 * `Uint8Array` echoed, and the time a 4-node pool takes to be ready.
 */
import { randomFillSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Plugin } from "../dist/contract.js";
import * as sky from "../dist/index.js";
import { benchDirectory } from "./python.ts";
import { type LatencySummary, MIB, median, progress, summariseLatency } from "./stats.ts";

/** What to measure and how much of it. */
export interface OursSettings {
  /** Prefetch slots per worker (`worker.buffer`) of the 2-node pool. */
  readonly buffer: number;
  /** One-at-a-time calls timed for latency (after `warmupCalls`). */
  readonly calls: number;
  readonly warmupCalls: number;
  /** No-op tasks per `pool.map` run, and how many timed runs (after one smaller warm-up run). */
  readonly tasks: number;
  readonly mapRuns: number;
  /** Size of the echoed `Uint8Array`, and timed echoes (after one warm-up). */
  readonly payloadMib: number;
  readonly repetitions: number;
  /** Nodes of the pool whose start is timed, and how many starts. */
  readonly readyNodes: number;
  readonly readyStarts: number;
  /** Which parts to run. */
  readonly sections: ReadonlySet<Section>;
  /** Profile the 2-node pool's workers with cProfile into this directory. */
  readonly profileDirectory: string | undefined;
}

/** The parts of the benchmark that can be run alone (`--only`). */
export type Section =
  | "latency"
  | "throughput"
  | "bytes"
  | "ready"
  | "baseline"
  | "defaults"
  | "fanout"
  | "recovery"
  | "collections";

/** A figure measured several times: the median and every run. */
export interface Repeated {
  readonly median: number;
  readonly runs: readonly number[];
}

/** Skyward's figures (each present when its section ran). */
export interface OursResult {
  readonly latencyMs?: LatencySummary & { readonly cpu: CpuPerTask };
  readonly tasksPerSecond?: Repeated & { readonly tasks: number; readonly cpu: readonly CpuPerTask[] };
  readonly mbPerSecond?: Repeated & { readonly payloadMib: number };
  readonly readyMs?: Repeated & { readonly nodes: number; readonly closeMs: Repeated };
}

const image = { includes: [join(benchDirectory, "bench_tasks.py")] };
const noop = sky.python<[], null>("bench_tasks:noop");
const echo = sky.python<[Uint8Array], Uint8Array>("bench_tasks:echo");
const pid = sky.python<[], number>("bench_tasks:pid");

/** CPU seconds (user + system) a process has used so far, from /proc; undefined where there is none. */
function processCpuSeconds(processId: number): number | undefined {
  try {
    // Fields after the parenthesised command name: state is field 3, utime 14 and stime 15.
    const stat = readFileSync(`/proc/${processId}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / 100; // USER_HZ, 100 on Linux
  } catch {
    return undefined;
  }
}

/** CPU microseconds per task spent by this (client) process and by the worker processes together. */
export interface CpuPerTask {
  readonly clientMicroseconds: number;
  readonly workersMicroseconds: number | undefined;
}

/** Starts counting the CPU time of this process and of the pool's workers; call the result to stop. */
async function startCpuMeter(pool: sky.Pool): Promise<(tasks: number) => CpuPerTask> {
  const workerPids = await pool.broadcast(pid());
  const workersSeconds = () => {
    const seconds = workerPids.map(processCpuSeconds);
    return seconds.every((value) => value !== undefined)
      ? seconds.reduce((sum, value) => sum + value, 0)
      : undefined;
  };
  const clientBefore = process.cpuUsage();
  const workersBefore = workersSeconds();
  return (tasks) => {
    const client = process.cpuUsage(clientBefore);
    const workersAfter = workersSeconds();
    return {
      clientMicroseconds: (client.user + client.system) / tasks,
      workersMicroseconds:
        workersBefore === undefined || workersAfter === undefined
          ? undefined
          : ((workersAfter - workersBefore) * 1e6) / tasks,
    };
  };
}

function profilePlugins(directory: string | undefined): sky.PluginV1[] {
  if (!directory) return [];
  const wrapper = join(benchDirectory, "profile_worker.py");
  return [
    Plugin.create("bench-profile").withLauncher(({ command }) => command.with({ entrypoint: wrapper })),
  ];
}

async function measureLatency(
  pool: sky.Pool,
  settings: OursSettings,
): Promise<LatencySummary & { cpu: CpuPerTask }> {
  progress(`latency: ${settings.warmupCalls} warm-up + ${settings.calls} one-at-a-time no-op calls`);
  for (let i = 0; i < settings.warmupCalls; i += 1) await pool.run(noop());
  const samples: number[] = [];
  const meter = await startCpuMeter(pool);
  for (let i = 0; i < settings.calls; i += 1) {
    const started = performance.now();
    await pool.run(noop());
    samples.push(performance.now() - started);
  }
  return { ...summariseLatency(samples), cpu: meter(settings.calls) };
}

async function measureThroughput(
  pool: sky.Pool,
  settings: OursSettings,
): Promise<Repeated & { tasks: number; cpu: CpuPerTask[] }> {
  const warmup = Math.min(10_000, settings.tasks);
  progress(
    `throughput: pool.map over ${warmup} (warm-up) then ${settings.mapRuns} x ${settings.tasks} no-op tasks`,
  );
  const items = (count: number): [][] => Array.from({ length: count }, () => [] as []);
  await pool.map(noop, items(warmup));
  const runs: number[] = [];
  const cpu: CpuPerTask[] = [];
  for (let run = 0; run < settings.mapRuns; run += 1) {
    const input = items(settings.tasks);
    const meter = await startCpuMeter(pool);
    const started = performance.now();
    const results = await pool.map(noop, input);
    const elapsed = performance.now() - started;
    cpu.push(meter(settings.tasks));
    if (results.length !== settings.tasks)
      throw new Error(`map returned ${results.length} results for ${settings.tasks} tasks`);
    runs.push((settings.tasks / elapsed) * 1000);
  }
  return { median: median(runs), runs, tasks: settings.tasks, cpu };
}

async function measureBytes(
  pool: sky.Pool,
  settings: OursSettings,
): Promise<Repeated & { payloadMib: number }> {
  progress(`bytes: a ${settings.payloadMib} MiB Uint8Array echoed, 1 warm-up + ${settings.repetitions}`);
  const payload = new Uint8Array(settings.payloadMib * MIB);
  for (let offset = 0; offset < payload.length; offset += 65_536) randomFillSync(payload, offset, 65_536);
  // Both ways: the argument out and the same bytes back as the result.
  const moved = 2 * payload.length;
  const once = async (): Promise<number> => {
    const started = performance.now();
    const echoed = await pool.run(echo(payload));
    const elapsed = performance.now() - started;
    const sameEnds = echoed[0] === payload[0] && echoed[payload.length - 1] === payload[payload.length - 1];
    if (echoed.length !== payload.length || !sameEnds)
      throw new Error("the echoed bytes differ from the argument");
    return moved / (elapsed / 1000) / 1e6;
  };
  await once();
  const runs: number[] = [];
  for (let i = 0; i < settings.repetitions; i += 1) runs.push(await once());
  return { median: median(runs), runs, payloadMib: settings.payloadMib };
}

async function measureReady(
  settings: OursSettings,
): Promise<Repeated & { nodes: number; closeMs: Repeated }> {
  progress(`ready: ${settings.readyStarts} starts of a ${settings.readyNodes}-node pool`);
  const runs: number[] = [];
  const closes: number[] = [];
  for (let i = 0; i < settings.readyStarts; i += 1) {
    const started = performance.now();
    const pool = await sky.compute({
      nodes: settings.readyNodes,
      image,
      options: { console: false, worker: { concurrency: 1 } },
    });
    runs.push(performance.now() - started);
    if (pool.currentNodes() !== settings.readyNodes)
      throw new Error(`only ${pool.currentNodes()} nodes were ready`);
    const closing = performance.now();
    await pool.close();
    closes.push(performance.now() - closing);
  }
  return {
    median: median(runs),
    runs,
    nodes: settings.readyNodes,
    closeMs: { median: median(closes), runs: closes },
  };
}

/** Runs Skyward's part of the benchmark. */
export async function measureOurs(settings: OursSettings): Promise<OursResult> {
  const { sections } = settings;
  let latencyMs: (LatencySummary & { cpu: CpuPerTask }) | undefined;
  let tasksPerSecond: (Repeated & { tasks: number; cpu: CpuPerTask[] }) | undefined;
  let mbPerSecond: (Repeated & { payloadMib: number }) | undefined;
  if (sections.has("latency") || sections.has("throughput") || sections.has("bytes")) {
    progress(`starting a 2-node local pool (concurrency 1, buffer ${settings.buffer})`);
    const pool = await sky.compute({
      nodes: 2,
      image: settings.profileDirectory
        ? { ...image, env: { SKYWARD_BENCH_PROFILE_DIR: settings.profileDirectory } }
        : image,
      plugins: profilePlugins(settings.profileDirectory),
      options: { console: false, worker: { concurrency: 1, buffer: settings.buffer } },
    });
    try {
      if (sections.has("latency")) latencyMs = await measureLatency(pool, settings);
      if (sections.has("throughput")) tasksPerSecond = await measureThroughput(pool, settings);
      if (sections.has("bytes")) mbPerSecond = await measureBytes(pool, settings);
    } finally {
      await pool.close();
    }
  }
  const readyMs = sections.has("ready") ? await measureReady(settings) : undefined;
  return {
    ...(latencyMs ? { latencyMs } : {}),
    ...(tasksPerSecond ? { tasksPerSecond } : {}),
    ...(mbPerSecond ? { mbPerSecond } : {}),
    ...(readyMs ? { readyMs } : {}),
  };
}
