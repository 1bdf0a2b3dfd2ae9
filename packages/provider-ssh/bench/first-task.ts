/**
 * Time to the first task on fresh machines: `sky.compute()` on 3 fresh test-bed hosts (real sshd in
 * network namespaces) whose image installs a few packages from a local package index, until the first
 * result of a task that imports them — cold (fresh hosts), warm (a second pool on the same hosts,
 * after the first one's workers have self-destructed) and with a changed package list — next to a
 * baseline measured in the same run on a fresh host of the same test bed: plain `ssh host` running
 * `python3 -m venv` and `pip install` of the same packages.
 *
 *     pnpm --filter @skyward/provider-ssh bench [--runs 3] [--json out.json]
 *
 * Runs on the built packages (`pnpm bench` at the root builds them first). Needs root (the test bed);
 * without it the bench says why and exits 0. Figures are printed, never asserted.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import * as sky from "@skyward/core";
import {
  createTestbed,
  requireTestbed,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { SSH } from "../dist/index.js";
import { fetchWheels, serveWheelIndex, WHEEL_CACHE } from "../test/fixtures/wheel-index.ts";

const run = promisify(execFile);
const { values: flags } = parseArgs({
  options: { runs: { type: "string", default: "3" }, json: { type: "string" } },
  strict: true,
});
const runs = Number(flags.runs);
if (!Number.isInteger(runs) || runs < 1)
  throw new Error(`--runs expects an integer >= 1, received ${flags.runs}`);

const PACKAGES = ["tabulate", "humanize", "toolz", "cachetools"] as const;
const TARGET_COLD_RATIO = 0.5;
const TARGET_WARM_MS = 1000;
const hello = sky.python<[string[]], string[]>("first_task:hello");
const taskFile = fileURLToPath(new URL("./first_task.py", import.meta.url));

function say(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Plain `ssh host` running `python3 -m venv` and `pip install`, the way one would by hand (fresh pip cache). */
async function baseline(
  bed: Testbed,
  hostIndex: number,
  index: { url: string; host: string },
): Promise<number> {
  const host = bed.hosts[hostIndex] as Testbed["hosts"][number];
  const dir = `${host.root}-baseline`;
  const remote = [
    `rm -rf ${dir}`,
    `python3 -m venv ${dir}/venv`,
    `PIP_CACHE_DIR=${dir}/pip-cache ${dir}/venv/bin/pip install --disable-pip-version-check --quiet --index-url ${index.url} --trusted-host ${index.host} ${PACKAGES.join(" ")}`,
    `${dir}/venv/bin/python -c 'import ${PACKAGES.join(", ")}'`,
  ].join(" && ");
  const started = performance.now();
  await run("ssh", [
    "-i",
    host.identityFile,
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    `root@${host.host}`,
    remote,
  ]);
  const elapsed = performance.now() - started;
  await bed.exec(hostIndex, ["rm", "-rf", dir]);
  return elapsed;
}

