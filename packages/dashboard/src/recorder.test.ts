import type { SkywardEvent } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { DashboardRecorder } from "./recorder.js";

const poolId = "p1";
const start = Date.UTC(2026, 10, 29, 9, 0, 0);

describe("DashboardRecorder over a long run", () => {
  it("stays bounded over two hours of 16 nodes sampling every second, printing and running tasks", () => {
    const recorder = new DashboardRecorder();
    for (let second = 0; second < 7200; second++) {
      const timestamp = start + second * 1000;
      for (let node = 0; node < 16; node++) {
        for (const name of ["cpu", "memory"]) {
          recorder.record({ type: "metric", timestamp, poolId, node, name, value: second % 100, unit: "%" });
        }
        recorder.record({
          type: "log",
          timestamp,
          poolId,
          node,
          worker: 0,
          stream: "stdout",
          line: `step ${second}`,
        });
      }
      const taskId = `t${second}`;
      const task = { timestamp, poolId, taskId, name: "tasks:step" };
      recorder.record({ type: "task.queued", ...task } as SkywardEvent);
      recorder.record({ type: "task.started", ...task, node: second % 16, attempt: 1 } as SkywardEvent);
      recorder.record({ type: "task.completed", ...task, node: second % 16, durationMs: 5 } as SkywardEvent);
      recorder.flush(undefined);
    }
    const metrics = recorder.metrics();
    expect(metrics.series).toHaveLength(32);
    for (const series of metrics.series) {
      expect(series.points.length).toBeLessThanOrEqual(720);
      // The whole run, from its first minutes to its last sample.
      expect((series.points[0]?.t ?? 0) - start).toBeLessThan(60_000);
      expect(series.points.at(-1)?.t).toBe(start + 7199 * 1000);
    }
    expect(metrics.tasksCompleted.length).toBeLessThanOrEqual(720);
    const events = recorder.events();
    expect(events.logs).toHaveLength(2000);
    expect(events.logs.at(-1)?.text).toBe("step 7199");
    const payload = recorder.pool(undefined);
    expect(payload.tasks).toEqual({ queued: 0, running: 0, completed: 7200, failed: 0, cancelled: 0 });
    expect(payload.lastId).toBe(7200);
    // Replay reaches back two minutes of batches; older asks the page to load the history again.
    expect(recorder.batchesAfter(7200 - 120)?.map((batch) => batch.id)).toEqual(
      Array.from({ length: 120 }, (_, index) => 7200 - 119 + index),
    );
    expect(recorder.batchesAfter(7200 - 121)).toBeUndefined();
    expect(recorder.batchesAfter(7200)).toEqual([]);
  });
});

describe("DashboardRecorder's history and stream together", () => {
  it("gives a page that loads the history, then follows the stream from its lastId, each log line and event once", () => {
    const recorder = new DashboardRecorder();
    const line = (text: string, timestamp: number): SkywardEvent => ({
      type: "log",
      timestamp,
      poolId,
      node: 0,
      worker: 0,
      stream: "stdout",
      line: text,
    });
    recorder.record(line("before the first batch", start));
    recorder.flush(undefined);
    // Printed after that batch went out, before the page asked for the history.
    recorder.record(line("between batches", start + 400));
    recorder.record({
      type: "node.lost",
      timestamp: start + 500,
      poolId,
      node: 0,
      instanceId: "i-0",
      reason: "gone",
    });
    const history = recorder.events();
    recorder.record(line("after the history", start + 600));
    recorder.flush(undefined);
    const followed = recorder.batchesAfter(history.lastId) ?? [];
    const seen = [...history.logs, ...followed.flatMap((batch) => batch.logs)].map((entry) => entry.text);
    expect(seen).toEqual(["before the first batch", "between batches", "lost: gone", "after the history"]);
    const events = [...history.events, ...followed.flatMap((batch) => batch.events)].map(
      (entry) => entry.text,
    );
    expect(events).toEqual(["lost: gone"]);
  });
});
