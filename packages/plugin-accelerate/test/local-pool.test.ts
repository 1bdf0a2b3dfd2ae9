/**
 * The accelerate plugin on a Local pool, end to end: the real accelerate (< 0.32, the newest that
 * runs on Debian's torch 1.13) from PyPI in the pool's virtual environment over `/usr/bin/python3`
 * (whose system site-packages hold `python3-torch`), the config file written by the plugin's
 * bootstrap op (which the Local provider runs), and two nodes whose workers run under `accelerate
 * launch` and form one process group.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requirePrerequisite } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { accelerate } from "../src/index.js";

/** Why this test cannot run here, or undefined. Under CI a missing prerequisite fails instead. */
async function missingPrerequisite(): Promise<string | undefined> {
  let reason: string | undefined;
  try {
    execFileSync("/usr/bin/python3", ["-c", "import torch"], { stdio: "pipe" });
  } catch {
    reason = "no PyTorch for /usr/bin/python3 (apt-get install python3-torch)";
  }
  if (reason === undefined) {
    const index = process.env.PIP_INDEX_URL ?? "https://pypi.org/simple/";
    try {
      const response = await fetch(new URL("accelerate/", index.endsWith("/") ? index : `${index}/`), {
        signal: AbortSignal.timeout(15_000),
      });
      if (!response.ok) reason = `the package index ${index} answered ${response.status}`;
    } catch (error) {
      reason = `the package index ${index} is not reachable: ${(error as Error).message}`;
    }
  }
  return requirePrerequisite(reason, "the accelerate Local pool test's prerequisites");
}

const missing = await missingPrerequisite();
if (missing) console.warn(`accelerate Local pool test skipped: ${missing}`);

const tasks = fileURLToPath(new URL("./fixtures/local_pool_tasks.py", import.meta.url));
const acceleratorState = sky.python<
  [],
  {
    num_processes: number;
    process_index: number;
    distributed_type: string;
    mixed_precision: string | null;
    parent: string;
  }
>("local_pool_tasks:accelerate_state");

describe.skipIf(missing !== undefined)("accelerate() on a Local pool", () => {
  it("runs each node's worker under accelerate launch, the nodes forming one process group", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image: { python: "/usr/bin/python3", pip: ["accelerate<0.32"], includes: [tasks] },
      plugins: [accelerate({ mixed_precision: "bf16" })],
      options: { console: false },
    });
    const states = await pool.broadcast(acceleratorState());
    expect(states.map((state) => state.process_index)).toEqual([0, 1]);
    for (const state of states) {
      expect(state).toMatchObject({
        num_processes: 2,
        distributed_type: "DistributedType.MULTI_CPU",
        mixed_precision: "bf16",
      });
      // The worker's parent is accelerate's launcher, given the config file the bootstrap op wrote.
      expect(state.parent).toMatch(
        /-m accelerate\.commands\.launch --config_file \S+\/skyward-pool-[^/ ]+\/accelerate\.json /,
      );
    }
  });
});
