/**
 * The client's requests on the head's connection: each `coll` has an id of its own on that
 * connection, whichever part of the client sends it (a handle's operation, the pool's `$lost`
 * verdict), so an answer settles only the request it answers. The head here answers as
 * docs/protocol.md ("Distributed collections") says: `coll_answer` with the request's `id`, and a
 * blocking operation (`queue get`) only when it is satisfied.
 */
import { describe, expect, it } from "vitest";
import type { CollectionCancelMessage, CollectionOpMessage, WorkerMessage } from "../protocol/protocol.js";
import { failOver, tellNodeLost } from "./fail-over.js";
import { CLIENT_OWNER } from "./operation.js";
import { type HeadConnection, RemoteCollections } from "./remote.js";

/** A head holding one empty queue: `get` waits (never answered here), anything else answers null. */
class Head implements HeadConnection {
  readonly isOpen = true;
  readonly closed = new Promise<unknown>(() => undefined);
  readonly #listeners = new Set<(message: WorkerMessage) => void>();

  send(message: CollectionOpMessage | CollectionCancelMessage): void {
    if (message.t !== "coll" || message.op[2] === "get") return;
    queueMicrotask(() => {
      for (const listener of this.#listeners)
        listener({ t: "coll_answer", id: message.id, ok: true, value: null });
    });
  }

  /** How many listen to its messages now. */
  get listeners(): number {
    return this.#listeners.size;
  }

  onMessage(listener: (message: WorkerMessage) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

describe("RemoteCollections", () => {
  it("a handle's pending operation is not settled by the answer to the pool's $lost verdict", async () => {
    const head = new Head();
    const collections = new RemoteCollections(() => head);
    const get = collections.apply(CLIENT_OWNER, ["queue", "q", "get", null]);
    let settled = false;
    void get.answer.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    tellNodeLost(head, 1);
    // The verdict's answer has come (the pool's own next operation is answered after it).
    await collections.apply(CLIENT_OWNER, ["counter", "c", "value"]).answer;
    expect(settled).toBe(false);
    get.cancel("done");
  });

  it("lets go of the listener of each $replica/$promote ask once answered", async () => {
    const node = new Head();
    // The node answers null to $replica (it holds no copy): nothing to promote.
    expect(await failOver(() => [{ index: 1, connection: node }], 0, 0)).toMatchObject({ promoted: false });
    expect(node.listeners).toBe(0);
  });
});
