// `sky.session()` whose pools do not all live as long as it: one closed by the user (or by its
// budget) before the session is detached or closed, on real Local pools.
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
