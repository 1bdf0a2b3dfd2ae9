// The live console in a real terminal: tmux runs the demo client (a 4-node local pool, a map and a
// streaming task) at 80 and 160 columns, and the screen is read back with `capture-pane` while the
// pool runs and after it is gone.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on core, so core cannot depend on it.
import { isCi } from "../../testing/src/prerequisites.js";

const demo = fileURLToPath(new URL("./fixtures/console-demo.ts", import.meta.url));
const hasTmux = spawnSync("tmux", ["-V"]).status === 0;

/** tmux on a server of its own (`-L`): no other tmux user's sessions, and no race with a server shutting down. */
function tmux(socket: string, ...args: string[]): string {
  return execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" });
}

async function until<T>(probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting for the screen");
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
}

// Skipped without tmux, except under CI (scripts/toolchain.sh installs it there).
describe.skipIf(!hasTmux && !isCi())("the live console in tmux", () => {
  for (const columns of [80, 160]) {
    it(`draws header, node rows and task counters at ${columns} columns, then a summary`, async () => {
      const session = `skyward-console-${process.pid}-${columns}`;
      const done = join(mkdtempSync(join(tmpdir(), "skyward-console-")), "rc");
      const env = `SKYWARD_HOME=${process.env.SKYWARD_HOME ?? ""} PATH=${process.env.PATH ?? ""}`;
      tmux(
        session,
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        String(columns),
        "-y",
        "40",
        // Each node at $2.40/h: the console shows the pool's $9.60/h and what it has cost so far.
        `env ${env} '${process.execPath}' '${demo}' rich 2.4; echo $? > '${done}'; sleep 60`,
      );
      try {
        const screen = () => tmux(session, "capture-pane", "-p", "-t", session);
        // Mid-run: the four nodes ready, tasks running, output scrolling above.
        const live = await until(() => {
          const text = screen();
          const rows = text.split("\n").filter((line) => /^\s+\d ready\b/.test(line));
          const output = /\[node \d\] (square\(\d+\) on its way|tick \d+)/.test(text);
          return rows.length === 4 && output && /tasks \d+ queued · [1-9]\d* running/.test(text)
            ? text
            : undefined;
        }, 90_000);
        const lines = live.split("\n");
        for (const line of lines) expect([...line].length).toBeLessThanOrEqual(columns);
        expect(live).toMatch(/skyward \w+ · ready · local\/local · local · on-demand · none · \d+s/);
        expect(live).toMatch(/nodes 4 ready \(min 4, target 4, max 4\)/);
        expect(live).toMatch(/\$9\.60\/h · \$0\.\d{3} so far/);
        expect(live).toMatch(/\[node \d\] (square\(\d+\) on its way|tick \d+)/);
        // The live region is drawn once: one header on the screen, not a trail of frames.
        expect(lines.filter((line) => line.startsWith("skyward ")).length).toBe(1);
        const end = await until(() => {
          try {
            return readFileSync(done, "utf8").trim();
          } catch {
            return undefined;
          }
        }, 120_000);
        expect(end).toBe("0");
        const final = screen();
        expect(final).toContain("sum of squares 20540, 20 ticks");
        // The summary: one line, or at 80 columns two (the figures indented on the second).
        expect(final).toMatch(/skyward \w+: \d+s · cost \$0\.\d{3}(?: · |\n {2})tasks 41 done, 0 failed/);
        // About 20 s at $9.60/h: a few cents.
        const cost = Number(/cost \$(0\.\d{3})/.exec(final)?.[1]);
        expect(cost).toBeGreaterThan(0.01);
        expect(cost).toBeLessThan(0.5);
        // No frame of the live region is left behind, and the app's own stdout line above survived.
        expect(
          final.split("\n").filter((line) => line.startsWith("skyward ") && line.includes(" · ready ·")),
        ).toEqual([]);
        // The live region is erased at the end: no node rows left behind.
        expect(final.split("\n").filter((line) => /^\s+\d ready\b/.test(line))).toEqual([]);
      } finally {
        spawnSync("tmux", ["-L", session, "kill-server"]);
      }
    }, 240_000);
  }
});
