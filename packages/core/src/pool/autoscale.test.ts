import { describe, expect, it } from "vitest";
import { Autoscaler, type PoolLoad } from "./autoscale.js";
import { AdaptiveSchedule, MAX_PREFETCH_PER_SLOT, PREFETCH_BUDGET_MS } from "./schedule.js";

const settings = { cooldownMs: 30_000, idleTimeoutMs: 60_000 };
const load = (overrides: Partial<PoolLoad>): PoolLoad => ({
  actual: 1,
  starting: 0,
  queued: 0,
  slotsPerNode: 1,
  idleSince: [],
  ...overrides,
});

describe("Autoscaler", () => {
  it("grows on queued tasks by ceil(queued / slots), within max, only after the cooldown (counted from start)", () => {
    const scaler = new Autoscaler(settings, 0);
    const bounds = { min: 1, max: 8 };
    expect(scaler.decide(load({ queued: 5 }), bounds, 1, 10_000)).toBeUndefined();
    expect(scaler.decide(load({ queued: 5, slotsPerNode: 2 }), bounds, 1, 30_000)).toEqual({
      to: 4,
      reason: "5 tasks queued",
    });
    // The cooldown starts again at each growth.
    expect(scaler.decide(load({ actual: 4, queued: 50 }), bounds, 4, 50_000)).toBeUndefined();
    expect(scaler.decide(load({ actual: 4, queued: 50 }), bounds, 4, 60_000)).toMatchObject({ to: 8 });
  });

  it("counts nodes still starting against the queue: no growth for tasks they will take", () => {
    const scaler = new Autoscaler(settings, 0);
    const bounds = { min: 0, max: 8 };
    expect(scaler.decide(load({ actual: 2, starting: 1, queued: 1 }), bounds, 2, 60_000)).toBeUndefined();
    expect(scaler.decide(load({ actual: 2, starting: 1, queued: 3 }), bounds, 2, 60_000)).toMatchObject({
      to: 4,
    });
  });

  it("starts a node at once when a task waits on a pool scaled to zero", () => {
    const scaler = new Autoscaler(settings, 0);
    expect(scaler.decide(load({ actual: 0, queued: 1 }), { min: 0, max: 3 }, 0, 1)).toEqual({
      to: 1,
      reason: "1 task waiting and no node is up",
    });
  });

  it("shrinks by the nodes idle for the idle timeout, never below min, and not twice for the same nodes", () => {
    const scaler = new Autoscaler(settings, 0);
    const bounds = { min: 1, max: 3 };
    const idle = load({ actual: 3, idleSince: [0, 30_000, 59_000] });
    expect(scaler.decide(idle, bounds, 3, 60_000)).toEqual({ to: 2, reason: "1 node idle for 60 s" });
    expect(scaler.decide(idle, bounds, 2, 60_000)).toBeUndefined();
    expect(scaler.decide(idle, bounds, 2, 200_000)).toEqual({ to: 1, reason: "3 nodes idle for 60 s" });
    expect(scaler.decide(idle, { min: 0, max: 3 }, 2, 200_000)).toMatchObject({ to: 0 });
    // Queued work wins over idleness.
    expect(scaler.decide({ ...idle, queued: 1 }, bounds, 3, 200_000)).toBeUndefined();
  });
});

describe("AdaptiveSchedule", () => {
  it("holds back a function not seen yet, prefetches deeply while tasks are short, not while long", () => {
    const schedule = new AdaptiveSchedule();
    expect(schedule.limit(1, "m:short")).toBe(1);
    schedule.observe("m:short", 0, 0.05, 1, 1, 0);
    expect(schedule.limit(1, "m:short")).toBe(1 + MAX_PREFETCH_PER_SLOT);
    expect(schedule.limit(2, "m:short")).toBe(2 + 2 * MAX_PREFETCH_PER_SLOT);
    schedule.observe("m:long", 0, 1000, 1, 1, 0);
    expect(schedule.limit(1, "m:long")).toBe(1);
    expect(schedule.isLong("m:long")).toBe(true);
    schedule.observe("m:medium", 0, PREFETCH_BUDGET_MS / 4, 1, 1, 0);
    expect(schedule.limit(1, "m:medium")).toBe(1 + 4);
  });

  it("lets one late result move a short function's estimate only a little", () => {
    const schedule = new AdaptiveSchedule();
    schedule.observe("m:f", 0, 0.1, 1, 1, 0);
    schedule.observe("m:f", 0, 500, 1, 1, 0);
    expect(schedule.estimateMs("m:f")).toBeCloseTo(0.1 + 0.2 * (2 * 0.1 + 1 - 0.1), 6);
    expect(schedule.isLong("m:f")).toBe(false);
  });

  it("measures a task that waited on the worker by the gap between results, not by its time since sent", () => {
    const schedule = new AdaptiveSchedule();
    // 50 ms since sent, but it queued behind others: results come 1 ms apart on a 1-slot node.
    schedule.observe("m:f", 0, 50, 10, 1, 49);
    expect(schedule.estimateMs("m:f")).toBe(1);
  });
});
