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

  it("a broadcast of a task that broadcasts: every part runs, on its own node", async () => {
    await using pool = await sky.compute({ nodes: 3, image, options: fast });
    // Each node's slot holds its parent; the parts of the nested broadcasts take the nested slots
    // (before: the parts pinned to a node waited for its slot, for ever, and a part for the parent's
    // own node, sent through the client when its nested slot was busy, ran on any node).
    for (let round = 0; round < 3; round += 1)
      expect(await pool.broadcast(everyNode())).toEqual([
        [0, 1, 2],
        [0, 1, 2],
        [0, 1, 2],
      ]);
  }, 120_000);
});
