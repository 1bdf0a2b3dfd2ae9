import { describe, expect, it } from "vitest";
import { TaskInterruptedError } from "../errors/errors.js";
import { decideRetry, type InterruptedTask, interruptedError } from "./task-retry.js";

const base: InterruptedTask = {
  id: "t1",
  ref: "tasks:train",
  attempt: 1,
  retries: 3,
  stream: false,
  itemsDelivered: 0,
  restartStream: false,
  inputConsumed: false,
};

describe("retrying a task whose node was lost", () => {
  it("runs it again while it has retries left, per task", () => {
    expect(decideRetry(base)).toEqual({ retry: true });
    expect(decideRetry({ ...base, attempt: 3 })).toEqual({ retry: true });
    expect(decideRetry({ ...base, attempt: 4 })).toEqual({ retry: false, reason: "retries-exhausted" });
  });

  it("never runs twice a task that opted out", () => {
    expect(decideRetry({ ...base, retries: 0 })).toEqual({ retry: false, reason: "retry-disabled" });
  });

  it("restarts a stream only before its first item, unless it opted in", () => {
    expect(decideRetry({ ...base, stream: true })).toEqual({ retry: true });
    expect(decideRetry({ ...base, stream: true, itemsDelivered: 2 })).toEqual({
      retry: false,
      reason: "stream-started",
    });
    expect(decideRetry({ ...base, stream: true, itemsDelivered: 2, restartStream: true })).toEqual({
      retry: true,
    });
  });

  it("does not run again a task that read from an input stream", () => {
    expect(decideRetry({ ...base, inputConsumed: true })).toEqual({ retry: false, reason: "input-consumed" });
  });

  it("explains itself in a typed error", () => {
    const error = interruptedError({ ...base, stream: true, itemsDelivered: 2 }, "stream-started", 1, "eof");
    expect(TaskInterruptedError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ taskId: "t1", node: 1, reason: "stream-started", attempts: 1 });
    expect(error.message).toMatch(/node 1 was lost \(eof\).*yielded 2 items.*restartStream/);
  });
});
