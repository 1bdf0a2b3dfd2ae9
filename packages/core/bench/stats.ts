/**
 * Summaries and formatting for the benchmark: percentiles of latency samples, medians of repeated
 * runs, the fixed-width table `pnpm bench` prints, and its progress lines.
 */

/** A progress line on stderr, so stdout holds only the report. */
export function progress(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** The nearest-rank percentile `p` (0–100) of `samples` (any order). */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Latency summary of one-at-a-time round trips, in milliseconds. */
export interface LatencySummary {
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly calls: number;
}

/** Summarises round-trip samples given in milliseconds. */
export function summariseLatency(samplesMs: readonly number[]): LatencySummary {
  const mean = samplesMs.reduce((sum, value) => sum + value, 0) / samplesMs.length;
  return { p50: percentile(samplesMs, 50), p99: percentile(samplesMs, 99), mean, calls: samplesMs.length };
}

/** Bytes in a MiB: the 64 MiB payload is 64 of these. */
export const MIB = 1024 * 1024;

/** `1234567.8` → `"1,234,568"`. */
export function formatCount(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

/** Milliseconds with sensible precision: `0.0613 ms`, `1.27 ms`, `250 ms`. */
export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  if (value < 1) return `${value.toFixed(3)} ms`;
  if (value < 10) return `${value.toFixed(2)} ms`;
  return `${value.toFixed(0)} ms`;
}

/** Seconds for durations around a second: `0.842 s`. */
export function formatSeconds(valueMs: number): string {
  if (!Number.isFinite(valueMs)) return "n/a";
  return `${(valueMs / 1000).toFixed(3)} s`;
}

/**
 * How `ours` compares with `reference`, in words that do not depend on whether more is better:
 * for a latency (`lowerIsBetter`) 0.2 ms against 0.05 ms is "4.0× slower"; for a rate 5,000/s
 * against 20,000/s is "4.0× slower" too.
 */
export function compare(ours: number, reference: number, lowerIsBetter: boolean): string {
  if (!Number.isFinite(ours) || !Number.isFinite(reference) || ours <= 0 || reference <= 0) return "n/a";
  const factor = lowerIsBetter ? ours / reference : reference / ours;
  if (factor >= 1) return `${factor.toFixed(factor < 10 ? 2 : 1)}× slower`;
  return `${(1 / factor).toFixed(1 / factor < 10 ? 2 : 1)}× faster`;
}

/** Prints rows as a left-aligned table with a header and a rule under it. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((cell, column) =>
    Math.max(cell.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((width) => "-".repeat(width)).join("  "), ...rows.map(line)].join("\n");
}
