/**
 * `pnpm bench`: Skyward's dispatch figures on the `Local` provider, next to a bare Python asyncio echo
 * over loopback (the baseline) and, with `--peers`, Ray and Dask distributed on the same machine;
 * and how fast a pool recovers from a killed worker.
 *
 *     pnpm bench [--peers] [--quick] [--only latency,throughput,bytes,ready,baseline,defaults,fanout,recovery,collections,values]
 *                [--buffer 64] [--calls 5000] [--tasks 100000] [--json out.json] [--profile-worker DIR]
 *
 * Runs on the built library (`../dist`): the root `pnpm bench` builds it first. Figures are printed,
 * never asserted; the targets are shown beside them.
 */

import { writeFile } from "node:fs/promises";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import { type CollectionsResult, measureCollections } from "./collections.ts";
import { measureOurs, type OursResult, type OursSettings, type Section } from "./ours.ts";
import { hostPython, preparePeer, runJsonHelper } from "./python.ts";
import { measureRecovery, type RecoveryResult } from "./recovery.ts";
import {
  type DefaultsResult,
  type FanoutResult,
  measureDefaults,
  measureFanout,
  type ScheduleSettings,
} from "./schedule.ts";
import {
  compare,
  formatCount,
  formatMs,
  formatSeconds,
  type LatencySummary,
  progress,
  renderTable,
} from "./stats.ts";
import { measureValues, type ValuesResult, valuesReport } from "./values.ts";

const SECTIONS: readonly Section[] = [
  "latency",
  "throughput",
  "bytes",
  "ready",
  "baseline",
  "defaults",
  "fanout",
  "recovery",
  "collections",
  "values",
];

const { values: flags } = parseArgs({
  options: {
    peers: { type: "boolean", default: false },
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    buffer: { type: "string", default: "64" },
    calls: { type: "string" },
    tasks: { type: "string" },
    json: { type: "string" },
    "profile-worker": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
  strict: true,
});

if (flags.help) {
  process.stdout.write(
    [
      "pnpm bench [--peers] [--quick] [--only SECTIONS] [--buffer N] [--calls N] [--tasks N] [--json FILE] [--profile-worker DIR]",
      "",
      "  --peers           also run Ray and Dask distributed (installed once into bench/.venv)",
      "  --quick           small counts, for a smoke run (figures are noisier)",
      `  --only            comma-separated subset of: ${SECTIONS.join(", ")}`,
      "  --buffer N        prefetch slots per worker of the 2-node pool (default 64)",
      "  --calls N         one-at-a-time calls timed for latency (default 5000)",
      "  --tasks N         no-op tasks per map run (default 100000)",
      "  --json FILE       also write every figure as JSON",
      "  --profile-worker  write each 2-node-pool worker's cProfile to DIR/worker-<node>-<pid>.prof",
      "",
    ].join("\n"),
  );
  process.exit(0);
}

function positiveInteger(name: string, text: string | undefined, fallback: number, minimum = 1): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < minimum) {
    throw new Error(`--${name} expects an integer >= ${minimum}, received ${JSON.stringify(text)}`);
  }
  return value;
}

function chosenSections(text: string | undefined): ReadonlySet<Section> {
  if (text === undefined) return new Set(SECTIONS);
  const names = text.split(",").map((name) => name.trim());
  for (const name of names) {
    if (!(SECTIONS as readonly string[]).includes(name)) {
      throw new Error(`--only expects some of ${SECTIONS.join(", ")}, received ${JSON.stringify(name)}`);
    }
  }
  return new Set(names as Section[]);
}

const quick = flags.quick;
const settings: OursSettings = {
  buffer: positiveInteger("buffer", flags.buffer, 64, 0),
  calls: positiveInteger("calls", flags.calls, quick ? 500 : 5000),
  warmupCalls: quick ? 100 : 500,
  tasks: positiveInteger("tasks", flags.tasks, quick ? 5000 : 100_000),
  mapRuns: quick ? 1 : 3,
  payloadMib: 64,
  repetitions: quick ? 2 : 5,
  readyNodes: 4,
  readyStarts: quick ? 2 : 5,
  sections: chosenSections(flags.only),
  profileDirectory: flags["profile-worker"] === undefined ? undefined : resolve(flags["profile-worker"]),
};

