/**
 * `pool.map` over a long iterable keeps memory flat: an item whose call has ended is collectable
 * while the map still runs (nothing per item is retained until the map ends).
 */
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");

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

describe("a long map's memory", () => {
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
});
