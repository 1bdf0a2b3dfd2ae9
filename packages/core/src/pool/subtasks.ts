/**
 * Subtask routing (nested dispatch): a running task asks the client to run another function across
 * the pool; its outcome goes back to the parent's worker under the parent's wire id, and a
 * collection operation (`COLLECTION_REF`) is answered by the pool's collection store instead.
 */

import type { CollectionStore } from "../collections/store.js";
import {
  CancelledError,
  FunctionNotFoundError,
  RemoteTaskError,
  SerializationError,
  TaskTimeoutError,
} from "../errors/errors.js";
import type { TaskMessage, WireValue } from "../protocol/protocol.js";
import type { TaskTicket } from "./task-record.js";
import type { WorkerConnection } from "./worker-connection.js";

/**
 * Runs a nested task on a pool's task manager for a task it has no record of: those an attached
 * pool picked up (`attach`), whose subtasks reach the attaching client's own connections. Returns
 * its ticket, or undefined when it failed at once (`reply` was called).
 */
export type SubtaskRunner = (
  message: Extract<TaskMessage, { t: "subtask" }>,
  reply: (answer: SubtaskAnswer) => void,
) => TaskTicket | undefined;

/** A subtask's outcome, to be sent to its parent's worker under the parent's wire id ({@link sendAnswer}). */
export type SubtaskAnswer =
  | { readonly t: "subresult"; readonly value: WireValue }
  | {
      readonly t: "suberror";
      readonly kind: string;
      readonly type: string;
      readonly message: string;
      readonly traceback: string;
      readonly node: number;
    };

/**
 * Sends `answer` to the worker of the task with wire id `parentWireId`: a value that cannot be
 * encoded goes as a `SerializationError` instead, so the parent never waits forever.
 */
export function sendAnswer(
  connection: WorkerConnection,
  parentWireId: string,
  sub: number,
  answer: SubtaskAnswer,
): void {
  try {
    connection.send({ ...answer, id: parentWireId, sub } as Parameters<WorkerConnection["send"]>[0]);
  } catch (error) {
    connection.send({
      t: "suberror",
      id: parentWireId,
      sub,
      kind: "serialization",
      type: "SerializationError",
      message: (error as Error).message,
      traceback: "",
      node: -1,
    });
  }
}

/** A collection operation's error as its task sees it (the Python type it names, else the error's). */
export function collectionFailure(error: Error): SubtaskAnswer {
  return {
    t: "suberror",
    kind: "exception",
    type: (error as { pythonType?: string }).pythonType ?? error.name,
    message: error.message,
    traceback: "",
    node: -1,
  };
}

/**
 * Starts collection operation `message` for the task `ownerId` (the owner of the locks it takes)
 * and calls `reply` once with its answer. Returns the ticket that cancels it.
 */
export function applyCollectionOperation(
  collections: CollectionStore,
  ownerId: string,
  message: Extract<TaskMessage, { t: "subtask" }>,
  reply: (answer: SubtaskAnswer) => void,
): TaskTicket {
  const pending = collections.apply(ownerId, message.args);
  pending.answer.then(
    (value) => reply({ t: "subresult", value }),
    (error: Error) => reply(collectionFailure(error)),
  );
  return { id: `${ownerId}/${message.sub}`, cancel: (reason) => pending.cancel(reason ?? "cancelled") };
}

/** A nested task's failure as its parent sees it: the kind and type the worker raises again. */
export function subtaskFailure(error: Error, node: number): SubtaskAnswer {
  const kind = RemoteTaskError.isInstance(error)
    ? "exception"
    : FunctionNotFoundError.isInstance(error)
      ? "not_found"
      : SerializationError.isInstance(error)
        ? "serialization"
        : TaskTimeoutError.isInstance(error)
          ? "timeout"
          : CancelledError.isInstance(error)
            ? "cancelled"
            : "worker_died";
  return {
    t: "suberror",
    kind,
    type: RemoteTaskError.isInstance(error) ? error.exceptionType : error.name,
    message: RemoteTaskError.isInstance(error) ? error.exceptionMessage : error.message,
    traceback: RemoteTaskError.isInstance(error) ? error.remoteTraceback : "",
    node,
  };
}
