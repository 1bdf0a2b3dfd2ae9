/**
 * A detached pool's distributed collections on disk: at detach the store is frozen and its contents
 * go into the pool's state file, sealed like the workers' token (AES-256-GCM with the user's pools
 * key: the values are user data) in the same 0600 file; at attach they are opened and loaded into
 * the new client's store before any worker is reconnected. The worker side of the story — a task's
 * operations while no client is attached wait on its worker and go to the next client — is in
 * `skyward/worker.py` (`_parking`); docs/sessions.md, "Collections across detach", says what a task
 * sees.
 */

import {
  COLLECTION_REF,
  type CollectionStore,
  type CollectionsSnapshot,
  type Owner,
} from "../collections/store.js";
import {
  collectionFailure,
  type SubtaskAnswer,
  type SubtaskRunner,
  sendAnswer,
  type TaskTicket,
} from "../pool/task-manager.js";
import type { WorkerConnection } from "../pool/worker-connection.js";
import { decodeFrame, encodeFrame, type WireValue, type WorkerMessage } from "../protocol/protocol.js";
import { type DetachedPoolState, openToken, readPoolState, sealToken, writePoolState } from "./state.js";

/**
 * Freezes `store` (the pool is being detached: nothing changes from now on) and writes its contents
 * into pool `id`'s state file, sealed. Locks held by tasks are kept with them.
 */
export async function saveCollections(id: string, store: CollectionStore): Promise<void> {
  const snapshot = store.freeze(`pool ${id} was detached`);
  const state = await readPoolState(id);
  if (!state) throw new Error(`pool ${id}'s state file is gone`);
  const bytes = Buffer.concat(
    encodeFrame([{ t: "subresult", id: "collections", sub: 0, value: snapshot as unknown as WireValue }]),
  );
  await writePoolState({ ...state, collections: await sealToken(bytes.toString("base64")) });
}

/** The collections a detached pool's state file holds (none: an empty snapshot). */
export async function openCollections(state: DetachedPoolState): Promise<CollectionsSnapshot> {
  const sealed = state.collections;
  if (sealed === undefined) return { dicts: [], sets: [], counters: [], queues: [], locks: [] };
  const bytes = Buffer.from(await openToken(sealed), "base64");
  const [message] = decodeFrame(bytes);
  return (message as unknown as { value: CollectionsSnapshot }).value;
}

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
