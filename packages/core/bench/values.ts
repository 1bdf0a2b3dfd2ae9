/**
 * Values across the boundary (`--only values`): a 64 MiB float32 array echoed as a raw buffer
 * (`$a`), next to the same bytes as a `Uint8Array` in the same run (the target: ≥ 0.9× of it) and
 * the JSON-list path a numpy array took before; and a 1,000,000-row Arrow table echoed (it arrives
 * in Python as a DataFrame and comes back as one). On a 1-node Local pool (pyarrow and pandas
 * installed into its environment).
 */
import { randomFillSync } from "node:crypto";
import { join } from "node:path";
import * as sky from "../dist/index.js";
import { benchDirectory } from "./python.ts";
import { MIB, median, progress } from "./stats.ts";

/** A figure measured several times: the median and every run. */
export interface RepeatedFigure {
  readonly median: number;
  readonly runs: readonly number[];
}

/** The values section's figures; `skipped` says why a part did not run. */
export interface ValuesResult {
  readonly python: string;
  readonly payloadMib: number;
  /** MB/s, counting the payload both ways, of the bytes echo and of the array echo (same pool). */
  readonly bytesMbPerSecond?: RepeatedFigure;
  readonly arrayMbPerSecond?: RepeatedFigure;
  /** The array's figure over the bytes' (target ≥ 0.9). */
  readonly arrayOverBytes?: number;
  /** The JSON-list path: a `number[]` of `jsonListMib` MiB of float32 values, MB/s of that size. */
  readonly jsonListMib: number;
  readonly jsonListMbPerSecond?: RepeatedFigure;
  /** Rows per second of a 1,000,000-row table echoed (two columns: int64 and float64). */
  readonly tableRows: number;
  readonly tableMs?: RepeatedFigure;
  readonly skipped: readonly string[];
}

const echo = sky.python<[unknown], unknown>("bench_tasks:echo");

