/**
 * Teardown when the client is interrupted: SIGINT and SIGTERM dispose the pool before the process
 * ends; after a SIGKILL, Local workers notice their parent is gone and stop by themselves.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive } from "./fixtures/processes.js";

const child = fileURLToPath(new URL("./fixtures/signal-child.ts", import.meta.url));
const provisioningChild = fileURLToPath(new URL("./fixtures/signal-provisioning-child.ts", import.meta.url));

async function startClient(
  workRoot?: string,
  mode?: "slow-terminate",
): Promise<{
  pids: number[];
  exited: Promise<{ code: number | null; signal: string | null }>;
  pid: number;
  lines: AsyncIterator<string>;
}> {
  const process_ = spawn(
    process.execPath,
    [child, ...(workRoot ? [workRoot] : []), ...(mode ? [mode] : [])],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    process_.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const lines = createInterface({ input: process_.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error("the client exited before its pool was ready");
  const pids = (JSON.parse(first.value) as { pids: number[] }).pids;
  return { pids, exited, pid: process_.pid as number, lines };
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

  it.each(["SIGINT", "SIGTERM"] as const)(
    "on %s while provisioning, tears down what was provisioned before it ends",
    async (signal) => {
      const parent = await mkdtemp(join(tmpdir(), "skyward-provisioning-"));
      try {
        const process_ = spawn(process.execPath, [provisioningChild, parent], {
          stdio: ["ignore", "pipe", "inherit"],
        });
        const exited = new Promise<string | null>((resolve) =>
          process_.once("exit", (_code, how) => resolve(how)),
        );
        const lines = createInterface({ input: process_.stdout });
        const { root } = await new Promise<{ root: string }>((resolve, reject) => {
          lines.once("line", (line) => resolve(JSON.parse(line) as { root: string }));
          process_.once("exit", () => reject(new Error("the client exited before it was provisioning")));
        });
        expect((await readdir(parent)).map((name) => join(parent, name))).toEqual([root]);
        process.kill(process_.pid as number, signal);
        expect(await exited).toBe(signal);
        // The cluster was torn down before the process ended: its root (Local's resources) is gone.
        expect(await readdir(parent)).toEqual([]);
      } finally {
        await rm(parent, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it("a second SIGINT during the close it started does not skip terminating the pool", async () => {
    const parent = await mkdtemp(join(tmpdir(), "skyward-second-sigint-"));
    try {
      // Terminating takes 2 s there, as a cloud's API does: the second Ctrl-C lands in it.
      const client = await startClient(parent, "slow-terminate");
      expect(await readdir(parent)).toHaveLength(1);
      process.kill(client.pid, "SIGINT");
      // The impatient user: Ctrl-C again once the first one's close is under way.
      expect((await client.lines.next()).value).toBe(JSON.stringify({ closing: true }));
      process.kill(client.pid, "SIGINT");
      const exit = await client.exited;
      expect(exit.signal).toBe("SIGINT");
      // Terminated before it exited: Local's instances (the pool root) are gone, no worker is left.
      expect(await readdir(parent)).toEqual([]);
      expect(client.pids.filter(alive)).toEqual([]);
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  }, 60_000);

  it("leaves no Local worker behind after a SIGKILL", async () => {
    const client = await startClient();
    process.kill(client.pid, "SIGKILL");
    await client.exited;
    expect(await waitUntil(() => client.pids.every((pid) => !alive(pid)), 10_000)).toBe(true);
  });

  it("leaves its pool root after a SIGKILL, and the next Local pool removes it", async () => {
    const parent = await mkdtemp(join(tmpdir(), "skyward-abandoned-"));
    try {
      const client = await startClient(parent);
      process.kill(client.pid, "SIGKILL");
      await client.exited;
      const left = await readdir(parent);
      expect(left).toHaveLength(1);
      expect(left[0]).toMatch(/^skyward-pool-/);
      expect(await readFile(join(parent, left[0] as string, "owner.pid"), "utf8")).toBe(`${client.pid}\n`);
      {
        await using pool = await sky.compute({
          provider: sky.Local({ workRoot: parent }),
          nodes: 1,
          options: { console: false },
        });
        // The dead client's root is gone; this pool's own is there while it lives.
        const now = await readdir(parent);
        expect(now).toHaveLength(1);
        expect(now[0]).not.toBe(left[0]);
        expect(await readFile(join(parent, now[0] as string, "owner.pid"), "utf8")).toBe(`${process.pid}\n`);
        expect(pool.state).toBe("ready");
      }
      expect(await readdir(parent)).toEqual([]);
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("handleSignals: false", () => {
  it("installs no SIGINT/SIGTERM handler, and a pool with handlers does not close the one without", async () => {
    const before = { int: process.listenerCount("SIGINT"), term: process.listenerCount("SIGTERM") };
    await using quiet = await sky.compute(
      { nodes: 1, options: { console: false } },
      { handleSignals: false },
    );
    expect(process.listenerCount("SIGINT")).toBe(before.int);
    expect(process.listenerCount("SIGTERM")).toBe(before.term);
    {
      await using loud = await sky.compute({ nodes: 1, options: { console: false } });
      expect(process.listenerCount("SIGINT")).toBe(before.int + 1);
      expect(loud.currentNodes()).toBe(1);
    }
    // The pool with handlers is gone, and with it the handlers; the quiet pool still serves.
    expect(process.listenerCount("SIGINT")).toBe(before.int);
    expect(quiet.currentNodes()).toBe(1);
    await expect(sky.compute({ nodes: 1 }, { handleSignals: "no" as unknown as boolean })).rejects.toThrow(
      /handleSignals: expected a boolean/,
    );
  }, 60_000);
});
