/**
 * A call's options are checked before anything runs: a misspelt one would otherwise be ignored
 * (`{ node: 2 }` for `{ target: 2 }` runs the call on any node).
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");
const count = sky.python.stream<[number], number>("pool_tasks:count");

const refused = (field: RegExp) => (error: unknown) =>
  sky.ConfigurationError.isInstance(error) && field.test((error as Error).message);

describe("the options of a call", () => {
  let pool: sky.Pool;
  const queued: string[] = [];

  beforeAll(async () => {
    pool = await sky.compute({ nodes: 1, image: { includes: [tasks] }, options: { console: false } });
    pool.on("task.queued", (event) => queued.push(event.taskId));
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("refuses an unknown or malformed one, naming it, and runs nothing", async () => {
    const loose = (value: object) => value as never; // as a JavaScript caller would pass them
    await expect(pool.run(add(1, 2), loose({ node: 0 }))).rejects.toSatisfy(refused(/unknown field "node"/));
    expect(() => pool.submit(add(1, 2), loose({ signal: "abort" }))).toThrow(/options.signal/);
    await expect(pool.broadcast(add(1, 2), loose({ target: 0 }))).rejects.toSatisfy(refused(/"target"/));
    await expect(pool.gather([add(1, 2)], loose({ timeout: 5 }))).rejects.toSatisfy(refused(/"timeout"/));
    await expect(pool.map(add, [[1, 2]], loose({ concurrency: 2 }))).rejects.toSatisfy(
      refused(/"concurrency"/),
    );
    const streamed = pool.stream([add(1, 2)], loose({ orderd: false }));
    await expect(streamed.next()).rejects.toSatisfy(refused(/"orderd"/));
    const items = pool.run(count(2), loose({ targte: 0 }));
    // As for a closed pool, the iterator is refused when the stream starts (a for await throws).
    expect(() => items[Symbol.asyncIterator]()).toThrow(/unknown field "targte"/);
    expect(queued).toEqual([]);
    // Well-formed options still work.
    expect(await pool.run(add(1, 2), { target: 0 })).toBe(3);
  });
});