// ————————————————————————————————————————————————————————————————— helpers' output

const latencySchema = z.object({ p50: z.number(), p99: z.number(), mean: z.number(), calls: z.number() });
const repeatedSchema = z.object({ median: z.number(), runs: z.array(z.number()) });
const baselineSchema = z.object({
  python: z.string(),
  latency_ms: latencySchema,
  messages_per_s: repeatedSchema.extend({ messages: z.number() }),
  mb_per_s: repeatedSchema.extend({ payload_mib: z.number() }),
  ready_ms: repeatedSchema.extend({ nodes: z.number() }),
});
const raySchema = z.object({
  version: z.string(),
  startup_ms: z.number(),
  latency_ms: latencySchema,
  tasks_per_s: z.object({
    overall: z.number(),
    median_batch: z.number(),
    tasks: z.number(),
    in_flight: z.number(),
  }),
});
const daskSchema = z.object({
  version: z.string(),
  startup_ms: z.number(),
  latency_ms: latencySchema,
  tasks_per_s: repeatedSchema.extend({ tasks: z.number() }),
});

type Baseline = z.infer<typeof baselineSchema>;

/** A peer's figures in one shape, or why it did not run. */
interface PeerResult {
  readonly name: string;
  readonly version?: string;
  readonly startupMs?: number;
  readonly latencyMs?: LatencySummary;
  readonly tasksPerSecond?: number;
  readonly how?: string;
  readonly failure?: string;
}

async function measureBaseline(python: string): Promise<Baseline> {
  progress("baseline: a bare asyncio echo server and client (Python) over loopback");
  const output = await runJsonHelper(
    python,
    "baseline_echo.py",
    [
      "--calls",
      String(settings.calls),
      "--messages",
      String(settings.tasks),
      "--runs",
      String(settings.mapRuns),
      "--payload-mib",
      String(settings.payloadMib),
      "--repetitions",
      String(settings.repetitions),
      "--nodes",
      String(settings.readyNodes),
      "--starts",
      String(settings.readyStarts),
    ],
    { timeoutMs: 5 * 60_000 },
  );
  return baselineSchema.parse(output);
}

async function measurePeer(
  basePython: string,
  name: string,
  requirement: string,
  run: (python: string) => Promise<PeerResult>,
): Promise<PeerResult> {
  let python: string;
  try {
    python = await preparePeer(basePython, name.toLowerCase(), requirement);
  } catch (error) {
    return { name, failure: `could not be installed: ${(error as Error).message}` };
  }
  try {
    progress(`peer: ${name}`);
    return await run(python);
  } catch (error) {
    return { name, failure: `could not run here: ${(error as Error).message}` };
  }
}

/** One-at-a-time calls timed per peer: at most 2,000, as Dask's run at several ms each. */
function peerCalls(): number {
  return Math.min(settings.calls, 2000);
}

async function measureRay(python: string): Promise<PeerResult> {
  const calls = String(peerCalls());
  const ray = raySchema.parse(
    await runJsonHelper(
      python,
      "peer_ray.py",
      ["--calls", calls, "--in-flight", "1000", "--batches", quick ? "3" : "10"],
      {
        timeoutMs: 5 * 60_000,
      },
    ),
  );
  return {
    name: "Ray",
    version: ray.version,
    startupMs: ray.startup_ms,
    latencyMs: ray.latency_ms,
    tasksPerSecond: ray.tasks_per_s.overall,
    how: `ray.init(num_cpus=2); latency: ${formatCount(ray.latency_ms.calls)} x ray.get(f.remote()) one at a time; throughput: ${ray.tasks_per_s.tasks / ray.tasks_per_s.in_flight} batches of ray.get([f.remote() x ${ray.tasks_per_s.in_flight}])`,
  };
}

async function measureDask(python: string): Promise<PeerResult> {
  const tasks = quick ? 2000 : 10_000;
  const dask = daskSchema.parse(
    await runJsonHelper(
      python,
      "peer_dask.py",
      ["--calls", String(peerCalls()), "--tasks", String(tasks), "--runs", quick ? "1" : "3"],
      { timeoutMs: 5 * 60_000 },
    ),
  );
  return {
    name: "Dask",
    version: dask.version,
    startupMs: dask.startup_ms,
    latencyMs: dask.latency_ms,
    tasksPerSecond: dask.tasks_per_s.median,
    how: `LocalCluster(n_workers=2, threads_per_worker=1); latency: ${formatCount(dask.latency_ms.calls)} x client.submit(f).result() one at a time; throughput: client.gather(client.map(f, range(${formatCount(tasks)}))), median of runs`,
  };
}

