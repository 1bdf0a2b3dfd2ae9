/**
 * `options.dashboard` on `sky.attach`: validated and refused as on `compute`, served from the
 * attach on, its link announced in the log file; `/api/pool` names where the pool was attached
 * from, and says so once it is detached again.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sky from "@skyward/core";
import { eventually } from "@skyward/testing";
import { afterAll, describe, expect, it } from "vitest";
import type { PoolPayload } from "../src/index.js";

const scratch = mkdtempSync(join(tmpdir(), "skyward-dashboard-attach-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function poolPayload(link: URL): Promise<PoolPayload> {
  const response = await fetch(new URL(`/api/pool?${link.searchParams}`, link));
  expect(response.status).toBe(200);
  return (await response.json()) as PoolPayload;
}

describe("options.dashboard on attach", () => {
  it("serves the attached pool, names its state file, and sees it detached again", async () => {
    const opened = await sky.compute({ nodes: 1, options: { console: false } });
    const id = await opened.detach();
    const { detachedAt } = (await sky.detachedPools()).find((pool) => pool.id === id) as sky.DetachedPool;

    // Refused before any worker is reached, naming the field: the pool stays attachable.
    const refused = await sky
      .attach(id, { options: { console: false, dashboard: { port: 70_000 } } })
      .catch((error: unknown) => error);
    expect(sky.ConfigurationError.isInstance(refused)).toBe(true);
    expect((refused as sky.ConfigurationError).issues[0]?.path).toBe("options.dashboard.port");

    const logFile = join(scratch, "attached.log");
    const before = Date.now();
    let pool = await sky.attach(id, {
      options: { console: false, dashboard: true, logging: { file: logFile } },
    });
    let link: URL | undefined;
    try {
      // The log file is written through a stream: the line lands shortly after attach() returns.
      const announcement = () =>
        /"msg":"Dashboard: ([^"]+)"/.exec(existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
      expect(await eventually(() => announcement() !== null, 10_000)).toBe(true);
      const announced = announcement();
      link = new URL((announced as RegExpExecArray)[1] as string);
      expect(link.hostname).toBe("127.0.0.1");

      const attached = await poolPayload(link);
      expect(attached.id).toBe(id);
      expect(attached.state).toBe("ready");
      expect(attached.nodes.map((node) => node.index)).toEqual([0]);
      const from = attached.sessions.attachedFrom;
      expect(from?.poolId).toBe(id);
      expect(from?.stateFile).toBe(join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`));
      expect(from?.detachedAt).toBe(detachedAt);
      expect(from?.detachedBy).toBe(process.pid);
      expect(from?.attachedAt).toBeGreaterThanOrEqual(before);
      expect(attached.sessions.detachedAt).toBeNull();
      expect(attached.sessions.detached.map((pool) => pool.id)).not.toContain(id);
      expect(attached.sessions.error).toBeNull();

      // Detached again: its new state file is this client's detach (the page stays up, read-only).
      await pool.detach();
      const detached = await poolPayload(link);
      expect(detached.sessions.detachedAt).toBeGreaterThan(detachedAt);
      expect(detached.sessions.attachedFrom?.poolId).toBe(id);
    } finally {
      pool = await sky.attach(id, { options: { console: false } });
      await pool.close();
    }
  });
});
