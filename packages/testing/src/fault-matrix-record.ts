/**
 * Where each run of the fault matrix leaves its result, so that CI prints one line for every provider
 * together (`scripts/fault-matrix-summary.mjs`): a JSON file per matrix in the directory named by
 * `SKYWARD_FAULT_MATRIX_RESULTS` (set by `scripts/test.sh`). Without the variable nothing is written:
 * a matrix run by hand prints its own line only.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** The result of one provider's matrix, as its last test saw it. */
export interface FaultMatrixRun {
  /** The provider, as the matrix names it (`"tensordock"`). */
  readonly name: string;
  /** Cells that ran and passed. */
  readonly cells: number;
  /** Cells that apply to the provider (every one of them should have passed). */
  readonly applicable: number;
  /** Cells declared not applicable, each with its reason. */
  readonly notApplicable: number;
  /** Instances still billing after the matrix. */
  readonly leftBilling: number;
  /** Instances created above the cap. */
  readonly capExceeded: number;
}

/** Writes `run` to `$SKYWARD_FAULT_MATRIX_RESULTS/<name>.json` when the variable is set. */
export async function recordFaultMatrixRun(run: FaultMatrixRun): Promise<void> {
  const directory = process.env.SKYWARD_FAULT_MATRIX_RESULTS;
  if (!directory) return;
  await mkdir(directory, { recursive: true });
  const file = `${run.name.replace(/[^A-Za-z0-9_-]/g, "_")}.json`;
  await writeFile(join(directory, file), `${JSON.stringify(run)}\n`);
}
