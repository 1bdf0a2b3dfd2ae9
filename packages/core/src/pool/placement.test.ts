import { describe, expect, it } from "vitest";
import { nextFreeNode } from "./placement.js";
import { AdaptiveSchedule } from "./schedule.js";
import { newNodeState } from "./task-record.js";
import type { WorkerConnection } from "./worker-connection.js";

/** Connected nodes with one nested slot each; `busy` ones have it taken. */
function nodes(count: number, busy: readonly number[] = []) {
  // Placement only asks whether a node has a connection: no frame is written here.
  const connected = {} as WorkerConnection;
  return Array.from({ length: count }, (_, index) => {
    const node = newNodeState(index, connected, {
      capacity: 1,
      workerSlots: 1,
      adaptive: false,
      nestedCapacity: 1,
      bounded: true,
    });
    if (busy.includes(index)) node.nestedRunning = 1;
    return node;
  });
}

describe("nextFreeNode: where a nested task goes", () => {
  it("goes to its parent's node last: another node with a free nested slot first", () => {
    const schedule = new AdaptiveSchedule();
    expect(nextFreeNode(schedule, nodes(3), 0, true, "", 0)?.index).toBe(1);
    expect(nextFreeNode(schedule, nodes(3), 1, true, "", 1)?.index).toBe(2);
    expect(nextFreeNode(schedule, nodes(3, [1, 2]), 0, true, "", 0)?.index).toBe(0);
    expect(nextFreeNode(schedule, nodes(3, [0, 1, 2]), 0, true, "", 0)).toBeUndefined();
  });

  it("takes the round robin's next free node when no node comes last", () => {
    const schedule = new AdaptiveSchedule();
    expect(nextFreeNode(schedule, nodes(3), 0, true, "")?.index).toBe(0);
    expect(nextFreeNode(schedule, nodes(3, [0]), 0, true, "")?.index).toBe(1);
  });
});

describe("nextFreeNode: a task that runs once", () => {
  it("takes a free worker slot only, never a prefetch slot", () => {
    const schedule = new AdaptiveSchedule();
    const connected = {} as WorkerConnection;
    // One worker slot and two prefetch slots; one task runs there.
    const node = newNodeState(0, connected, {
      capacity: 3,
      workerSlots: 1,
      adaptive: false,
      nestedCapacity: 1,
      bounded: true,
    });
    node.running.set("t1", {} as never);
    expect(nextFreeNode(schedule, [node], 0, false, "f")?.index).toBe(0);
    expect(nextFreeNode(schedule, [node], 0, false, "f", undefined, true)).toBeUndefined();
    node.running.clear();
    expect(nextFreeNode(schedule, [node], 0, false, "f", undefined, true)?.index).toBe(0);
  });
});
