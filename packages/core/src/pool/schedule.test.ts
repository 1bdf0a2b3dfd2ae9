import { describe, expect, it } from "vitest";
import {
  AdaptiveSchedule,
  MAX_LINK_PREFETCH_PER_NODE,
  MAX_PREFETCH_PER_SLOT,
  PREFETCH_BUDGET_MS,
} from "./schedule.js";

/** A schedule that has learnt `ref` takes `ms` per task (one result, on a node with nothing queued). */
function learnt(ref: string, ms: number, roundTripMs = 0): AdaptiveSchedule {
  const schedule = new AdaptiveSchedule();
  schedule.observe(ref, 0, ms + roundTripMs, 1, 1, 0, roundTripMs);
  return schedule;
}

describe("AdaptiveSchedule: the in-flight window follows the link", () => {
  it("gives a near node its slots and the prefetch budget's worth, as before", () => {
    const schedule = learnt("f", 1);
    expect(schedule.limit(1, "f")).toBe(1 + PREFETCH_BUDGET_MS);
    expect(schedule.limit(1, "f", 0)).toBe(schedule.limit(1, "f"));
  });

  it("adds one round trip's worth of tasks for a far node: 40 ms at 1 ms a task is 40 more", () => {
    const schedule = learnt("f", 1);
    expect(schedule.limit(1, "f", 40) - schedule.limit(1, "f", 0)).toBe(40);
    expect(schedule.limit(2, "f", 40) - schedule.limit(2, "f", 0)).toBe(80);
  });

  it("bounds the link's share per node, and the budget's per slot", () => {
    const schedule = learnt("tiny", 0.001);
    expect(schedule.limit(1, "tiny", 0)).toBe(1 + MAX_PREFETCH_PER_SLOT);
    expect(schedule.limit(1, "tiny", 150)).toBe(1 + MAX_PREFETCH_PER_SLOT + MAX_LINK_PREFETCH_PER_NODE);
  });

  it("takes the round trip off a task's time: a far node does not make short tasks look long", () => {
    const far = learnt("f", 2, 150);
    expect(far.estimateMs("f")).toBe(2);
    expect(far.isLong("f")).toBe(false);
    // Without the round trip the same result would read as a 152 ms task, held back like a long one.
    const unaware = new AdaptiveSchedule();
    unaware.observe("f", 0, 152, 1, 1, 0);
    expect(unaware.isLong("f")).toBe(true);
  });

  it("measures a task that waited from when it got its slot, even as the last of a burst", () => {
    const schedule = learnt("f", 1, 40);
    // Sent at 0 behind 99 others to a node 40 ms away: its slot came with its predecessor's result
    // at 139, its own result at 140, with nothing else left on the node.
    schedule.observe("f", 0, 140, 1, 1, 139, 40, 139);
    expect(schedule.estimateMs("f")).toBe(1);
    // Measured from its send it reads as a 100 ms task, and the next burst gets a narrower window.
    const fromSend = learnt("f", 1, 40);
    fromSend.observe("f", 0, 140, 1, 1, 139, 40);
    expect(fromSend.estimateMs("f")).toBeGreaterThan(1);
    expect(fromSend.limit(1, "f", 40)).toBeLessThan(schedule.limit(1, "f", 40));
  });

  it("holds an unknown function to the node's slots however far the node is", () => {
    expect(new AdaptiveSchedule().limit(4, "unseen", 100)).toBe(4);
  });
});
