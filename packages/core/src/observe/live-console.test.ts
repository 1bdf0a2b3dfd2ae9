import { describe, expect, it } from "vitest";
import { attachConsole, resolveConsoleMode } from "./console.js";
import { EventHub, type SkywardEvent } from "./events.js";
import { LiveView, renderLive, renderMinimal, renderSummary } from "./live-console.js";

const t0 = Date.UTC(2026, 10, 24, 9, 0, 0);
type Input = SkywardEvent extends infer E ? (E extends SkywardEvent ? Omit<E, "poolId"> : never) : never;

function feed(view: LiveView, events: Input[]): void {
  for (const event of events) view.apply({ ...event, poolId: "p1" } as SkywardEvent);
}

const provisioned = (node: number, at: number): Input => ({
  type: "node.provisioned",
  timestamp: at,
  node,
  instanceId: `i-${node}`,
  provider: "aws",
  instanceType: "g5.xlarge",
  spot: true,
  region: "us-east-1",
  accelerator: "1x A10G",
  hourlyPrice: 0.5,
  publicIp: null,
  privateIp: null,
});

describe("the live view", () => {
  it("shows the dashboard's link under its header", () => {
    const view = new LiveView("p1", t0);
    const url = "http://127.0.0.1:8787/?token=abc";
    expect(renderLive(view, {}, 120, t0)[1]).not.toContain("Dashboard");
    feed(view, [{ type: "dashboard.ready", timestamp: t0, url }]);
    expect(renderLive(view, {}, 120, t0)[1]).toBe(`Dashboard: ${url}`);
  });

  it("follows nodes through provisioning, bootstrap phases, ready, lost and replaced", () => {
    const view = new LiveView("p1", t0);
    feed(view, [
      { type: "pool.state", timestamp: t0, state: "provisioning", previous: "requesting" },
      provisioned(0, t0 + 1000),
      provisioned(1, t0 + 1000),
      { type: "bootstrap.phase", timestamp: t0 + 2000, node: 0, phase: "apt", status: "started" },
      {
        type: "bootstrap.phase",
        timestamp: t0 + 3000,
        node: 0,
        phase: "apt",
        status: "finished",
        durationMs: 1000,
      },
      { type: "bootstrap.phase", timestamp: t0 + 3000, node: 0, phase: "pip", status: "started" },
    ]);
    const status = { nodes: { min: 2, max: 4, desired: 3 } };
    const early = renderLive(view, status, 80, t0 + 5000);
    expect(early[0]).toBe("skyward p1 · provisioning · aws/us-east-1 · g5.xlarge · spot · 1x A10G · 5s");
    expect(early[1]).toBe("nodes 0 ready (min 2, target 3, max 4)");
    expect(early[2]).toBe("$—/h · $— so far");
    expect(early[4]).toMatch(/^ {2}0 pip 1✓ 2s +▶0 {2}cpu {4}— mem {4}— gpu {4}— vram {4}—$/);
    expect(early[5]).toMatch(/^ {2}1 ssh 4s/);
    // The third node the pool aims at has no instance yet.
    expect(early[6]).toMatch(/^ {2}· provisioning/);

    feed(view, [
      { type: "node.ready", timestamp: t0 + 6000, node: 0, instanceId: "i-0" },
      { type: "node.lost", timestamp: t0 + 7000, node: 1, instanceId: "i-1", reason: "heartbeat" },
    ]);
    let rows = renderLive(view, status, 80, t0 + 8000);
    expect(rows[4]).toMatch(/^ {2}0 ready /);
    expect(rows[5]).toMatch(/^ {2}1 lost /);
    feed(view, [
      { type: "node.replaced", timestamp: t0 + 9000, node: 1, instanceId: "i-1b", previousInstanceId: "i-1" },
    ]);
    rows = renderLive(view, status, 160, t0 + 9500);
    // 160 columns: nodes and cost share a line, and rows end with the instance id.
    expect(rows[3]).toContain("i-0");
    expect(rows[4]).toMatch(/^ {2}1 replaced \d+s \(replaced 1×\)/);
    expect(rows[4]).toContain("i-1b");
  });

  it("follows a replacement as the pool reports it: the lost instance destroyed, the new one provisioned", () => {
    const view = new LiveView("p1", t0);
    feed(view, [
      provisioned(0, t0),
      { type: "node.ready", timestamp: t0 + 1000, node: 0, instanceId: "i-0" },
      { type: "node.lost", timestamp: t0 + 2000, node: 0, instanceId: "i-0", reason: "heartbeat" },
      { type: "node.destroyed", timestamp: t0 + 3000, node: 0, instanceId: "i-0" },
    ]);
    expect(renderLive(view, {}, 80, t0 + 3500)[4]).toMatch(/^ {2}0 stopped /);
    feed(view, [{ ...provisioned(0, t0 + 4000), instanceId: "i-0b", hourlyPrice: 0.7 } as Input]);
    // 160 columns: nodes and cost share a line, node rows start a line earlier and end with the instance id.
    expect(renderLive(view, {}, 160, t0 + 4500)[3]).toMatch(/^ {2}0 ssh .*i-0b/);
    feed(view, [
      { type: "node.ready", timestamp: t0 + 5000, node: 0, instanceId: "i-0b" },
      { type: "node.replaced", timestamp: t0 + 5000, node: 0, instanceId: "i-0b", previousInstanceId: "i-0" },
    ]);
    const row = renderLive(view, {}, 160, t0 + 6000)[3];
    expect(row).toMatch(/^ {2}0 ready \(replaced 1×\)/);
    expect(row).toContain("i-0b");
  });

  it("shows a ready node's round trip from its bootstrap, and none for a node next to the client", () => {
    const view = new LiveView("p1", t0);
    feed(view, [
      provisioned(0, t0),
      provisioned(1, t0),
      {
        type: "node.bootstrapped",
        timestamp: t0 + 1000,
        node: 0,
        instanceId: "i-0",
        durationMs: 900,
        roundTripMs: 41.4,
      },
      {
        type: "node.bootstrapped",
        timestamp: t0 + 1000,
        node: 1,
        instanceId: "i-1",
        durationMs: 900,
        roundTripMs: 0.2,
      },
      { type: "node.ready", timestamp: t0 + 1100, node: 0, instanceId: "i-0" },
      { type: "node.ready", timestamp: t0 + 1100, node: 1, instanceId: "i-1" },
    ]);
    const rows = renderLive(view, {}, 80, t0 + 2000);
    expect(rows[4]).toMatch(/^ {2}0 ready rtt 41 ms /);
    expect(rows[5]).toMatch(/^ {2}1 ready +▶/);
  });

  it("shows CPU, memory, GPU and VRAM gauges from metric events, per GPU summed", () => {
    const view = new LiveView("p1", t0);
    feed(view, [
      provisioned(0, t0),
      { type: "node.ready", timestamp: t0, node: 0, instanceId: "i-0" },
      { type: "metric", timestamp: t0, node: 0, name: "cpu", value: 50, unit: "%" },
      { type: "metric", timestamp: t0, node: 0, name: "memory_used", value: 4, unit: "B" },
      { type: "metric", timestamp: t0, node: 0, name: "memory_total", value: 16, unit: "B" },
      { type: "metric", timestamp: t0, node: 0, name: "gpu", value: 100, unit: "%", gpu: 0 },
      { type: "metric", timestamp: t0, node: 0, name: "gpu", value: 50, unit: "%", gpu: 1 },
      { type: "metric", timestamp: t0, node: 0, name: "gpu_memory", value: 6, unit: "B", gpu: 0 },
      { type: "metric", timestamp: t0, node: 0, name: "gpu_memory_total", value: 8, unit: "B", gpu: 0 },
      { type: "metric", timestamp: t0, node: 0, name: "gpu_memory", value: 2, unit: "B", gpu: 1 },
      { type: "metric", timestamp: t0, node: 0, name: "gpu_memory_total", value: 8, unit: "B", gpu: 1 },
    ]);
    const narrow = renderLive(view, {}, 80, t0);
    expect(narrow[4]).toMatch(/cpu {2}50% mem {2}25% gpu {2}75% vram {2}50%$/);
    // The default set samples GPU memory in use without its total: the bytes, not a percentage.
    const defaults = new LiveView("p1", t0);
    feed(defaults, [
      provisioned(0, t0),
      {
        type: "metric",
        timestamp: t0,
        node: 0,
        name: "gpu_memory",
        value: 40 * 1024 ** 3,
        unit: "B",
        gpu: 0,
      },
      { type: "metric", timestamp: t0, node: 0, name: "gpu_memory", value: 1024 ** 3, unit: "B", gpu: 1 },
    ]);
    expect(renderLive(defaults, {}, 80, t0)[4]).toMatch(/vram 41\.0G$/);
    const wide = renderLive(view, {}, 160, t0);
    expect(wide[3]).toContain("cpu ████      50% mem ██        25% gpu ██████    75% vram ████      50%");
  });

  it("counts tasks, retries and throughput, estimates the time left and sums up at the end", () => {
    const view = new LiveView("p1", t0);
    const events: Input[] = [];
    for (let i = 0; i < 10; i++)
      events.push({ type: "task.queued", timestamp: t0, taskId: `t${i}`, name: "m:f" });
    for (let i = 0; i < 4; i++) {
      events.push({
        type: "task.started",
        timestamp: t0 + 100,
        taskId: `t${i}`,
        name: "m:f",
        node: 0,
        attempt: 1,
      });
    }
    // t0..t1 complete in 1 s and 2 s; t2 fails for good, t3 is retried.
    events.push({
      type: "task.completed",
      timestamp: t0 + 1000,
      taskId: "t0",
      name: "m:f",
      node: 0,
      durationMs: 900,
    });
    events.push({
      type: "task.completed",
      timestamp: t0 + 2000,
      taskId: "t1",
      name: "m:f",
      node: 0,
      durationMs: 1900,
    });
    events.push({
      type: "task.failed",
      timestamp: t0 + 2000,
      taskId: "t2",
      name: "m:f",
      node: 0,
      error: { type: "ValueError", message: "x" },
      willRetry: false,
    });
    events.push({
      type: "task.failed",
      timestamp: t0 + 2000,
      taskId: "t3",
      name: "m:f",
      node: 0,
      error: { type: "NodeLost", message: "x" },
      willRetry: true,
    });
    feed(view, events);
    expect([view.queued, view.running, view.done, view.failed]).toEqual([7, 0, 2, 1]);
    // 2 done in the 4 s since the first task: 0.5/s, 7 left: 14 s.
    expect(view.throughput(t0 + 4000)).toBeCloseTo(0.5);
    expect(view.eta(t0 + 4000)).toBeCloseTo(14);
    const cost = { hourlyRate: 2, total: 0.0123 };
    expect(renderLive(view, { cost }, 80, t0 + 4000)[2]).toBe("$2.00/h · $0.012 so far");
    expect(renderLive(view, { cost }, 80, t0 + 4000)[3]).toBe(
      "tasks 7 queued · 0 running · 2 done · 1 failed · 0.50/s · ETA 14s",
    );
    expect(renderMinimal(view, { cost }, 200, t0 + 4000)).toBe(
      "init · 0 nodes · 7q 0r 2✓ 1✗ · 0.50/s · ETA 14s · $0.012 · 4s",
    );
    expect(renderSummary(view, { cost }, t0 + 5000)).toBe(
      "skyward p1: 5s · cost $0.012 · tasks 2 done, 1 failed · 1.0/s throughput · latency p50 1.00 s, p95 2.00 s",
    );
    expect(renderSummary(view, {}, t0 + 5000)).toContain("cost —");
    expect(renderSummary(view, { cost }, t0 + 5000, 60)).toBe(
      "skyward p1: 5s · cost $0.012\n  tasks 2 done, 1 failed · 1.0/s throughput · latency p50 1.00 s, p95 2.00 s",
    );
  });

  it("never draws a line wider than the terminal", () => {
    const view = new LiveView("a-very-long-pool-id", t0);
    feed(view, [provisioned(0, t0)]);
    for (const width of [40, 80, 160]) {
      for (const line of renderLive(view, { nodes: { min: 1, max: 9, desired: 3 } }, width, t0)) {
        expect([...line].length).toBeLessThanOrEqual(width);
      }
    }
  });
});

