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
 * tasks still running there), the collection operations of those tasks: the ones their worker kept
 * while no client was attached, and any they make until they end. Their nested tasks are refused
 * (`CancelledError`). `ownerOf` maps a task's wire id to
 * the owner its locks are held by. Returns a function that stops.
 */
export function serveCollections(
  connection: WorkerConnection,
  store: CollectionStore,
  ownerOf: (wireId: string) => Owner,
): () => void {
  return connection.onMessage((message: WorkerMessage) => {
    if (message.t !== "subtask") return;
    const { id, sub } = message;
    if (typeof id !== "string") return;
    const reply = (answer: Parameters<WorkerConnection["send"]>[0]) => {
      // Not once frozen: a wait dropped by the detach is asked again of the next client.
      if (connection.isOpen && !store.frozen) connection.send(answer);
    };
    if (message.fn !== COLLECTION_REF) {
      // Nested dispatch from an adopted task: refused rather than left unanswered (its task would
      // wait forever).
      reply({
        t: "suberror",
        id,
        sub,
        kind: "cancelled",
        type: "CancelledError",
        message: `task ${id} was picked up by sky.attach, which runs no nested task (${message.fn}) for it`,
        traceback: "",
        node: -1,
      });
      return;
    }
    // Frozen (this pool is being detached again): left unanswered, the worker keeps it for the next
    // client when this connection closes.
    if (store.frozen) return;
    store.apply(ownerOf(id), message.args).answer.then(
      (value) => reply({ t: "subresult", id, sub, value }),
      (error: Error) =>
        reply({
          t: "suberror",
          id,
          sub,
          kind: "exception",
          type: (error as { pythonType?: string }).pythonType ?? error.name,
          message: error.message,
          traceback: "",
          node: -1,
        }),
    );
  });
}
