/**
 * `pnpm --filter @skyward/core bench:metrics`: what the default metrics set (`metrics.Default()`: CPU,
 * memory, GPU and GPU memory, every second) costs a worker, in percent of one core. The target: at most
 * 1 %. Runs on the built library (`../dist`) for the collectors' descriptors and on the Python runtime
 * in `../python`. Figures are printed, never asserted.
 *
 *     node bench/metrics.ts [--seconds 30] [--json out.json]
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { metrics } from "../dist/index.js";
import { benchDirectory, hostPython, runJsonHelper } from "./python.ts";
import { renderTable } from "./stats.ts";

const { values: flags } = parseArgs({
  options: { seconds: { type: "string", default: "30" }, json: { type: "string" } },
  strict: true,
});
const seconds = Number(flags.seconds);
if (!(seconds > 0)) throw new Error(`--seconds expects a positive number, received ${flags.seconds}`);

interface Measured {
  readonly cpu_percent: number;
  readonly cpu_seconds: number;
  readonly wall_seconds: number;
  readonly samples: number;
}

const python = await hostPython();
const fakeBin = join(benchDirectory, "..", "test", "fixtures", "bin");
const result = (await runJsonHelper(
  python.bin,
  "metrics_cost.py",
  [JSON.stringify(metrics.Default()), String(seconds), fakeBin],
  { timeoutMs: (seconds * 3 + 120) * 1000 },
)) as Record<"idle" | "collectors" | "collectors_with_gpus", Measured>;

const idle = result.idle.cpu_percent;
const row = (label: string, measured: Measured) => [
  label,
  `${measured.cpu_percent.toFixed(3)} %`,
  `${(measured.cpu_percent - idle).toFixed(3)} %`,
  String(measured.samples),
  measured.cpu_percent - idle <= 1 ? "≤ 1 %: met" : "≤ 1 %: MISSED",
];
process.stdout.write(
  `${renderTable(
    ["worker", "CPU (one core)", "over idle", "samples", "target"],
    [
      ["idle, no collectors", `${idle.toFixed(3)} %`, "-", String(result.idle.samples), ""],
      row("Default(), no nvidia-smi", result.collectors),
      row("Default(), 2 GPUs (fake nvidia-smi)", result.collectors_with_gpus),
    ],
  )}\n`,
);
if (flags.json) await writeFile(flags.json, `${JSON.stringify(result, null, 2)}\n`);
