// `skyward pools`, `status` and `attach` on a real detached pool: a client process starts a Local
// pool with tasks, detaches it and is SIGKILLed; the CLI lists it, shows it, and attaches to collect
// the outcomes and close it.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "./run-cli.js";

const child = fileURLToPath(new URL("../../core/test/fixtures/detach-child.ts", import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("skyward pools, status and attach", () => {
  it("list a detached pool, show it, collect its outcomes and close it", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-pools-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "home") };
    const client = spawn(process.execPath, [child, join(scratch, "work")], {
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: client.stdout }).once("line", resolve);
      client.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
    });
    const { id, pids } = JSON.parse(line) as { id: string; pids: number[] };
    client.kill("SIGKILL");
    await new Promise((resolve) => client.once("exit", resolve));

    const pools = await runCli(["pools"], { cwd: scratch, env });
    expect(pools.code).toBe(0);
    const [header, row] = pools.stdout.trim().split("\n");
    expect(header).toMatch(/^POOL\s+PROVIDER\s+TYPE\s+NODES\s+TASKS\s+DETACHED\s+TTL\s+\$\/H\s+COST$/);
    expect(row).toMatch(
      new RegExp(`^${id}\\s+local\\s+local\\s+2/2\\s+6\\s+\\d+s ago\\s+600s\\s+0\\.0000\\s+\\$0\\.0000$`),
    );

    const status = await runCli(["status", id], { cwd: scratch, env });
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`pool ${id} · local · local · local`);
    expect(status.stdout.match(/ running$/gm)).toHaveLength(2);

    const attached = await runCli(["attach", id, "--close", "--json"], {
      cwd: scratch,
      env,
      timeoutMs: 60_000,
    });
    expect(attached.stderr).toBe("");
    expect(attached.code).toBe(0);
    const outcomes = attached.stdout
      .trim()
      .split("\n")
      .map((text) => JSON.parse(text) as { ok: boolean; value: string });
    expect(outcomes.map((outcome) => outcome.value).sort()).toEqual(["a", "b", "c", "x", "y", "z"]);
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    for (const pid of pids) expect(alive(pid)).toBe(false);

    expect((await runCli(["pools"], { cwd: scratch, env })).stdout).toBe("No detached pools.\n");
    const missing = await runCli(["status", id], { cwd: scratch, env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no detached pool "${id}"`);
  }, 120_000);
});
