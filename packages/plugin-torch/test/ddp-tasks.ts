/**
 * What the torch plugin's end-to-end suites share: Debian's interpreter (python3-torch is installed
 * for it, and the workers' venv sees it), the tasks of `fixtures/ddp_tasks.py`, why the suites cannot
 * run here, and how their gradients are compared.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireSystemPython, requireTestbed } from "@skyward/testing";
import { expect } from "vitest";

export const SYSTEM_PYTHON = "/usr/bin/python3";
export const tasks = fileURLToPath(new URL("./fixtures/ddp_tasks.py", import.meta.url));

export interface GroupInfo {
  initialized: boolean;
  rank: number;
  world_size: number;
  backend: string;
  env: Record<string, string | null>;
  gloo_interface: string | null;
  pid: number;
  placement: { node: number; worker: number; global_worker_index: number; total_workers: number };
}
export interface Gradients {
  rank: number;
  weights: number[][];
  ddp: number[][];
  local: number[][];
}

export const groupInfo = sky.python<[], GroupInfo>("ddp_tasks:group_info");
export const allReduceSum = sky.python<[number], { rank: number; sum: number }>("ddp_tasks:all_reduce_sum");
export const ddpGradients = sky.python<[], Gradients>("ddp_tasks:ddp_gradients");

/**
 * Why a suite cannot run here: no torch for /usr/bin/python3 (`torchMissing`), or that, or no test bed
 * (`testbedMissing`); undefined when it can. Under CI, throws instead.
 */
export async function torchSkipReasons(purpose: string) {
  const torchMissing = await requireSystemPython("torch.distributed", {
    python: SYSTEM_PYTHON,
    install: "python3-torch",
    purpose,
  });
  return { torchMissing, testbedMissing: torchMissing ?? (await requireTestbed()) };
}

/** `actual` equals `expected`, element by element, to 10 decimal places. */
export function close(actual: readonly number[][], expected: readonly number[][]): void {
  expect(actual.length).toBe(expected.length);
  for (const [i, row] of actual.entries()) {
    const other = expected[i] as number[];
    expect(row.length).toBe(other.length);
    for (const [j, value] of row.entries()) expect(value).toBeCloseTo(other[j] as number, 10);
  }
}
