import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually, isProcessRunning } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { detachedLocalPool } from "./detached-pool.js";
import { runCli } from "./run-cli.js";

const child = fileURLToPath(new URL("./fixtures/detach-long-child.ts", import.meta.url));

describe("skyward attach of a pool that closes itself", () => {
  it("reports the budget that ran out, exits 1, and leaves no worker running", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-attach-closed-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "home") };
    const { id, pids } = await detachedLocalPool(scratch, env, child);
    try {
      // Its node costs 36 USD an hour (a cent a second) and its budget is 3 cents: attached, it runs
      // out in about 3 seconds, while its 10-minute task goes on.
      const stateFile = join(env.SKYWARD_HOME, "pools", `${id}.json`);
      const state = JSON.parse(readFileSync(stateFile, "utf8"));
      state.nodes = state.nodes.map((node: object) => ({ ...node, hourlyPrice: 36 }));
      state.budget = { max: 0.03, warnAt: 0.02 };
      state.cost = { total: 0, hourlyRate: 0 };
      state.budgetDeadline = null;
      writeFileSync(stateFile, JSON.stringify(state));

      const attached = await runCli(["attach", id, "--json"], { cwd: scratch, env, timeoutMs: 60_000 });
      expect(attached.stderr).not.toContain("already closed or detached");
      expect(attached.stderr).toContain(`skyward: pool ${id} closed itself: its budget of $0.03 is spent`);
      expect(attached.code).toBe(1);
      expect(await eventually(() => pids.every((pid) => !isProcessRunning(pid)), 20_000)).toBe(true);
    } finally {
      for (const pid of pids) if (isProcessRunning(pid)) process.kill(pid, "SIGKILL");
    }
  }, 120_000);
});
