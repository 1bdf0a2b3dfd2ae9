import { describe, expect, it } from "vitest";
import { beginNextWaiting } from "./placement.js";
import { overdueTasks } from "./task-deadlines.js";
import {
  beginRun,
  endRun,
  type NodeState,
  newNodeState,
  newTaskRecord,
  type TaskRecord,
} from "./task-record.js";
import type { WorkerConnection } from "./worker-connection.js";

/** A node whose worker runs `workerSlots` tasks at once and is sent `capacity` (the rest wait there). */
function node(workerSlots: number, capacity: number): NodeState {
  // The deadlines only read the node's records: no frame is written here.
  const connection = { offTask: () => undefined } as unknown as WorkerConnection;
  return newNodeState(0, connection, {
    capacity,
    workerSlots,
    adaptive: false,
    nestedCapacity: 2,
    bounded: true,
  });
}

function sent(on: NodeState, id: string, timeout: number | null): TaskRecord {
  const record = newTaskRecord(
    id,
    { ref: "tasks:work", args: [], kwargs: {}, timeout, stream: false },
    {
      result: () => undefined,
      error: () => undefined,
    },
    () => undefined,
  );
  beginRun(record, on);
  return record;
}

const ids = (records: TaskRecord[]) => records.map((record) => record.id);

describe("overdueTasks: the client's backstop for a worker that does not report a timeout", () => {
  it("counts a task's timeout from when it got a worker slot, not from when it was sent ahead", () => {
    const one = node(1, 4);
    const first = sent(one, "t1", 2);
    sent(one, "t2", 2);
    sent(one, "t3", 2);
    const sentAt = first.startedAt;
    // 13 s after they were all sent: the first ran past 2 + 10 s; the others still wait behind it.
    expect(ids(overdueTasks(one, sentAt + 13_000, 10))).toEqual(["t1"]);
    // The first ends: the second begins now, its clock starts now.
    beginNextWaiting(one, first);
    endRun(first, one);
    const begun = one.running.get("t2")!.begunAt;
    expect(begun).toBeGreaterThan(sentAt);
    expect(ids(overdueTasks(one, begun + 11_000, 10))).toEqual([]);
    expect(ids(overdueTasks(one, begun + 12_000, 10))).toEqual(["t2"]);
  });

  it("starts no waiting task's clock when a task that was itself waiting ends (cancelled)", () => {
    const one = node(1, 4);
    const first = sent(one, "t1", 2);
    const second = sent(one, "t2", 2);
    const third = sent(one, "t3", 2);
    beginNextWaiting(one, second);
    endRun(second, one);
    expect(third.begunAt).toBe(third.startedAt);
    expect(ids(overdueTasks(one, first.startedAt + 13_000, 10))).toEqual(["t1"]);
  });

  it("checks every task a worker runs at once, and none without a timeout", () => {
    const two = node(2, 4);
    const now = sent(two, "t1", 2).startedAt + 60_000;
    sent(two, "t2", null);
    sent(two, "t3", 2);
    expect(ids(overdueTasks(two, now, 10))).toEqual(["t1"]);
  });
});
