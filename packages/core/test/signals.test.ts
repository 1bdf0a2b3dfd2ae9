/**
 * Teardown when the client is interrupted: SIGINT and SIGTERM dispose the pool before the process
 * ends; after a SIGKILL, Local workers notice their parent is gone and stop by themselves.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const child = fileURLToPath(new URL("./fixtures/signal-child.ts", import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startClient(): Promise<{
  pids: number[];
  exited: Promise<{ code: number | null; signal: string | null }>;
  pid: number;
}> {
  const process_ = spawn(process.execPath, [child], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    process_.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const lines = createInterface({ input: process_.stdout });
  const pids = await new Promise<number[]>((resolve, reject) => {
    lines.once("line", (line) => resolve((JSON.parse(line) as { pids: number[] }).pids));
    process_.once("exit", () => reject(new Error("the client exited before its pool was ready")));
  });
  return { pids, exited, pid: process_.pid as number };
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return condition();
}

describe("an interrupted client", () => {
  it.each(["SIGINT", "SIGTERM"] as const)(
    "disposes its pool on %s, then ends as the signal says",
    async (signal) => {
      const client = await startClient();
      expect(client.pids).toHaveLength(2);
      expect(client.pids.every(alive)).toBe(true);
      process.kill(client.pid, signal);
      const exit = await client.exited;
      expect(exit.signal).toBe(signal);
      // Disposed before it exited: no worker is left even an instant later.
      expect(client.pids.filter(alive)).toEqual([]);
    },
  );

  it("leaves no Local worker behind after a SIGKILL", async () => {
    const client = await startClient();
    process.kill(client.pid, "SIGKILL");
    await client.exited;
    expect(await waitUntil(() => client.pids.every((pid) => !alive(pid)), 10_000)).toBe(true);
  });
});
