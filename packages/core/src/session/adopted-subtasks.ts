/**
 * The subtasks of the tasks an attaching client adopts: their nested tasks run on the attached pool.
 * Their collection operations never come here — the head node's worker answers them, before,
 * during and after a detach (docs/sessions.md, "Collections across detach").
 */

import { type SubtaskAnswer, type SubtaskRunner, sendAnswer, type TaskTicket } from "../pool/task-manager.js";
import type { WorkerConnection } from "../pool/worker-connection.js";
import type { WorkerMessage } from "../protocol/protocol.js";

/**
 * Answers, on `connection` (an attaching client's own connection to a worker, which adopts the
 * tasks still running there), the nested tasks those tasks ask for, through `nested` once the
 * attached pool is up (refused with a `CancelledError` if it never comes up). A task's nested tasks
 * still running when it ends are cancelled. Returns a function that stops.
 */
export function serveAdoptedSubtasks(
  connection: WorkerConnection,
  nested: Promise<SubtaskRunner | undefined>,
): () => void {
  // The nested tasks running for each adopted task (by wire id), cancelled when it ends.
  const children = new Map<string, Map<number, TaskTicket>>();
  const ended = new Set<string>();
  return connection.onMessage((message: WorkerMessage) => {
    const wireId = (message as { id?: unknown }).id;
    if (
      (message.t === "result" || message.t === "end" || message.t === "error") &&
      typeof wireId === "string"
    ) {
      ended.add(wireId);
      const running = children.get(wireId);
      children.delete(wireId);
      for (const ticket of running?.values() ?? []) ticket.cancel("its parent task ended");
      return;
    }
    if (message.t === "subcancel" && typeof wireId === "string") {
      const ticket = children.get(wireId)?.get(message.sub);
      children.get(wireId)?.delete(message.sub);
      ticket?.cancel("its parent task cancelled it");
      return;
    }
    if (message.t !== "subtask") return;
    const { id, sub } = message;
    if (typeof id !== "string") return;
    const reply = (answer: SubtaskAnswer) => {
      children.get(id)?.delete(sub);
      if (connection.isOpen && !ended.has(id)) sendAnswer(connection, id, sub, answer);
    };
    void nested.then((run) => {
      if (ended.has(id)) return;
      if (!run) {
        reply({
          t: "suberror",
          kind: "cancelled",
          type: "CancelledError",
          message: `task ${id} was picked up by sky.attach, whose pool did not start: its nested task (${message.fn}) cannot run`,
          traceback: "",
          node: -1,
        });
        return;
      }
      const ticket = run(message, reply);
      if (!ticket) return;
      const mine = children.get(id) ?? new Map<number, TaskTicket>();
      children.set(id, mine);
      mine.set(sub, ticket);
    });
  });
}