// ————————————————————————————————————————————————————————————————— report

const TARGETS = {
  p50Ms: 0.5,
  tasksPerSecond: 20_000,
  mbPerSecond: 500,
  readyMs: 1000,
} as const;

function verdict(met: boolean): string {
  return met ? "met" : "MISSED";
}

function ratio(ours: number, reference: number): string {
  return Number.isFinite(ours) && Number.isFinite(reference) && reference > 0
    ? (ours / reference).toFixed(2)
    : "n/a";
}

/** One row of the main table: our figure, the baseline's, and the target. */
interface MainRow {
  readonly figure: string;
  readonly ours: number | undefined;
  readonly baseline: number | undefined;
  readonly text: (value: number) => string;
  /** How the baseline's figure reads, when its unit differs (messages rather than tasks). */
  readonly baselineText?: (value: number) => string;
  readonly lowerIsBetter: boolean;
  readonly target: string;
  readonly met?: (value: number) => boolean;
}

function mainTable(ours: OursResult, baseline: Baseline | undefined): string {
  const rate = (unit: string) => (value: number) => `${formatCount(value)} ${unit}`;
  const figures: MainRow[] = [
    {
      figure: "sync latency p50 (no-op)",
      ours: ours.latencyMs?.p50,
      baseline: baseline?.latency_ms.p50,
      text: formatMs,
      lowerIsBetter: true,
      target: "<= 0.5 ms",
      met: (value) => value <= TARGETS.p50Ms,
    },
    {
      figure: "sync latency p99 (no-op)",
      ours: ours.latencyMs?.p99,
      baseline: baseline?.latency_ms.p99,
      text: formatMs,
      lowerIsBetter: true,
      target: "",
    },
    {
      figure: "map throughput (no-op)",
      ours: ours.tasksPerSecond?.median,
      baseline: baseline?.messages_per_s.median,
      text: rate("tasks/s"),
      baselineText: rate("msgs/s"),
      lowerIsBetter: false,
      target: ">= 20,000 tasks/s",
      met: (value) => value >= TARGETS.tasksPerSecond,
    },
    {
      figure: `${settings.payloadMib} MiB Uint8Array echo`,
      ours: ours.mbPerSecond?.median,
      baseline: baseline?.mb_per_s.median,
      text: rate("MB/s"),
      lowerIsBetter: false,
      target: ">= 500 MB/s",
      met: (value) => value >= TARGETS.mbPerSecond,
    },
    {
      figure: `${settings.readyNodes}-node pool ready`,
      ours: ours.readyMs?.median,
      baseline: baseline?.ready_ms.median,
      text: formatSeconds,
      lowerIsBetter: true,
      target: "<= 1 s",
      met: (value) => value <= TARGETS.readyMs,
    },
  ];
  const rows: string[][] = [];
  for (const row of figures) {
    const { ours: value, baseline: reference } = row;
    if (value === undefined) continue;
    rows.push([
      row.figure,
      row.text(value),
      reference === undefined ? "-" : (row.baselineText ?? row.text)(reference),
      reference === undefined ? "-" : ratio(value, reference),
      reference === undefined ? "-" : compare(value, reference, row.lowerIsBetter),
      row.target,
      row.met ? verdict(row.met(value)) : "",
    ]);
  }
  return renderTable(["figure", "ours", "baseline", "ours/baseline", "ours vs baseline", "target", ""], rows);
}

