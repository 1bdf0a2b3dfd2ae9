/**
 * A pool's secrets under `torch({ perAccelerator: true })` on a Local node with 2 faked GPUs (the
 * fake `nvidia-smi` of `fixtures/bin`): each of the node's 2 worker processes, one per accelerator,
 * reads the secret from `os.environ`, while no process's command line and no file under the node's
 * root holds its value.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { localSecretLeaks, poolTasks, withLocalNodeRoot } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { torch } from "../src/index.js";
import { SYSTEM_PYTHON, torchSkipReasons } from "./ddp-tasks.js";

const fakes = fileURLToPath(new URL("./fixtures/bin", import.meta.url));
const planted = { name: "plugin-torch secrets.test.ts", value: "torch-per-accelerator-planted-secret-4471" };

const { torchMissing } = await torchSkipReasons("PyTorch for the torch plugin's secrets test");

describe.skipIf(torchMissing !== undefined)("a pool's secrets under torch({ perAccelerator: true })", () => {
  it("reach the tasks of every worker process, one per faked GPU, and no command line or file of the node", async () => {
    await withLocalNodeRoot(
      "skyward-torch-secrets-",
      async (workRoot) => {
        await using pool = await sky.compute({
          provider: sky.Local({ workRoot }),
          image: { python: SYSTEM_PYTHON, includes: [poolTasks.file] },
          secrets: { SKYTEST_TORCH_SECRET: planted.value },
          plugins: [torch({ backend: "gloo", cuda: "cpu", perAccelerator: true })],
          options: { console: false },
        });
        expect(pool.workerCount()).toBe(2);
        const seen = await pool.broadcast(poolTasks.environment("SKYTEST_TORCH_SECRET"));
        expect(seen.map((task) => task.value)).toEqual([planted.value, planted.value]);
        expect(new Set(seen.map((task) => task.pid)).size).toBe(2);
        // While the pool runs: its workers, their per-accelerator processes, what they started.
        const leaks = await localSecretLeaks(workRoot, [planted]);
        expect(leaks.commandLines).toEqual([]);
        expect(leaks.files.files).toBeGreaterThan(0);
        expect(leaks.files.findings).toEqual([]);
      },
      // The client (the Local provider's offer) and the workers (their device check) ask nvidia-smi.
      { toolsFirst: fakes },
    );
  });
});
