import { describe, expect, it } from "vitest";
import { CancelledError, ConfigurationError } from "../errors/errors.js";
import { CollectionOpError, CollectionStore, keyOf } from "./store.js";

const settledState = async (promise: Promise<unknown>) =>
  Promise.race([
    promise.then(() => "settled"),
    new Promise((resolve) => setTimeout(() => resolve("pending"), 20)),
  ]);

describe("CollectionStore", () => {
  it("keeps None as a value and tells a missing key apart", async () => {
    const store = new CollectionStore({ enabled: true });
    await store.apply("t1", ["dict", "d", "set", "k", null]).answer;
    expect(await store.apply("t1", ["dict", "d", "get", "k"]).answer).toEqual([true, null]);
    expect(await store.apply("t1", ["dict", "d", "get", "other"]).answer).toEqual([false, null]);
    expect(await store.apply("t1", ["dict", "d", "pop", "k"]).answer).toEqual([true, null]);
    expect(await store.apply("t1", ["dict", "d", "has", "k"]).answer).toBe(false);
  });

  it("compares keys by value, whatever the order of an object's fields", () => {
    expect(keyOf({ a: 1, b: [2n, new Uint8Array([1])] })).toBe(keyOf({ b: [2n, new Uint8Array([1])], a: 1 }));
    expect(keyOf(1)).not.toBe(keyOf("1"));
  });

  it("makes keys Python holds equal one key: True, 1 and 1.0; an int past 2^53 and its float", () => {
    expect(keyOf(true)).toBe(keyOf(1));
    expect(keyOf(false)).toBe(keyOf(0));
    expect(keyOf(-0)).toBe(keyOf(0)); // -0.0 == 0 in Python
    expect(keyOf(2n ** 60n)).toBe(keyOf(2 ** 60)); // 2**60 == 2.0**60
    expect(keyOf(10n ** 20n)).toBe(keyOf(1e20)); // 1e20 is exactly 10**20
    expect(keyOf(10n ** 300n)).not.toBe(keyOf(1e300)); // 1e300 is not exactly 10**300
    expect(keyOf([true, 2])).toBe(keyOf([1, 2n])); // (True, 2) == (1, 2)
    expect(keyOf(0.5)).not.toBe(keyOf(1));
    expect(keyOf(Number.NaN)).toBe(keyOf(Number.NaN)); // one NaN key: identity does not cross the wire
    expect(keyOf(Number.POSITIVE_INFINITY)).not.toBe(keyOf(Number.NEGATIVE_INFINITY));
    // str, bytes and numbers stay apart, as in Python ("1" != b"1" != 1).
    const distinct = [1, "1", new TextEncoder().encode("1"), "true", null, [1], { $n: "1" }, "$n"];
    expect(new Set(distinct.map(keyOf)).size).toBe(distinct.length);
  });

  it("keeps a dict's first key and a set's first member when an equal one comes (Python's dict and set)", async () => {
    const store = new CollectionStore({ enabled: true });
    const op = async (...request: unknown[]) => store.apply("t", request as never).answer;
    await op("dict", "d", "set", 1, "int");
    await op("dict", "d", "set", true, "bool");
    await op("dict", "d", "update", [
      [1.0, "float"],
      [[1, 2], "tuple"],
    ]);
    await op("dict", "d", "set", [true, 2n], "tuple again");
    expect(await op("dict", "d", "len")).toBe(2);
    expect(await op("dict", "d", "items")).toEqual([
      [1, "float"],
      [[1, 2], "tuple again"],
    ]);
    expect(await op("dict", "d", "get", true)).toEqual([true, "float"]);
    expect(await op("dict", "d", "has", "1")).toBe(false);
    expect(await op("dict", "d", "pop", 1)).toEqual([true, "float"]);
    expect(await op("dict", "d", "has", true)).toBe(false);
    expect(await op("set", "s", "add", true)).toBe(true);
    expect(await op("set", "s", "add", 1)).toBe(false);
    expect(await op("set", "s", "add", 1.0)).toBe(false);
    expect(await op("set", "s", "add", "1")).toBe(true);
    expect(await op("set", "s", "values")).toEqual([true, "1"]);
    expect(await op("set", "s", "discard", 1)).toBe(true);
    expect(await op("set", "s", "has", true)).toBe(false);
  });

  it("counts exactly past 2^53 (a bigint) and resets in one step", async () => {
    const store = new CollectionStore({ enabled: true });
    await store.apply("t", ["counter", "c", "reset", Number.MAX_SAFE_INTEGER]).answer;
    expect(await store.apply("t", ["counter", "c", "increment", 2]).answer).toBe(
      BigInt(Number.MAX_SAFE_INTEGER) + 2n,
    );
    expect(await store.apply("t", ["counter", "c", "decrement", 2]).answer).toBe(Number.MAX_SAFE_INTEGER);
    await expect(store.apply("t", ["counter", "c", "increment", 1.5]).answer).rejects.toThrow(
      CollectionOpError,
    );
  });

  it("hands a put to the longest-waiting taker; a get times out with nothing", async () => {
    const store = new CollectionStore({ enabled: true });
    const first = store.apply("a", ["queue", "q", "get", null]);
    const second = store.apply("b", ["queue", "q", "get", null]);
    await store.apply("c", ["queue", "q", "put", "x"]).answer;
    expect(await first.answer).toEqual([true, "x"]);
    expect(await settledState(second.answer)).toBe("pending");
    expect(await store.apply("d", ["queue", "other", "get", 0.01]).answer).toEqual([false, null]);
    second.cancel("gone");
    await expect(second.answer).rejects.toThrow(CancelledError);
    await store.apply("c", ["queue", "q", "put", "y"]).answer;
    expect(await store.apply("c", ["queue", "q", "len"]).answer).toBe(1); // the cancelled taker took nothing
  });

  it("lets a barrier's n callers through together, round after round", async () => {
    const store = new CollectionStore({ enabled: true });
    for (let round = 0; round < 3; round += 1) {
      const early = [
        store.apply("a", ["barrier", "b", "wait", 3, null]),
        store.apply("b", ["barrier", "b", "wait", 3, null]),
      ];
      expect(await settledState(early[0]!.answer)).toBe("pending");
      const last = await store.apply("c", ["barrier", "b", "wait", 3, null]).answer;
      expect(last).toBe(2);
      expect(await Promise.all(early.map((pending) => pending.answer))).toEqual([0, 1]);
    }
    await expect(
      (async () => {
        store.apply("a", ["barrier", "m", "wait", 2, null]);
        return store.apply("b", ["barrier", "m", "wait", 3, null]).answer;
      })(),
    ).rejects.toThrow(/waiting for 2 callers/);
  });

  it("gives a lock to one holder at a time, times out, and releases an ended holder's locks", async () => {
    const store = new CollectionStore({ enabled: true });
    expect(await store.apply("a", ["lock", "l", "acquire", null]).answer).toBe(true);
    expect(await store.apply("b", ["lock", "l", "acquire", 0.01]).answer).toBe(false);
    const waiting = store.apply("b", ["lock", "l", "acquire", null]);
    await expect(store.apply("b", ["lock", "l", "release"]).answer).rejects.toThrow(/held by another/);
    store.ownerEnded("a");
    expect(await waiting.answer).toBe(true);
    expect(await store.apply("c", ["lock", "l", "locked"]).answer).toBe(true);
    await store.apply("b", ["lock", "l", "release"]).answer;
    expect(await store.apply("c", ["lock", "l", "locked"]).answer).toBe(false);
    // A waiter whose task ended is skipped.
    await store.apply("a", ["lock", "l", "acquire", null]).answer;
    const gone = store.apply("x", ["lock", "l", "acquire", null]);
    const next = store.apply("y", ["lock", "l", "acquire", null]);
    store.ownerEnded("x");
    await store.apply("a", ["lock", "l", "release"]).answer;
    expect(await next.answer).toBe(true);
    await expect(gone.answer).rejects.toThrow(CancelledError);
  });

  it("refuses everything, naming options.cluster, when collections are off", async () => {
    const store = new CollectionStore({ enabled: false });
    await expect(store.apply("t", ["counter", "c", "value"]).answer).rejects.toThrow(ConfigurationError);
    await expect(store.apply("t", ["counter", "c", "value"]).answer).rejects.toThrow(/options\.cluster/);
    expect(() => store.checkEnabled()).toThrow(/options\.cluster/);
  });

  it("rejects every pending wait when the pool closes, and refuses new operations", async () => {
    const store = new CollectionStore({ enabled: true });
    const waiting = store.apply("client", ["queue", "q", "get", null]);
    store.close("the pool is shutting down");
    await expect(waiting.answer).rejects.toThrow(/shutting down/);
    await expect(store.apply("client", ["counter", "c", "value"]).answer).rejects.toThrow(CancelledError);
  });

  it("freezes for a detach and restores in the next client: contents, task-held locks, no waits", async () => {
    const store = new CollectionStore({ enabled: true });
    await store.apply("t1", ["dict", "d", "set", ["k", 1], new Uint8Array([7])]).answer;
    await store.apply("t1", ["set", "s", "add", 2n ** 70n]).answer;
    await store.apply("t1", ["counter", "c", "increment", 3]).answer;
    for (const item of ["a", "b", "c"]) await store.apply("t1", ["queue", "q", "put", item]).answer;
    await store.apply("t1", ["queue", "q", "get", 0]).answer; // "a" is taken: not in the snapshot
    await store.apply("t1", ["lock", "held", "acquire", null]).answer;
    await store.apply("client:5b0e", ["lock", "mine", "acquire", null]).answer;
    const waiting = store.apply("t2", ["queue", "empty", "get", null]);
    const snapshot = store.freeze("pool p was detached");
    expect(store.frozen).toBe(true);
    expect(snapshot.queues).toEqual([
      ["q", ["b", "c"]],
      ["empty", []],
    ]);
    expect(snapshot.locks).toEqual([["held", "t1"]]); // the client's own lock ends with it
    // Frozen: the client's calls are refused, and a task ending keeps its locks (for the next client).
    await expect(store.apply("client", ["counter", "c", "value"]).answer).rejects.toThrow(/was detached/);
    store.ownerEnded("t1");
    expect(store.holders()).toEqual(["t1", "client:5b0e"]);
    expect(await settledState(waiting.answer)).toBe("pending");

    const next = new CollectionStore({ enabled: true });
    next.restore(snapshot);
    expect(await next.apply("x", ["dict", "d", "get", ["k", 1]]).answer).toEqual([true, new Uint8Array([7])]);
    expect(await next.apply("x", ["set", "s", "has", 2n ** 70n]).answer).toBe(true);
    expect(await next.apply("x", ["counter", "c", "value"]).answer).toBe(3);
    expect(await next.apply("x", ["queue", "q", "get", 0]).answer).toEqual([true, "b"]);
    expect(await next.apply("x", ["lock", "held", "locked"]).answer).toBe(true);
    expect(await next.apply("x", ["lock", "mine", "locked"]).answer).toBe(false);
    // The holder is a task of the detached pool: when it ends the lock goes to the next in line.
    const acquire = next.apply("x", ["lock", "held", "acquire", null]);
    expect(await settledState(acquire.answer)).toBe("pending");
    expect(next.holders()).toEqual(["t1"]);
    next.ownerEnded("t1");
    expect(await acquire.answer).toBe(true);
    expect(next.holders()).toEqual(["x"]);
  });
});