/** Runs the values section on `python` (a Python with numpy; pyarrow for the table). */
export async function measureValues(python: string, repetitions: number): Promise<ValuesResult> {
  const payloadMib = 64;
  const jsonListMib = 4;
  const tableRows = 1_000_000;
  const skipped: string[] = [];
  progress(`values: a 1-node local pool on ${python}`);
  const pool = await sky.compute({
    nodes: 1,
    // pyarrow (and pandas) for the table; numpy comes with them where the Python has none.
    image: { python, pip: ["pyarrow", "pandas"], includes: [join(benchDirectory, "bench_tasks.py")] },
    options: { console: false, worker: { concurrency: 1 } },
  });
  try {
    const bytes = new Uint8Array(payloadMib * MIB);
    for (let offset = 0; offset < bytes.length; offset += 65_536) randomFillSync(bytes, offset, 65_536);
    const floats = new Float32Array(bytes.buffer.slice(0));
    for (let index = 0; index < floats.length; index++)
      if (!Number.isFinite(floats[index]!)) floats[index] = index;
    const array = new sky.NDArray(floats, [floats.length / 1024, 1024]);
    const rate = (moved: number, ms: number) => moved / (ms / 1000) / 1e6;
    const timed = async (value: unknown, check: (result: unknown) => void): Promise<number> => {
      const started = performance.now();
      const result = await pool.run(echo(value));
      const elapsed = performance.now() - started;
      check(result);
      return elapsed;
    };
    const checkBytes = (result: unknown) => {
      const echoed = result as Uint8Array;
      if (echoed.length !== bytes.length || echoed[17] !== bytes[17])
        throw new Error("the echoed bytes differ");
    };
    const checkArray = (result: unknown) => {
      const echoed = result as sky.NDArray<"float32">;
      if (
        !(echoed instanceof sky.NDArray) ||
        echoed.dtype !== "float32" ||
        echoed.shape[0] !== array.shape[0]
      ) {
        throw new Error("the echoed array is not a float32 NDArray of the same shape");
      }
      if (echoed.data[12_345] !== floats[12_345]) throw new Error("the echoed array differs");
    };
    // Interleaved, after one warm-up each, so both see the same machine.
    await timed(bytes, checkBytes);
    await timed(array, checkArray);
    const bytesRuns: number[] = [];
    const arrayRuns: number[] = [];
    progress(`values: ${payloadMib} MiB as bytes and as a float32 array, ${repetitions} each`);
    for (let run = 0; run < repetitions; run++) {
      bytesRuns.push(rate(2 * bytes.length, await timed(bytes, checkBytes)));
      arrayRuns.push(rate(2 * bytes.length, await timed(array, checkArray)));
    }
    const list = Array.from(floats.subarray(0, (jsonListMib * MIB) / 4));
    const listRuns: number[] = [];
    progress(`values: a ${jsonListMib} MiB float32 array as a JSON list, ${repetitions}`);
    for (let run = 0; run < repetitions; run++) {
      listRuns.push(
        rate(
          2 * list.length * 4,
          await timed(list, (result) => {
            if ((result as number[]).length !== list.length) throw new Error("the echoed list differs");
          }),
        ),
      );
    }
    let tableMs: RepeatedFigure | undefined;
    try {
      const arrow = (await import("apache-arrow")) as unknown as {
        tableFromArrays(columns: Record<string, unknown>): { numRows: number };
      };
      const ids = new BigInt64Array(tableRows);
      const scores = new Float64Array(tableRows);
      for (let row = 0; row < tableRows; row++) {
        ids[row] = BigInt(row);
        scores[row] = row / 7;
      }
      const table = sky.asArrowTable(arrow.tableFromArrays({ id: ids, score: scores }));
      const check = (result: unknown) => {
        if ((result as { numRows: number }).numRows !== tableRows)
          throw new Error("the echoed table differs");
      };
      await timed(table, check);
      const runs: number[] = [];
      progress(`values: a ${tableRows}-row table, ${repetitions}`);
      for (let run = 0; run < repetitions; run++) runs.push(await timed(table, check));
      tableMs = { median: median(runs), runs };
    } catch (error) {
      skipped.push(`table: ${(error as Error).message.split("\n")[0]}`);
    }
    const bytesFigure = { median: median(bytesRuns), runs: bytesRuns };
    const arrayFigure = { median: median(arrayRuns), runs: arrayRuns };
    return {
      python,
      payloadMib,
      bytesMbPerSecond: bytesFigure,
      arrayMbPerSecond: arrayFigure,
      arrayOverBytes: arrayFigure.median / bytesFigure.median,
      jsonListMib,
      jsonListMbPerSecond: { median: median(listRuns), runs: listRuns },
      tableRows,
      ...(tableMs ? { tableMs } : {}),
      skipped,
    };
  } finally {
    await pool.close();
  }
}

/** The section's lines for the report. */
export function valuesReport(result: ValuesResult): string[] {
  const f = (figure: RepeatedFigure | undefined) =>
    figure
      ? `${figure.median.toFixed(0)} MB/s (runs ${figure.runs.map((run) => run.toFixed(0)).join(", ")})`
      : "-";
  const ratio = result.arrayOverBytes;
  return [
    `values (1-node Local pool on ${result.python}; MB/s counts the payload both ways):`,
    `  ${result.payloadMib} MiB Uint8Array echo:         ${f(result.bytesMbPerSecond)}`,
    `  ${result.payloadMib} MiB float32 NDArray echo:    ${f(result.arrayMbPerSecond)}`,
    `  array / bytes: ${ratio === undefined ? "-" : ratio.toFixed(2)} (target >= 0.90: ${ratio === undefined ? "-" : ratio >= 0.9 ? "met" : "MISSED"})`,
    `  ${result.jsonListMib} MiB float32 as a JSON list:    ${f(result.jsonListMbPerSecond)}`,
    result.tableMs
      ? `  ${result.tableRows}-row Arrow table echo:    ${result.tableMs.median.toFixed(0)} ms (runs ${result.tableMs.runs.map((run) => run.toFixed(0)).join(", ")})`
      : `  ${result.tableRows}-row Arrow table echo:    not run`,
    ...result.skipped.map((reason) => `  (${reason})`),
  ];
}
