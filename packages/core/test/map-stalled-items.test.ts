/**
 * `pool.map` over an iterable that stops yielding for a while (a live event source, a queue): an
 * abort, or a call's failure, must end the map then, not when the next item comes.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");
const boom = sky.python<[string], never>("pool_tasks:boom");

/** Yields `first`, then waits until `release()` (never, in these tests); `stalled` says it waits. */
function stallingAfter<T>(first: T[]) {
  let reached: () => void = () => {};
  const stalled = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let finished = false;
  async function* items(): AsyncGenerator<T> {
    try {
      for (const item of first) yield item;
      reached();
      await new Promise<void>(() => {});
    } finally {
      finished = true;
    }
  }
  return { items: items(), stalled, finished: () => finished };
}

describe("a map whose items stall", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({ nodes: 1, image: { includes: [tasks] }, options: { console: false } });
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("rejects as soon as it is aborted, while waiting for the next item", async () => {
    const source = stallingAfter([[1, 2] as [number, number]]);
    const controller = new AbortController();
    const mapping = pool.map(add, source.items, { signal: controller.signal });
    await source.stalled;
    controller.abort();
    await expect(mapping).rejects.toSatisfy((error) => sky.CancelledError.isInstance(error));
  });

  it("rejects with a call's failure while waiting for the next item", async () => {
    const source = stallingAfter([["kaput"] as [string]]);
    const mapping = pool.map(boom, source.items);
    await source.stalled;
    await expect(mapping).rejects.toSatisfy(
      (error) => sky.RemoteTaskError.isInstance(error) && /kaput/.test((error as Error).message),
    );
  });

  it("still returns every result of an iterable that ends", async () => {
    async function* items() {
      yield [1, 2] as [number, number];
      yield [3, 4] as [number, number];
    }
    expect(await pool.map(add, items())).toEqual([3, 7]);
    expect(await pool.map(add, new Set([[5, 6] as [number, number]]))).toEqual([11]);
  });
});