function peerTable(ours: OursResult, peers: readonly PeerResult[]): string {
  const rows: string[][] = [];
  for (const peer of peers) {
    if (peer.failure) continue;
    const label = `${peer.name} ${peer.version ?? ""}`.trim();
    const add = (
      figure: string,
      theirs: number | undefined,
      mine: number | undefined,
      text: (value: number) => string,
      lowerIsBetter: boolean,
    ) => {
      if (theirs === undefined) return;
      rows.push([
        label,
        figure,
        text(theirs),
        mine === undefined ? "-" : text(mine),
        mine === undefined ? "-" : ratio(theirs, mine),
        mine === undefined
          ? "-"
          : compare(theirs, mine, lowerIsBetter)
              .replace("slower", "slower than ours")
              .replace("faster", "faster than ours"),
      ]);
    };
    add("sync latency p50", peer.latencyMs?.p50, ours.latencyMs?.p50, formatMs, true);
    add("sync latency p99", peer.latencyMs?.p99, ours.latencyMs?.p99, formatMs, true);
    add(
      "throughput (no-op)",
      peer.tasksPerSecond,
      ours.tasksPerSecond?.median,
      (v) => `${formatCount(v)} tasks/s`,
      false,
    );
    add(
      `start (vs our ${settings.readyNodes}-node ready)`,
      peer.startupMs,
      ours.readyMs?.median,
      formatSeconds,
      true,
    );
  }
  return renderTable(["peer", "figure", "peer", "ours", "peer/ours", "peer vs ours"], rows);
}

function machineLine(pythonVersion: string): string {
  const model = cpus()[0]?.model ?? "unknown CPU";
  return `${availableParallelism()} cores (${model}), ${Math.round(totalmem() / 1024 ** 3)} GiB, ${process.platform}; node ${process.version}, python ${pythonVersion}`;
}

function loadLine(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
}

function details(ours: OursResult, baseline: Baseline | undefined): string[] {
  const lines: string[] = [];
  const list = (values: readonly number[], text: (value: number) => string) => values.map(text).join(", ");
  if (ours.latencyMs) {
    const { cpu } = ours.latencyMs;
    lines.push(
      `  latency: ${formatCount(ours.latencyMs.calls)} calls after ${settings.warmupCalls} warm-up, mean ${formatMs(ours.latencyMs.mean)}; ` +
        `CPU per call: client ${cpu.clientMicroseconds.toFixed(0)} µs, workers ${cpu.workersMicroseconds === undefined ? "n/a" : `${cpu.workersMicroseconds.toFixed(0)} µs`}`,
    );
  }
  if (ours.tasksPerSecond) {
    lines.push(
      `  map: ${ours.tasksPerSecond.runs.length} runs of ${formatCount(ours.tasksPerSecond.tasks)} tasks: ${list(ours.tasksPerSecond.runs, (v) => `${formatCount(v)}/s`)} (median shown)`,
    );
    const cpu = ours.tasksPerSecond.cpu;
    const micro = (values: readonly (number | undefined)[]) =>
      values.every((value) => value !== undefined)
        ? `${list(values as number[], (v) => v.toFixed(0))} µs`
        : "n/a";
    lines.push(
      `  map CPU per task: client ${micro(cpu.map((run) => run.clientMicroseconds))}, both workers together ${micro(cpu.map((run) => run.workersMicroseconds))} (2 cores = 2,000,000 µs/s)`,
    );
  }
  if (ours.mbPerSecond) {
    lines.push(
      `  bytes: ${ours.mbPerSecond.runs.length} echoes after 1 warm-up: ${list(ours.mbPerSecond.runs, (v) => `${formatCount(v)} MB/s`)} (median shown)`,
    );
  }
  if (ours.readyMs) {
    lines.push(
      `  ready: ${list(ours.readyMs.runs, formatSeconds)} (median shown); close took ${formatSeconds(ours.readyMs.closeMs.median)} (median, not counted)`,
    );
  }
  if (baseline) {
    lines.push(
      `  baseline: latency mean ${formatMs(baseline.latency_ms.mean)}; pipelined ${list(baseline.messages_per_s.runs, (v) => `${formatCount(v)}/s`)}; ` +
        `echo ${list(baseline.mb_per_s.runs, (v) => `${formatCount(v)} MB/s`)}; ready ${list(baseline.ready_ms.runs, formatSeconds)}`,
    );
  }
  return lines;
}

