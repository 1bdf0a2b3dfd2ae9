/**
 * The subtasks of the tasks an attaching client adopts: their nested tasks run on the attached pool.
 * Their collection operations no longer come here — the head node's worker answers them, before,
 * during and after a detach (docs/sessions.md, "Collections across detach"); a worker of an older
 * version still sends them, and they are answered from `store`.
 */

import { COLLECTION_REF, type CollectionStore, type Owner } from "../collections/store.js";
import {
  collectionFailure,
  type SubtaskAnswer,
  type SubtaskRunner,
  sendAnswer,
  type TaskTicket,
} from "../pool/task-manager.js";
import type { WorkerConnection } from "../pool/worker-connection.js";
import type { WorkerMessage } from "../protocol/protocol.js";

/**
 * Answers, on `connection` (an attaching client's own connection to a worker, which adopts the
 * tasks still running there), the subtasks of those tasks: their collection operations (the ones
 * their worker kept while no client was attached, and any they make until they end) from `store`,
 * and their nested tasks through `nested` once the attached pool is up (refused with a
 * `CancelledError` if it never comes up). A task's nested tasks still running when it ends are
 * cancelled. `ownerOf` maps a task's wire id to the owner its locks are held by. Returns a function
 * that stops.
 */
export function serveCollections(
  connection: WorkerConnection,
  store: CollectionStore,
  ownerOf: (wireId: string) => Owner,
  nested: Promise<SubtaskRunner | undefined> = Promise.resolve(undefined),
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
    if (message.t !== "subtask") return;
    const { id, sub } = message;
    if (typeof id !== "string") return;
    const reply = (answer: SubtaskAnswer) => {
      children.get(id)?.delete(sub);
      // Not once frozen: a wait dropped by the detach is asked again of the next client, and a
      // nested task's parent sees its connection lost.
      if (connection.isOpen && !store.frozen && !ended.has(id)) sendAnswer(connection, id, sub, answer);
    };
    if (message.fn !== COLLECTION_REF) {
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
      return;
    }
    // Frozen (this pool is being detached again): left unanswered, the worker keeps it for the next
    // client when this connection closes.
    if (store.frozen) return;
    store.apply(ownerOf(id), message.args).answer.then(
      (value) => reply({ t: "subresult", value }),
      (error: Error) => reply(collectionFailure(error)),
    );
  });
}
