// Pools whose close and detach meet, on real Local pools: a session whose pool was closed before
// the session is detached, and a close (a signal, a session, the budget) called while a detach runs.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const pid = sky.python<[], number>("os:getpid");

describe("a session with a pool closed before it", () => {
  it("no longer lists the closed pool, and detaches the others", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-session-closed-"));
    const session = sky.session();
    const early = await session.compute({ provider: sky.Local({ workRoot }), options: { console: false } });
    const kept = await session.compute({ provider: sky.Local({ workRoot }), options: { console: false } });
    const keptPid = await kept.run(pid());
    await early.close();
    expect(session.pools).toEqual([kept]);
    // The closed pool is nothing to detach: the session detaches the one still open.
    const ids = await session.detach();
    expect(ids).toEqual([kept.id]);
    expect(alive(keptPid)).toBe(true);
    await using again = await sky.attach(kept.id, { options: { console: false } });
    expect(await again.run(pid())).toBe(keptPid);
    await again.close();
    expect(await until(() => !alive(keptPid), 10_000)).toBe(true);
  });
});

describe("a close called while the pool is being detached", () => {
  it("waits for the detach, which completes: the workers run on and the pool can be attached", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detach-close-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: 2,
      options: { console: false },
    });
    const pids = await pool.broadcast(pid());
    const detaching = pool.detach();
    const closing = pool.close();
    expect(await detaching).toBe(pool.id);
    await closing;
    for (const worker of pids) expect(alive(worker)).toBe(true);
    await using again = await sky.attach(pool.id, { options: { console: false } });
    expect(await again.broadcast(pid())).toEqual(pids);
    await again.close();
    for (const worker of pids) expect(await until(() => !alive(worker), 10_000)).toBe(true);
  });
});
