/**
 * A pool whose membership changes tells its other nodes (Local provider, real workers): after a
 * resize up or down, every node's tasks see the current pool — `instance_info().total_nodes` and its
 * peers — and `f(x) @ sky` from a task runs on the current nodes. (A replacement: plugin-torch's
 * test/heal.test.ts.)
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/membership_tasks.py", import.meta.url));
const image = { includes: [tasks] };

type View = { node: number; pid: number; total_nodes: number; peers: number[] };
const view = sky.python<[], View>("membership_tasks:view");
const everyNode = sky.python<[], number[]>("membership_tasks:every_node");

const fast = { console: false, reconcileTickInterval: 0.2 } as const;

describe("a pool's membership told again", () => {
  it("after a resize, every node's tasks see the current nodes and broadcast to them", async () => {
    await using pool = await sky.compute({ nodes: 1, image, options: fast });
    expect(await pool.run(everyNode(), { target: 0 })).toEqual([0]);

    await pool.resize(3);
    const grown = await pool.broadcast(view());
    expect(grown.map((entry) => [entry.node, entry.total_nodes, entry.peers])).toEqual([
      [0, 3, [0, 1, 2]],
      [1, 3, [0, 1, 2]],
      [2, 3, [0, 1, 2]],
    ]);
    expect(await pool.run(everyNode(), { target: 0 })).toEqual([0, 1, 2]);

    await pool.resize(1);
    const shrunk = await pool.broadcast(view());
    expect(shrunk.map((entry) => [entry.node, entry.total_nodes, entry.peers])).toEqual([[0, 1, [0]]]);
    expect(await pool.run(everyNode(), { target: 0 })).toEqual([0]);
    expect(shrunk[0]?.pid).toBe(grown[0]?.pid);
  }, 120_000);
});
