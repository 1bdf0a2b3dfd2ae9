/**
 * Promoting a copy after the holder's loss, tried again while it cannot be done yet. Each node here
 * answers `$replica` and `$promote` as docs/protocol.md ("Distributed collections") says a worker
 * does (`{"epoch", "seq"}` or `null`; the address it serves at), and can be stopped (it answers
 * nothing, as a SIGSTOPped worker) or lose its connection. The real faults are in provider-ssh's
 * ssh-collections-faults.test.ts.
 */
import { describe, expect, it } from "vitest";
import type { CollectionCancelMessage, CollectionOpMessage, WorkerMessage } from "../protocol/protocol.js";
import { failOver } from "./fail-over.js";
import type { HeadConnection } from "./remote.js";

class Node implements HeadConnection {
  isOpen = true;
  stopped = false;
  /**
   * What its next `$promote` meets: its connection closes under it, and the node is connected
   * again (`"reconnect"`, still holding its copy) or lost (`"lose"`).
   */
  promoteFault: "reconnect" | "lose" | undefined = undefined;
  readonly asked: unknown[][] = [];
  readonly #listeners = new Set<(message: WorkerMessage) => void>();
  readonly #held: CollectionOpMessage[] = [];
  #close: (value: unknown) => void = () => undefined;
  closed = new Promise<unknown>((resolve) => {
    this.#close = resolve;
  });

  constructor(
    readonly index: number,
    readonly copy: { epoch: number; seq: number } | null,
  ) {}

  get connection(): HeadConnection {
    return this;
  }

  send(message: CollectionOpMessage | CollectionCancelMessage): void {
    if (message.t !== "coll") return;
    if (this.stopped) this.#held.push(message);
    else this.#answer(message);
  }

  /** SIGCONT: what it was sent meanwhile is answered. */
  resume(): void {
    this.stopped = false;
    for (const message of this.#held.splice(0)) this.#answer(message);
  }

  lose(): void {
    this.isOpen = false;
    this.#close(undefined);
  }

  onMessage(listener: (message: WorkerMessage) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #answer(message: CollectionOpMessage): void {
    this.asked.push([...message.op]);
    const [op, , epoch] = message.op;
    if (op === "$promote" && this.promoteFault !== undefined) {
      const fault = this.promoteFault;
      this.promoteFault = undefined;
      this.lose();
      if (fault === "reconnect") {
        this.isOpen = true;
        this.closed = new Promise<unknown>((resolve) => {
          this.#close = resolve;
        });
      }
      return;
    }
    const value = op === "$replica" ? this.copy : { addr: `10.0.0.${this.index}`, port: 7000, epoch };
    queueMicrotask(() => {
      for (const listener of this.#listeners)
        listener({ t: "coll_answer", id: message.id, ok: true, value: value as never });
    });
  }
}

const quick = { askTimeoutMs: 50, backoffMs: 10, patienceMs: 5_000 };

describe("failOver", () => {
  it("promotes the copy of a node that answered nothing for a while, once it answers", async () => {
    const replica = new Node(1, { epoch: 0, seq: 40 });
    replica.stopped = true;
    const retries: string[] = [];
    const outcome = failOver(() => [replica], 0, 0, { ...quick, onRetry: (reason) => retries.push(reason) });
    await new Promise((resolve) => setTimeout(resolve, 200));
    replica.resume();
    const promoted = await outcome;
    expect(promoted).toMatchObject({ promoted: true, node: 1, address: { addr: "10.0.0.1" } });
    expect(retries[0]).toBe("node 1 did not say whether it holds a copy (no answer within 0.05 s)");
    // Each round fenced at a newer epoch, and the promotion is in the newest.
    const epochs = replica.asked.filter((op) => op[0] === "$replica").map((op) => op[1]);
    expect(epochs.length).toBeGreaterThan(1);
    expect(promoted.promoted && promoted.address.epoch).toBe(Math.max(...(epochs as number[])));
  });

  it("asks the same node again when its $promote failed (its connection closed under it)", async () => {
    const replica = new Node(1, { epoch: 0, seq: 7 });
    replica.promoteFault = "reconnect";
    expect(await failOver(() => [replica], 0, 0, quick)).toMatchObject({ promoted: true, node: 1 });
    expect(replica.asked.filter((op) => op[0] === "$promote")).toHaveLength(2);
  });

  it("falls to another node holding a copy as new when the chosen one is lost", async () => {
    const first = new Node(1, { epoch: 2, seq: 9 });
    const second = new Node(2, { epoch: 2, seq: 9 });
    first.promoteFault = "lose";
    // A long ask timeout: the closed connection, not a timeout, moves it on.
    const outcome = await failOver(() => [first, second], 0, 2, { ...quick, askTimeoutMs: 60_000 });
    expect(outcome).toMatchObject({ promoted: true, node: 2, address: { epoch: 3 } });
    expect(first.isOpen).toBe(false);
  });

  it("never promotes an older copy while a node that may hold a newer one is silent", async () => {
    const silent = new Node(1, { epoch: 0, seq: 50 });
    silent.stopped = true;
    const older = new Node(2, { epoch: 0, seq: 10 });
    const outcome = await failOver(() => [silent, older], 0, 0, { ...quick, patienceMs: 300 });
    expect(outcome).toMatchObject({ promoted: false, reason: expect.stringMatching(/node 1 did not say/) });
    expect(older.asked.some((op) => op[0] === "$promote")).toBe(false);
  });

  it("gives up at once, saying why, when no node holds a copy", async () => {
    const outcome = await failOver(() => [new Node(1, null), new Node(2, null)], 0, 0, quick);
    expect(outcome).toEqual({
      promoted: false,
      reason: "no other node holds a copy (node 1, node 2 answered that they hold none)",
    });
    expect(await failOver(() => [], 0, 0, quick)).toEqual({
      promoted: false,
      reason: "no other node is connected to hold a copy",
    });
  });
});
