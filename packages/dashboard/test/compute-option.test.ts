/**
 * `options.dashboard` on `compute`: the dashboard is served from before provisioning, its link is
 * announced on the console and in the log file, and the page sees the nodes' provisioning.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as sky from "@skyward/core";
import { eventually } from "@skyward/testing";
import { afterAll, describe, expect, it } from "vitest";
import type { PoolPayload } from "../src/index.js";

const scratch = mkdtempSync(join(tmpdir(), "skyward-dashboard-option-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("options.dashboard", () => {
  it("serves the pool from its start and shows the link on the console and in the log file", async () => {
    const logFile = join(scratch, "pool.log");
    const announced: string[] = [];
    const pool = await sky.compute(
      { nodes: 1, options: { console: false, dashboard: true, logging: { file: logFile } } },
      {
        onEvent: (event) => {
          if (event.type === "dashboard.ready") announced.push(event.url);
        },
      },
    );
    try {
      expect(announced).toHaveLength(1);
      const url = new URL(announced[0] as string);
      expect(url.hostname).toBe("127.0.0.1");
      expect(url.searchParams.get("token")?.length).toBeGreaterThan(20);
      const state = (await (
        await fetch(new URL(`/api/pool?${url.searchParams}`, url))
      ).json()) as PoolPayload;
      expect(state.id).toBe(pool.id);
      expect(state.provider).toBe("local");
      // Seen from its provisioning on: the node's market is known.
      expect(state.nodes.map((node) => [node.index, node.phase, node.spot])).toEqual([[0, "ready", false]]);
      // The log file is written through a stream: the line lands shortly after its event.
      const line = `"msg":"Dashboard: ${url.href}"`;
      const logged = () => existsSync(logFile) && readFileSync(logFile, "utf8").includes(line);
      expect(await eventually(logged, 10_000)).toBe(true);
    } finally {
      await pool.close();
    }
    await expect(fetch(announced[0] as string)).rejects.toThrow("fetch failed");
  });
});
