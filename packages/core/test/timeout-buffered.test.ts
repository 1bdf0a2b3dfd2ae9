/**
 * A task's timeout counts from when it starts running (docs/protocol.md): tasks sent ahead to a
 * worker's buffer wait there, and the client's own backstop must not time them out meanwhile.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const sleep = sky.python<[number], number>("pool_tasks:sleep");

describe("timeouts of tasks waiting in a worker's buffer", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    // One slot and 80 tasks sent ahead: the last waits 16 s on the worker, longer than its timeout
    // (3 s) plus the client's grace (10 s), before it runs for 0.2 s.
    pool = await sky.compute({
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false, worker: { concurrency: 1, buffer: 80 } },
    });
  }, 60_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("times none out while it waits behind the others: each runs well within its timeout", async () => {
    const items = Array.from({ length: 81 }, () => [0.2] as [number]);
    const results = await pool.map((seconds: number) => sleep(seconds).withTimeout(3), items);
    expect(results).toEqual(items.map(([seconds]) => seconds));
  }, 120_000);
});