describe("choosing the console", () => {
  it("is live only on a terminal, and log lines elsewhere", () => {
    expect(resolveConsoleMode(true, true)).toBe("rich");
    expect(resolveConsoleMode("rich", true)).toBe("rich");
    expect(resolveConsoleMode("rich", false)).toBe("log");
    expect(resolveConsoleMode(true, false)).toBe("log");
    expect(resolveConsoleMode("minimal", true)).toBe("live-minimal");
    expect(resolveConsoleMode("minimal", false)).toBe("minimal");
    expect(resolveConsoleMode("log", true)).toBe("log");
    expect(resolveConsoleMode(false, true)).toBe("silent");
  });

  it("on a terminal redraws in place, persists task output above and prints a summary when detached", () => {
    let written = "";
    const sink = { isTTY: true, columns: 80, rows: 30, write: (text: string) => (written += text) };
    const hub = new EventHub();
    const detach = attachConsole(hub, "rich", sink, { poolId: "p1" });
    hub.emit({
      type: "log",
      timestamp: t0,
      poolId: "p1",
      node: 2,
      worker: 0,
      stream: "stdout",
      line: "epoch 1",
    });
    detach();
    expect(written).toContain("[node 2] epoch 1\n");
    expect(written).toContain("skyward p1 · init");
    // log-update erases the previous frame with cursor-up/erase-line sequences.
    expect(written).toContain("\u001b[2K");
    expect(written).toMatch(/skyward p1: \d+s · cost — · tasks 0 done, 0 failed\n$/);
    const after = written.length;
    hub.emit({
      type: "log",
      timestamp: t0,
      poolId: "p1",
      node: 2,
      worker: 0,
      stream: "stdout",
      line: "later",
    });
    expect(written.length).toBe(after);
  });

  it("gives a second pool on the same terminal its lines above the first one's region", () => {
    let written = "";
    const sink = { isTTY: true, columns: 80, rows: 30, write: (text: string) => (written += text) };
    const first = new EventHub();
    const second = new EventHub();
    const detachFirst = attachConsole(first, "rich", sink, { poolId: "p1" });
    const detachSecond = attachConsole(second, "rich", sink, { poolId: "p2" });
    second.emit({
      type: "log",
      timestamp: t0,
      poolId: "p2",
      node: 0,
      worker: 0,
      stream: "stdout",
      line: "from p2",
    });
    detachFirst();
    second.emit({
      type: "log",
      timestamp: t0,
      poolId: "p2",
      node: 1,
      worker: 0,
      stream: "stdout",
      line: "after p1",
    });
    detachSecond();
    expect(written).toMatch(/\[p2\] \[node 1\] after p1\n\d\d:\d\d:\d\d skyward p2: \d+s · cost —[^\n]*\n$/);
    expect(written).toMatch(/\d\d:\d\d:\d\d \[p2\] \[node 0\] from p2\n/);
    // One live region: only the first pool's header; each pool's summary.
    expect(written).toContain("skyward p1 · init");
    expect(written).not.toContain("skyward p2 ·");
    expect(written).toMatch(/skyward p1: \d+s · cost —/);
  });
});