/** From `sky.compute()` to the first result on every host of the bed, with the phases each node ran. */
async function firstTask(
  bed: Testbed,
  env: Readonly<Record<string, string>>,
  packages: readonly string[],
): Promise<{ ms: number; readyMs: number; phases: string[]; slowest: Record<string, number> }> {
  const phases = new Set<string>();
  const slowest: Record<string, number> = {};
  const started = performance.now();
  const pool = await sky.compute(
    {
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: bed.hosts.length,
      ttl: 0,
      image: { pip: [...packages], env, includes: [taskFile] },
      options: { console: false, bootstrapTimeout: 300 },
    },
    {
      onEvent: (event) => {
        if (event.type !== "bootstrap.phase") return;
        if (event.status === "started") phases.add(event.phase);
        if (event.status === "finished" && event.durationMs !== undefined)
          slowest[event.phase] = Math.max(slowest[event.phase] ?? 0, Math.round(event.durationMs));
      },
    },
  );
  const readyMs = performance.now() - started;
  try {
    const result = await pool.run(hello([...packages]));
    const ms = performance.now() - started;
    if (result.length !== packages.length) throw new Error(`unexpected result ${JSON.stringify(result)}`);
    return { ms, readyMs, phases: [...phases], slowest };
  } finally {
    await pool.close();
    // ttl 0: each worker self-destructs (its files go, its environment stays); wait until it has.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && bed.hosts.some((host) => existsSync(`${host.root}/worker.pid`))) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Waits until every host has fetched uv for later pools (started in the background by the cold bootstrap). */
async function waitForUv(bed: Testbed): Promise<boolean> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (bed.hosts.every((host) => existsSync(`${host.root}/tools/uv/bin/uv`))) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return false;
}

const skip = await requireTestbed();
if (skip !== undefined) {
  say(`time to first task: skipped (${skip})`);
  process.exit(0);
}
const home = await useScratchSkywardHome("skyward-bench-first-task-");
say(`wheels: ${PACKAGES.join(", ")} and uv, from PyPI into ${WHEEL_CACHE} (once)`);
fetchWheels(WHEEL_CACHE, [...PACKAGES, "uv"]);

type Measured = Awaited<ReturnType<typeof firstTask>>;
interface Row {
  baselineMs: number;
  cold: Measured;
  warm: Measured;
  changed: Measured;
  uvFetched: boolean;
}
const rows: Row[] = [];
const load = loadavg()[0] ?? 0;
for (let i = 0; i < runs; i += 1) {
  await using bed = await createTestbed({ hosts: 4 });
  // Hosts 0–1–… are the pool's; the last one is the baseline's, fresh too.
  const poolBed: Testbed = { ...bed, hosts: bed.hosts.slice(0, 3) };
  const index = await serveWheelIndex(bed.bridgeAddress, [WHEEL_CACHE]);
  try {
    say(`run ${i + 1}/${runs}: baseline (ssh + python3 -m venv + pip install on one fresh host)`);
    const baselineMs = await baseline(bed, 3, index);
    say(`run ${i + 1}/${runs}: cold pool on 3 fresh hosts`);
    const cold = await firstTask(poolBed, index.env, PACKAGES);
    say(`run ${i + 1}/${runs}: warm pool on the same hosts`);
    const warm = await firstTask(poolBed, index.env, PACKAGES);
    const uvFetched = await waitForUv(poolBed);
    say(`run ${i + 1}/${runs}: a changed package list (uv ${uvFetched ? "fetched" : "not fetched"})`);
    const changed = await firstTask(poolBed, index.env, PACKAGES.slice(0, 3));
    rows.push({
      baselineMs,
      cold,
      warm,
      changed,
      uvFetched,
    });
  } finally {
    await index.close();
  }
}
await home.restore();

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const baselineMedian = median(rows.map((row) => row.baselineMs));
const coldMedian = median(rows.map((row) => row.cold.ms));
const warmMedian = median(rows.map((row) => row.warm.ms));
const changedMedian = median(rows.map((row) => row.changed.ms));
const lines = [
  `time to first task, 3 test-bed hosts, ${PACKAGES.length} packages from a local index; ${runs} runs, median (load average ${load.toFixed(2)} at the start)`,
  "",
  "| figure | time | vs baseline | target |",
  "| --- | --- | --- | --- |",
  `| baseline: ssh + python3 -m venv + pip install, 1 host | ${s(baselineMedian)} | 1.00× | |`,
  `| cold: compute() → first result, 3 fresh hosts | ${s(coldMedian)} | ${(coldMedian / baselineMedian).toFixed(2)}× | ≤ ${TARGET_COLD_RATIO}×: ${coldMedian <= TARGET_COLD_RATIO * baselineMedian ? "met" : "not met"} |`,
  `| warm: same image, same hosts | ${s(warmMedian)} | ${(warmMedian / baselineMedian).toFixed(2)}× | ≤ 1 s: ${warmMedian <= TARGET_WARM_MS ? "met" : "not met"} |`,
  `| changed package list, same hosts | ${s(changedMedian)} | ${(changedMedian / baselineMedian).toFixed(2)}× | |`,
  "",
  `runs: baseline ${rows.map((row) => s(row.baselineMs)).join(", ")}; cold ${rows.map((row) => s(row.cold.ms)).join(", ")}; warm ${rows.map((row) => s(row.warm.ms)).join(", ")}; changed ${rows.map((row) => s(row.changed.ms)).join(", ")}`,
  `ready (compute() resolved): cold ${rows.map((row) => s(row.cold.readyMs)).join(", ")}; warm ${rows.map((row) => s(row.warm.readyMs)).join(", ")}; changed ${rows.map((row) => s(row.changed.readyMs)).join(", ")}`,
  ...(["cold", "warm", "changed"] as const).map(
    (kind) =>
      `${kind}, slowest node per phase (run 1): ${Object.entries(rows[0]?.[kind].slowest ?? {})
        .map(([phase, ms]) => `${phase} ${ms} ms`)
        .join(", ")}`,
  ),
  `uv fetched in the background for later pools: ${rows.map((row) => row.uvFetched).join(", ")}`,
];
process.stdout.write(`${lines.join("\n")}\n`);
if (flags.json) await writeFile(flags.json, JSON.stringify({ load, rows }, null, 2));