function scheduleTable(defaults: DefaultsResult | undefined, fanout: FanoutResult | undefined): string {
  const rows: string[][] = [];
  const list = (values: readonly number[]) => values.map((value) => `${formatCount(value)}/s`).join(", ");
  if (defaults) {
    rows.push(
      [
        "map throughput, default options",
        `${formatCount(defaults.defaultMedian)}/s`,
        `>= 1/2 of tuned (${formatCount(defaults.tunedMedian / 2)}/s)`,
        defaults.ratio >= 0.5 ? "met" : "MISSED",
      ],
      [`map throughput, buffer ${defaults.buffer} (tuned)`, `${formatCount(defaults.tunedMedian)}/s`, "", ""],
      [
        "default / tuned",
        `${(defaults.ratio * 100).toFixed(1)}%`,
        ">= 50%",
        defaults.ratio >= 0.5 ? "met" : "MISSED",
      ],
    );
  }
  if (fanout) {
    rows.push([
      `fan-out efficiency (${fanout.tasks} x ${fanout.seconds} s over ${fanout.nodes} nodes)`,
      `${(fanout.efficiency * 100).toFixed(2)}%`,
      ">= 99%",
      fanout.efficiency >= 0.99 ? "met" : "MISSED",
    ]);
  }
  const lines = [renderTable(["figure", "ours", "target", ""], rows)];
  if (defaults) {
    lines.push(
      `  map runs of ${formatCount(defaults.tasks)} no-op tasks, alternated: default ${list(defaults.defaultRuns)}; tuned ${list(defaults.tunedRuns)} (medians shown)`,
    );
  }
  if (fanout) {
    lines.push(
      `  fan-out: ideal ${formatSeconds(fanout.idealMs)} (total sleep / nodes), measured ${formatSeconds(fanout.measuredMs)}; tasks per node ${fanout.perNode.join(", ")}; mean task send → result ${formatSeconds(fanout.meanTaskMs)}`,
    );
  }
  return lines.join("\n");
}

// ————————————————————————————————————————————————————————————————— main

const began = performance.now();
const loadAtStart = loadLine();
const python = await hostPython();
const ours = await measureOurs(settings);
const scheduleSettings: ScheduleSettings = {
  buffer: settings.buffer,
  tasks: settings.tasks,
  mapRuns: settings.mapRuns,
  fanoutNodes: quick ? 4 : 8,
  fanoutTasksPerNode: quick ? 3 : 5,
  fanoutSeconds: quick ? 1 : 2,
};
const defaults: DefaultsResult | undefined = settings.sections.has("defaults")
  ? await measureDefaults(scheduleSettings)
  : undefined;
const fanout: FanoutResult | undefined = settings.sections.has("fanout")
  ? await measureFanout(scheduleSettings)
  : undefined;
const recovery: RecoveryResult | undefined = settings.sections.has("recovery")
  ? await measureRecovery(quick ? 2 : 5)
  : undefined;
const collections: CollectionsResult | undefined = settings.sections.has("collections")
  ? await measureCollections(quick)
  : undefined;
let values: ValuesResult | undefined;
let valuesFailure: string | undefined;
if (settings.sections.has("values")) {
  // Arrays need numpy in the worker: Debian's Python has it (SKYWARD_BENCH_VALUES_PYTHON picks another).
  const valuesPython = process.env.SKYWARD_BENCH_VALUES_PYTHON ?? "/usr/bin/python3";
  try {
    values = await measureValues(valuesPython, settings.repetitions);
  } catch (error) {
    valuesFailure = (error as Error).message;
    progress(`the values section failed, going on without it: ${valuesFailure}`);
  }
}
let baseline: Baseline | undefined;
let baselineFailure: string | undefined;
if (settings.sections.has("baseline")) {
  try {
    baseline = await measureBaseline(python.bin);
  } catch (error) {
    baselineFailure = (error as Error).message;
    progress(`the baseline failed, going on without it: ${baselineFailure}`);
  }
}
const peers: PeerResult[] = [];
if (flags.peers) {
  peers.push(await measurePeer(python.bin, "Ray", "ray", measureRay));
  peers.push(await measurePeer(python.bin, "Dask", "dask[distributed]", measureDask));
}

