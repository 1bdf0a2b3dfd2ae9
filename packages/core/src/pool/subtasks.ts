/**
 * Subtask routing (nested dispatch): a running task asks the client to run another function across
 * the pool; its outcome goes back to the parent's worker under the parent's wire id. Collection
 * operations never come here: the workers answer them (docs/protocol.md, "Distributed collections").
 */

import {
  CancelledError,
  FunctionNotFoundError,
  RemoteTaskError,
  SerializationError,
  TaskTimeoutError,
} from "../errors/errors.js";
import type { TaskMessage, WireValue } from "../protocol/protocol.js";
import type { TaskCallbacks, TaskRecord, TaskRequest, TaskTicket } from "./task-record.js";
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

/**
 * Routes subtask `message` of running task `parent`: it runs as a nested task through `runNested`;
 * the answer goes to the run that asked, under its wire id (a retried run has another). Each is a
 * child of the parent, cancelled with it.
 */
export function routeSubtask(
  parent: TaskRecord,
  message: Extract<TaskMessage, { t: "subtask" }>,
  runNested: (
    message: Extract<TaskMessage, { t: "subtask" }>,
    timeout: number | null,
    reply: (answer: SubtaskAnswer) => void,
    parentNode: number | undefined,
  ) => TaskTicket | undefined,
): void {
  const connection = parent.node?.connection;
  const wireId = parent.wireId;
  const reply = (answer: SubtaskAnswer) => {
    parent.children?.delete(message.sub);
    if (parent.done || !connection?.isOpen) return;
    sendAnswer(connection, wireId, message.sub, answer);
  };
  const ticket = runNested(message, parent.request.timeout, reply, parent.node?.index);
  if (!ticket) return;
  parent.children ??= new Map();
  parent.children.set(message.sub, ticket);
}

/**
 * Submits subtask `message` as a nested task (on the nodes' nested slots) with `timeout`, and calls
 * `reply` once with its outcome. Returns its ticket, or undefined when it failed at once.
 * `parentNode`: its parent's node, where it goes last (that worker fills its own slots itself).
 */
export function submitNestedTask(
  submit: (request: TaskRequest, callbacks: TaskCallbacks) => TaskTicket,
  message: Extract<TaskMessage, { t: "subtask" }>,
  timeout: number | null,
  reply: (answer: SubtaskAnswer) => void,
  parentNode?: number,
): TaskTicket | undefined {
  const failure = (error: Error, node: number) => reply(subtaskFailure(error, node));
  try {
    return submit(
      {
        ref: message.fn,
        args: message.args,
        kwargs: message.kwargs,
        timeout,
        stream: false,
        nested: true,
        ...(message.node !== null ? { node: message.node } : {}),
        ...(parentNode !== undefined ? { parentNode } : {}),
      },
      {
        result: (value) => reply({ t: "subresult", value: value as WireValue }),
        error: (error) => failure(error, (error as { node?: number }).node ?? -1),
      },
    );
  } catch (error) {
    failure(error as Error, -1);
    return undefined;
  }
}
