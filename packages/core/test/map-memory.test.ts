/**
 * `pool.map` over a long iterable keeps memory flat: an item whose call has ended is collectable
 * while the map still runs (nothing per item is retained until the map ends). `pool.stream` of many
 * calls, as they complete, does work per call, not per call for every result.
 */
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");
const sleep = sky.python<[number], number>("pool_tasks:sleep");
const boom = sky.python<[string], never>("pool_tasks:boom");

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Items watched for collection: the first `sample` are registered; read up to `limit`. */
function watchedItems(sample: number, limit: number) {
  const state = { finalized: 0, read: 0, finalizedWhileRunning: 0 };
  const registry = new FinalizationRegistry<number>(() => {
    state.finalized += 1;
  });
  /** The next item, or undefined once the map may stop (enough collected, or the limit reached). */
  const next = (): [number, number] | undefined => {
    const index = state.read;
    if (index >= sample && index % 500 === 0) {
      state.finalizedWhileRunning = state.finalized;
      if (state.finalized >= sample / 2) return undefined; // collected while the map runs
      gc(); // finalization callbacks come in a later turn, which the map gives every so many items
    }
    if (index >= limit) return undefined;
    state.read += 1;
    const item: [number, number] = [index, 1];
    if (index < sample) registry.register(item, index);
    return item;
  };
  function* sync(): Generator<[number, number]> {
    for (let item = next(); item !== undefined; item = next()) yield item;
  }
  async function* async(): AsyncGenerator<[number, number]> {
    for (let item = next(); item !== undefined; item = next()) yield item;
  }
  return { state, sync, async };
}

describe("a long map's memory, a wide stream's work", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({ nodes: 1, image: { includes: [tasks] }, options: { console: false } });
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  it.each(["sync", "async"] as const)(
    "lets a %s iterable's done items be collected while it runs",
    async (kind) => {
      const watched = watchedItems(2_000, 20_000);
      const results = await pool.map(add, watched[kind]());
      expect(results).toEqual(Array.from({ length: watched.state.read }, (_, index) => index + 1));
      expect(watched.state.finalizedWhileRunning).toBeGreaterThanOrEqual(1_000);
      expect(watched.state.read).toBeLessThan(20_000);
    },
    120_000,
  );

  it("streams many calls as they complete with a few promise reactions per call, not one per call per result", async () => {
    const calls = 2_000;
    // Promise.race (and any then()) calls `then` on each promise it is given: counted while streaming.
    const then = Promise.prototype.then;
    let thens = 0;
    const results: number[] = [];
    const setThen = (value: typeof then) =>
      // biome-ignore lint/suspicious/noThenProperty: Promise.prototype's own then, counted here and restored.
      Object.defineProperty(Promise.prototype, "then", { value, writable: true, configurable: true });
    setThen(function (this: Promise<unknown>, ...args) {
      thens += 1;
      return then.apply(this, args);
    } as typeof then);
    try {
      const stream = pool.stream(
        Array.from({ length: calls }, (_, index) => add(index, 1)),
        { ordered: false },
      );
      for await (const value of stream) results.push(value);
    } finally {
      setThen(then);
    }
    expect(results.sort((a, b) => a - b)).toEqual(Array.from({ length: calls }, (_, index) => index + 1));
    expect(thens).toBeLessThan(calls * 20);
  }, 120_000);

  it("an unordered stream gives what came before a failure, then throws it, not waiting for the rest", async () => {
    const items: number[] = [];
    const streaming = (async () => {
      for await (const value of pool.stream([add(1, 2), boom("soon"), sleep(5)], { ordered: false }))
        items.push(value as number);
    })();
    await expect(streaming).rejects.toSatisfy(
      (error) => sky.RemoteTaskError.isInstance(error) && /soon/.test((error as Error).message),
    );
    expect(items).toEqual([3]);
  }, 60_000);
});
