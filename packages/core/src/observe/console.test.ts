import { describe, expect, it } from "vitest";
import { attachConsole, formatConsoleLine, resolveConsoleMode } from "./console.js";
import { EventHub } from "./events.js";

const at = new Date(2026, 10, 22, 9, 5, 7).getTime();

describe("the console", () => {
  it("prints append-only HH:MM:SS lines tagged with the node", () => {
    const lines: string[] = [];
    const hub = new EventHub();
    const detach = attachConsole(hub, "log", { write: (text) => lines.push(text) });
    hub.emit({
      type: "pool.state",
      timestamp: at,
      poolId: "p",
      state: "provisioning",
      previous: "requesting",
    });
    hub.emit({
      type: "log",
      timestamp: at,
      poolId: "p",
      node: 1,
      worker: 0,
      stream: "stdout",
      line: "epoch 1 loss 0.3",
    });
    hub.emit({
      type: "bootstrap.phase",
      timestamp: at,
      poolId: "p",
      node: 0,
      phase: "pip",
      status: "finished",
      durationMs: 1500,
    });
    hub.emit({
      type: "task.started",
      timestamp: at,
      poolId: "p",
      taskId: "t1",
      name: "m:f",
      node: 0,
      attempt: 1,
    });
    hub.emit({ type: "pool.ready", timestamp: at, poolId: "p", nodes: 4, durationMs: 812 });
    detach();
    hub.emit({
      type: "log",
      timestamp: at,
      poolId: "p",
      node: 1,
      worker: 0,
      stream: "stdout",
      line: "after detach",
    });
    expect(lines).toEqual([
      "09:05:07 [pool] provisioning\n",
      "09:05:07 [node 1] epoch 1 loss 0.3\n",
      "09:05:07 [node 0] pip finished (1.50 s)\n",
      "09:05:07 [pool] ready: 4 nodes (0.81 s)\n",
    ]);
  });

  it("shows less in minimal mode and nothing when silent", () => {
    const phase = {
      type: "bootstrap.phase",
      timestamp: at,
      poolId: "p",
      node: 0,
      phase: "pip",
      status: "finished",
    } as const;
    expect(formatConsoleLine(phase, "minimal")).toBeUndefined();
    expect(resolveConsoleMode(false)).toBe("silent");
    expect(resolveConsoleMode(true)).toBe("log");
    expect(resolveConsoleMode("minimal")).toBe("minimal");
    const lines: string[] = [];
    const hub = new EventHub();
    attachConsole(hub, "silent", { write: (text) => lines.push(text) });
    hub.emit({ type: "pool.destroyed", timestamp: at, poolId: "p" });
    expect(lines).toEqual([]);
  });
});

describe("budget lines", () => {
  it("say what is spent, of what, at what rate, in log and minimal mode", () => {
    const warning = {
      type: "budget.warning",
      timestamp: at,
      poolId: "p",
      total: 8.004,
      budget: 10,
      warnAt: 8,
      hourlyRate: 2.4,
    } as const;
    const exceeded = {
      type: "budget.exceeded",
      timestamp: at,
      poolId: "p",
      total: 10,
      budget: 10,
      hourlyRate: 2.4,
    } as const;
    expect(formatConsoleLine(warning, "log")).toBe(
      "09:05:07 [pool] budget warning: $8.00 of $10.00 spent ($2.40/h)",
    );
    expect(formatConsoleLine(exceeded, "minimal")).toBe(
      "09:05:07 [pool] budget exceeded: $10.00 of $10.00 spent ($2.40/h); no more tasks, shutting down",
    );
    const lines: string[] = [];
    const hub = new EventHub();
    attachConsole(hub, "log", { write: (text) => lines.push(text) });
    hub.emit(warning);
    expect(lines).toEqual(["09:05:07 [pool] budget warning: $8.00 of $10.00 spent ($2.40/h)\n"]);
  });

  it("prints the dashboard's link, in every line mode", () => {
    const at = new Date(2024, 0, 1, 9, 5, 7).getTime();
    const url = "http://127.0.0.1:8787/?token=abc";
    const ready = { type: "dashboard.ready", timestamp: at, poolId: "p", url } as const;
    expect(formatConsoleLine(ready, "log")).toBe(`09:05:07 [pool] Dashboard: ${url}`);
    expect(formatConsoleLine(ready, "minimal")).toBe(`09:05:07 [pool] Dashboard: ${url}`);
    const lines: string[] = [];
    const hub = new EventHub();
    attachConsole(hub, "log", { write: (text) => lines.push(text) });
    hub.emit(ready);
    expect(lines).toEqual([`09:05:07 [pool] Dashboard: ${url}\n`]);
  });
});

describe("the line console's end", () => {
  it.each(["log", "minimal"] as const)(
    "in %s mode sums the pool up when it ends: duration, cost, tasks",
    (mode) => {
      const lines: string[] = [];
      const hub = new EventHub();
      const detach = attachConsole(
        hub,
        mode,
        { write: (text) => lines.push(text) },
        {
          poolId: "p9",
          status: () => ({ cost: { hourlyRate: 4, total: 2.5 } }),
        },
      );
      hub.emit({ type: "pool.destroyed", timestamp: at, poolId: "p9" });
      detach();
      expect(lines.at(-1)).toMatch(
        /^\d\d:\d\d:\d\d skyward p9: \d+s · cost \$2\.50 · tasks 0 done, 0 failed\n$/,
      );
      const count = lines.length;
      detach();
      expect(lines).toHaveLength(count);
    },
  );
});