describe("the live console's money lines", () => {
  const budget = (type: "budget.warning" | "budget.exceeded", poolId: string): SkywardEvent =>
    ({
      type,
      timestamp: t0,
      poolId,
      total: type === "budget.warning" ? 8 : 10,
      budget: 10,
      warnAt: 8,
      hourlyRate: 2.4,
    }) as SkywardEvent;

  it("prints the budget's warning and its end above the region", () => {
    let written = "";
    const sink = { isTTY: true, columns: 120, rows: 30, write: (text: string) => (written += text) };
    const hub = new EventHub();
    const detach = attachConsole(hub, "rich", sink, { poolId: "p1" });
    hub.emit(budget("budget.warning", "p1"));
    hub.emit(budget("budget.exceeded", "p1"));
    detach();
    expect(written).toContain("[pool] budget warning: $8.00 of $10.00 spent ($2.40/h)");
    expect(written).toContain("[pool] budget exceeded: $10.00 of $10.00 spent ($2.40/h); no more tasks");
  });

  it("gives a pool live at the same time as another its summary, with its cost, when it ends", () => {
    let written = "";
    const sink = { isTTY: true, columns: 120, rows: 30, write: (text: string) => (written += text) };
    const first = new EventHub();
    const second = new EventHub();
    const detachFirst = attachConsole(first, "rich", sink, { poolId: "p1" });
    const detachSecond = attachConsole(second, "rich", sink, {
      poolId: "p2",
      status: () => ({ cost: { hourlyRate: 3, total: 1.25 } }),
    });
    second.emit(budget("budget.warning", "p2"));
    detachSecond();
    // Ended while the first one's region is up: its summary goes above that region.
    expect(written).toMatch(/\d\d:\d\d:\d\d skyward p2: \d+s · cost \$1\.25 · tasks 0 done, 0 failed/);
    expect(written).toContain("[p2] [pool] budget warning");
    detachFirst();
    expect(written).toMatch(/skyward p1: \d+s · cost —/);
  });

  it("gives pools one after another each their header and summary", () => {
    let written = "";
    const sink = { isTTY: true, columns: 120, rows: 30, write: (text: string) => (written += text) };
    for (const poolId of ["p1", "p2"]) {
      const detach = attachConsole(new EventHub(), "rich", sink, {
        poolId,
        status: () => ({ cost: { hourlyRate: 1, total: 0.5 } }),
      });
      detach();
    }
    expect(written).toContain("skyward p1 · init");
    expect(written).toContain("skyward p2 · init");
    expect(written).toMatch(/skyward p1: \d+s · cost \$0\.50/);
    expect(written).toMatch(/skyward p2: \d+s · cost \$0\.50/);
  });
});
