/**
 * The plugin passes Skyward's plugin conformance suite (from `@skyward/testing`) and works on a real
 * pool: the env, the bootstrap op's file and PyTorch's thread setting all reach the tasks.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { runPluginConformance } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { threads } from "./index.ts";

runPluginConformance({ name: "threads", create: () => threads({ perWorker: 2 }) });

const hasTorch = spawnSync("python3", ["-c", "import torch"]).status === 0;

describe("threads on a pool", () => {
  it("reaches every worker: env, the bootstrap op's file, PyTorch's threads", async () => {
    const settings = sky.python<
      [],
      { omp: string; mkl: string; recorded: { perWorker: number }; torch: number | null }
    >("tasks:thread_settings");
    await using pool = await sky.compute({
      nodes: 2,
      image: { includes: [fileURLToPath(new URL("./tasks.py", import.meta.url))] },
      plugins: [threads({ perWorker: 3 })],
      options: { console: false },
    });
    const seen = await pool.broadcast(settings());
    for (const node of seen) {
      expect(node).toMatchObject({ omp: "3", mkl: "3", recorded: { perWorker: 3 } });
      expect(node.torch).toBe(hasTorch ? 3 : null);
    }
  }, 120_000);

  it("refuses a bad setting, naming it", () => {
    expect(() => threads({ perWorker: 0 })).toThrow(/perWorker: expected a whole number >= 1, received 0/);
  });
});
