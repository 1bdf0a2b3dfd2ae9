import { describe, expect, it } from "vitest";
import { TaskInterruptedError } from "../errors/errors.js";
import { EventHub } from "../observe/events.js";
import type { ClientMessage } from "../protocol/protocol.js";
import { TaskManager } from "./task-manager.js";
import type { WorkerConnection } from "./worker-connection.js";

/** The part of a worker connection the task manager uses, recording what it would write. */
function connection(): { connection: WorkerConnection; sent: ClientMessage[] } {
  const sent: ClientMessage[] = [];
  const fake = {
    isOpen: true,
    roundTripMs: 0,
    onMessage: () => () => undefined,
    onTask: () => undefined,
    offTask: () => undefined,
    send: (message: ClientMessage) => sent.push(message),
    sendIfOpen: (message: ClientMessage) => sent.push(message) > 0,
  };
  return { connection: fake as unknown as WorkerConnection, sent };
}

describe("TaskManager: a node lost before a task's submit was written", () => {
  it("runs the task elsewhere whatever its retries: it never reached the worker", async () => {
    const manager = new TaskManager({ poolId: "p", hub: new EventHub(), retryOnInterruption: 0 });
    try {
      const first = connection();
      manager.attach(0, first.connection, 1, 1);
      const errors: Error[] = [];
      const readying: number[] = [];
      manager.submit(
        { ref: "m:f", args: [], kwargs: {}, timeout: null, stream: false },
        {
          error: (error) => errors.push(error),
          // On node 0 its submit waits (a remote reference moving there); on node 1 it goes at once.
          readying: (node) => {
            readying.push(node);
            return node === 0 ? new Promise<void>(() => undefined) : undefined;
          },
        },
      );
      expect(readying).toEqual([0]);
      manager.detach(0, "connection lost");
      expect(errors).toEqual([]);
      const second = connection();
      manager.attach(1, second.connection, 1, 1);
      expect(readying).toEqual([0, 1]);
      expect(first.sent).toEqual([]);
      expect(second.sent.map((message) => message.t)).toEqual(["submit"]);
      // A task whose submit was written, and may have started, still fails as retries off say.
      manager.detach(1, "connection lost");
      expect(errors).toHaveLength(1);
      expect(TaskInterruptedError.isInstance(errors[0])).toBe(true);
    } finally {
      manager.close("test over");
    }
  });
});
