/**
 * `pnpm --filter @skyward/dashboard bench`: what the dashboard costs the client. A 16-node Local pool
 * samples the default metrics every second, once without the dashboard and once with it served and its
 * page open in Debian's headless Chromium (the browser is its own process: its CPU is not the
 * client's). For each, the client's CPU in percent of one core, and its heap and RSS at the end of the
 * first minute and at the end, to see that memory stays flat. Target: ≤ 2 % of a core over the pool
 * without it. Runs on the built libraries (`pnpm bench` builds them). Figures are printed, never asserted.
 *
 *     node bench/dashboard.ts [--seconds 600] [--nodes 16] [--json out.json]
 *
 * `SKYWARD_BENCH_DASHBOARD_SECONDS` shortens (or lengthens) the measured time when `--seconds` is not given.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as sky from "@skyward/core";
import { CHROMIUM, chromiumMissing, launchChromium } from "../test/chromium.ts";

const { values: flags } = parseArgs({
  options: {
    seconds: { type: "string", default: process.env.SKYWARD_BENCH_DASHBOARD_SECONDS ?? "600" },
    nodes: { type: "string", default: "16" },
    json: { type: "string" },
  },
  strict: true,
});
const seconds = Number(flags.seconds);
const nodes = Number(flags.nodes);
if (!(seconds >= 10)) throw new Error(`--seconds expects a number >= 10, received ${flags.seconds}`);
if (!Number.isInteger(nodes) || nodes < 1)
  throw new Error(`--nodes expects a whole number >= 1, received ${flags.nodes}`);

const WARMUP_MS = 10_000;
const SNAPSHOT_MS = Math.min(60_000, (seconds * 1000) / 2);

interface Run {
  readonly label: string;
  readonly cpuPercent: number;
  readonly heapEarlyMiB: number;
  readonly heapEndMiB: number;
  readonly rssEarlyMiB: number;
  readonly rssEndMiB: number;
  readonly metricEvents: number;
}

const mebibytes = (bytes: number) => bytes / 1024 / 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Heap after a collection when `--expose-gc` allows one, else as it is. */
function heapUsed(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed;
}

async function measure(withDashboard: boolean): Promise<Run> {
  const announced: string[] = [];
  let metricEvents = 0;
  const pool = await sky.compute(
    {
      nodes,
      image: { metrics: sky.metrics.Default({ interval: 1 }) },
      options: { console: false, logging: false, ...(withDashboard ? { dashboard: true } : {}) },
    },
    {
      onEvent: (event) => {
        if (event.type === "dashboard.ready") announced.push(event.url);
      },
    },
  );
  const stopCounting = pool.on("metric", () => {
    metricEvents += 1;
  });
  const profile = mkdtempSync(join(tmpdir(), "skyward-dashboard-bench-"));
  const browser =
    withDashboard && chromiumMissing() === undefined ? await launchChromium(profile) : undefined;
  try {
    if (browser) await (await browser.newPage()).goto(announced[0] as string);
    else if (withDashboard)
      process.stderr.write(`${CHROMIUM} is missing: the dashboard is served but no page is open\n`);
    await sleep(WARMUP_MS);
    const cpuStart = process.cpuUsage();
    const wallStart = performance.now();
    await sleep(SNAPSHOT_MS);
    const heapEarly = heapUsed();
    const rssEarly = process.memoryUsage().rss;
    await sleep(seconds * 1000 - SNAPSHOT_MS);
    const cpu = process.cpuUsage(cpuStart);
    const wall = performance.now() - wallStart;
    return {
      label: withDashboard ? (browser ? "dashboard served, page open" : "dashboard served") : "no dashboard",
      cpuPercent: ((cpu.user + cpu.system) / 1000 / wall) * 100,
      heapEarlyMiB: mebibytes(heapEarly),
      heapEndMiB: mebibytes(heapUsed()),
      rssEarlyMiB: mebibytes(rssEarly),
      rssEndMiB: mebibytes(process.memoryUsage().rss),
      metricEvents,
    };
  } finally {
    stopCounting();
    await browser?.close();
    await pool.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

const without = await measure(false);
const withIt = await measure(true);
const rows = [without, withIt].map((run) => [
  run.label,
  `${run.cpuPercent.toFixed(2)} %`,
  `${run.heapEarlyMiB.toFixed(1)} → ${run.heapEndMiB.toFixed(1)} MiB`,
  `${run.rssEarlyMiB.toFixed(0)} → ${run.rssEndMiB.toFixed(0)} MiB`,
  String(run.metricEvents),
]);
const header = ["client", "CPU (one core)", `heap (${SNAPSHOT_MS / 1000} s → end)`, "RSS", "metric events"];
const widths = header.map((title, column) =>
  Math.max(title.length, ...rows.map((row) => (row[column] as string).length)),
);
const line = (cells: readonly string[]) =>
  cells.map((cell, column) => cell.padEnd(widths[column] as number)).join("  ");
const over = withIt.cpuPercent - without.cpuPercent;
process.stdout.write(
  [
    `dashboard bench: ${nodes} Local nodes, metrics.Default() every second, ${seconds} s measured after ${WARMUP_MS / 1000} s`,
    line(header),
    ...rows.map(line),
    `the dashboard's cost: ${over.toFixed(2)} % of one core (target ≤ 2 %: ${over <= 2 ? "met" : "MISSED"})`,
    "",
  ].join("\n"),
);
if (flags.json)
  await writeFile(flags.json, `${JSON.stringify({ nodes, seconds, without, with: withIt }, null, 2)}\n`);
