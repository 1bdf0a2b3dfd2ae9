/**
 * A pool's collections when no node holds a copy any more, on the Local provider (real worker
 * processes, real SIGKILLs): the head and the replica holding its copy die together. The pool says
 * so — an `error` event — and every operation fails naming why, also once both nodes are replaced:
 * the new head starts no empty collections in their place (a counter reading 0 there would be
 * every acknowledged write lost without a word).
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/collection_tasks.py", import.meta.url));
const countUp = sky.python<[string, number], number>("collection_tasks:count_up");
const whoami = sky.python<[], string>("collection_tasks:whoami");

describe("collections whose every copy is lost", () => {
  it("are reported lost, by an event and by every operation after, never replaced by empty ones", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const errors: string[] = [];
    pool.on("error", (event) => errors.push(event.message));
    // Node 1 is linked to the head and holds its copy (the only other node).
    await pool.run(countUp("c", 3), { target: 1 });
    expect(await pool.counter("c").increment(5)).toBe(8);
    const workers = await Promise.all([0, 1].map((node) => pool.run(whoami(), { target: node })));
    for (const who of workers) process.kill(Number(who.split(":")[2]), "SIGKILL");

    const lost = /the pool's collections are lost: node 0, which held them, was lost, and no other node/;
    await expect.poll(() => errors.find((message) => lost.test(message)), { timeout: 120_000 }).toBeDefined();
    await expect(pool.counter("c").value()).rejects.toThrow(lost);
    // Both nodes are back (tasks pinned to them run); the collections are still lost, saying why.
    await Promise.all([0, 1].map((node) => pool.run(whoami(), { target: node })));
    await expect(pool.counter("c").value()).rejects.toThrow(lost);
    await expect(pool.run(countUp("c", 1), { target: 1 })).rejects.toThrow();
  }, 240_000);
});
