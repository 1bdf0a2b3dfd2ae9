/**
 * The errors a task fails with: a worker's `error` message as the error the submitter's promise
 * rejects with (each `kind` has its own class; an exception the task raised is a `RemoteTaskError`,
 * or a command's failure), and a `submit` that could not be sent.
 */

import {
  CancelledError,
  ConnectionError,
  FunctionNotFoundError,
  RemoteTaskError,
  SerializationError,
  SkywardError,
  TaskTimeoutError,
  WorkerDiedError,
} from "../errors/errors.js";
import type { TaskMessage } from "../protocol/protocol.js";
import { commandFailedError } from "./commands.js";
import type { TaskRecord } from "./task-record.js";

/** The error task `record` failed with, from the worker's `error` message. */
export function taskErrorOf(
  record: Pick<TaskRecord, "id" | "request">,
  message: Extract<TaskMessage, { t: "error" }>,
): Error {
  const { ref } = record.request;
  switch (message.kind) {
    case "not_found":
      return new FunctionNotFoundError({
        taskId: record.id,
        ref,
        node: message.node,
        message: `${ref} not found on node ${message.node}: ${message.message}`,
      });
    case "serialization":
      return new SerializationError({
        taskId: record.id,
        side: "worker",
        message: `${ref} on node ${message.node}: ${message.message}`,
      });
    case "timeout": {
      // The worker's own figure: a @sky.function(timeout=…) may have replaced the pool's default.
      const reported = /timeout of ([0-9.]+) s/.exec(message.message)?.[1];
      const seconds = reported !== undefined ? Number(reported) : (record.request.timeout ?? 0);
      return new TaskTimeoutError({
        taskId: record.id,
        timeoutSeconds: seconds,
        message: `${ref} (task ${record.id}) timed out after ${seconds} s on node ${message.node}`,
      });
    }
    case "cancelled":
      // The client's own cancels fail the task before the worker answers: this one is the worker's
      // (it is stopping), and its reason is the user's only clue.
      return new CancelledError({
        taskId: record.id,
        message: `${ref} (task ${record.id}) was cancelled on node ${message.node}${message.message ? `: ${message.message}` : ""}`,
      });
    case "worker_died":
      return new WorkerDiedError({
        taskId: record.id,
        node: message.node,
        message: `The process running ${ref} (task ${record.id}) on node ${message.node} died: ${message.message}`,
      });
    default:
      return (
        commandFailedError({ taskId: record.id, ...message }) ??
        new RemoteTaskError({
          taskId: record.id,
          exceptionType: message.type,
          exceptionMessage: message.message,
          remoteTraceback: message.traceback,
          node: message.node,
        })
      );
  }
}

/**
 * The error of task `record` whose `submit` could not be written: an argument that cannot be sent
 * is a `SerializationError`; a lost connection stays what it is.
 */
export function sendError(record: Pick<TaskRecord, "id" | "request">, error: unknown): Error {
  return SkywardError.isInstance(error) && !ConnectionError.isInstance(error)
    ? new SerializationError({
        taskId: record.id,
        side: "client",
        message: `Cannot send the arguments of ${record.request.ref}: ${(error as Error).message}`,
        cause: error,
      })
    : (error as Error);
}