const report = [
  "",
  `Skyward benchmark, ${new Date().toISOString()}`,
  `machine: ${machineLine(python.version)}`,
  `load average (1/5/15 min): ${loadAtStart} at the start, ${loadLine()} at the end (other work on the machine makes figures noisy)`,
  "settings:",
  `  latency, throughput, bytes: a 2-node Local pool, thread executor, concurrency 1, buffer ${settings.buffer} (${2 * (1 + settings.buffer)} slots)`,
  `  ready: sky.compute({ nodes: ${settings.readyNodes} }) from the call to its resolve, concurrency 1, default buffer`,
  "  baseline: Python asyncio.Protocol echo server (own process) and client over loopback, 4-byte length frames;",
  "    latency = 128-byte frames one at a time, throughput = pipelined 128-byte frames, bytes = one frame echoed whole,",
  `    ready = ${settings.readyNodes} echo-server processes started, connected and answering once`,
  `  MB/s counts 2 x ${settings.payloadMib} MiB (argument out, result back) per round trip, MB = 10^6 bytes`,
  "",
  mainTable(ours, baseline),
  ...(baselineFailure ? [`(no baseline: ${baselineFailure})`] : []),
  "",
  "runs:",
  ...details(ours, baseline),
];
if (defaults || fanout)
  report.push("", 'scheduling (default options: worker.buffer "auto"):', scheduleTable(defaults, fanout));
if (recovery) {
  const runs = (values: readonly number[]) => values.map(formatMs).join(", ");
  report.push(
    "",
    `recovery (2-node Local pool, node 1's worker SIGKILLed under a ${recovery.taskSeconds} s task, ${recovery.resultMs.runs.length} runs):`,
    `  kill -> the interrupted task's result (run again on node 0, its ${recovery.taskSeconds} s included): median ${formatMs(recovery.resultMs.median)} (${runs(recovery.resultMs.runs)})`,
    `  kill -> pool back to 2 nodes (node 1 replaced and ready): median ${formatMs(recovery.poolMs.median)} (${runs(recovery.poolMs.runs)})`,
  );
}
if (collections) {
  report.push(
    "",
    `distributed collections (ops/s inside tasks, ${formatCount(collections.opsPerTask)} operations per task; a 2-node Local pool, thread executor):`,
    renderTable(
      ["operation", "consistency", "nodes at once", "ops/s (sum)", "runs"],
      collections.figures.map((figure) => [
        figure.operation,
        figure.consistency,
        String(figure.nodes),
        formatCount(figure.opsPerSecond),
        figure.runs.map((run) => formatCount(run)).join(", "),
      ]),
    ),
    ...(
      [
        ["2 nodes", collections.clientOnTwoNodes],
        ["1 node", collections.clientOnOneNode],
      ] as const
    ).flatMap(([where, client]) => [
      `  client (${where}): pool.counter(…).increment() one at a time, ${formatCount(client.incrementsPerSecond)}/s, client CPU ${client.clientCpuMicroseconds.toFixed(1)} µs each`,
      `  client (${where}): 10,000 pool.counter(…).increment() at once (Promise.all), ${formatCount(client.concurrentIncrementsPerSecond)}/s, client CPU ${client.concurrentClientCpuMicroseconds.toFixed(1)} µs each`,
    ]),
  );
}
if (values) report.push("", ...valuesReport(values));
if (valuesFailure) report.push("", `(no values figures: ${valuesFailure})`);
if (flags.peers) {
  report.push("", "peers (same machine, same no-op; peer/ours > 1 means the peer's figure is larger):");
  if (peers.some((peer) => !peer.failure)) report.push(peerTable(ours, peers));
  for (const peer of peers) {
    if (peer.failure) report.push(`  ${peer.name}: ${peer.failure}`);
    else report.push(`  ${peer.name}: ${peer.how}`);
  }
}
report.push("", `total time ${formatSeconds(performance.now() - began)}`, "");
process.stdout.write(report.join("\n"));

if (flags.json) {
  const everything = {
    date: new Date().toISOString(),
    machine: {
      cores: availableParallelism(),
      cpu: cpus()[0]?.model,
      memoryGiB: totalmem() / 1024 ** 3,
      node: process.version,
      python: python.version,
      loadAverage: { start: loadAtStart, end: loadLine() },
    },
    settings: { ...settings, sections: [...settings.sections] },
    ours,
    baseline,
    recovery,
    peers,
    defaults,
    fanout,
    collections,
    values,
  };
  await writeFile(flags.json, `${JSON.stringify(everything, null, 2)}\n`);
  progress(`wrote ${flags.json}`);
}
