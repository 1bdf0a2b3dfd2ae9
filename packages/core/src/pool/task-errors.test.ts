import { describe, expect, it } from "vitest";
import { CancelledError, RemoteTaskError } from "../errors/errors.js";
import { taskErrorOf } from "./task-errors.js";

const record = {
  id: "t7",
  request: { ref: "tasks:train", args: [], kwargs: {}, timeout: null, stream: false },
};
const error = (kind: string, type: string, message: string) =>
  ({ t: "error", id: "t7", kind, type, message, traceback: "", node: 1 }) as Parameters<
    typeof taskErrorOf
  >[1];

describe("taskErrorOf: a worker's error message as the task's error", () => {
  it("says why the worker cancelled a task on its own", () => {
    const cancelled = taskErrorOf(record, error("cancelled", "CancelledError", "the worker is stopping"));
    expect(CancelledError.isInstance(cancelled)).toBe(true);
    expect(cancelled.message).toBe("tasks:train (task t7) was cancelled on node 1: the worker is stopping");
  });

  it("keeps a raised exception's type, message and node", () => {
    const raised = taskErrorOf(record, error("exception", "ValueError", "bad input"));
    expect(RemoteTaskError.isInstance(raised)).toBe(true);
    expect(raised.message).toBe("ValueError: bad input (on node 1)");
  });
});
