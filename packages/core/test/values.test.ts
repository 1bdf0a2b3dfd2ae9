/**
 * Values across the boundary and task code written for the Python project, end to end on a 2-node
 * Local pool (real workers, the real Python runtime).
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/value_tasks.py", import.meta.url));

interface Info {
  node: number;
  worker: number;
  total_nodes: number;
  is_head: boolean;
  hostname: string;
  peers: { node: number; private_ip: string; public_ip: string | null }[];
}

const operators = sky.python<[number], Record<string, unknown>>("value_tasks:operators");
const declaredTimeout = sky.python<[number], string>("value_tasks:declared_timeout");
const getInstanceInfo = sky.python<[], Info>("value_tasks:get_instance_info");
const striped = sky.python<[number], number[]>("value_tasks:striped");

describe("a 2-node local pool: in-task parity with the Python project", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 120_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("runs the guide 04 task shape: a task that returns instance_info()", async () => {
    const infos = await pool.broadcast(getInstanceInfo());
    expect(infos.map((info) => info.node)).toEqual([0, 1]);
    expect(infos.map((info) => info.is_head)).toEqual([true, false]);
    for (const info of infos) {
      expect(info.total_nodes).toBe(2);
      expect(info.peers.map((peer) => peer.node)).toEqual([0, 1]);
      expect(typeof info.peers[0]?.private_ip).toBe("string");
      expect(info.hostname.length).toBeGreaterThan(0);
    }
  });

  it("dispatches pending functions from inside a task with >>, @, &, > and sky.gather", async () => {
    expect(await pool.run(operators(7))).toEqual({
      one: 49,
      every_node: [0, 1],
      group: [1, 49],
      gathered: [9, 16],
      future: 25,
    });
  });

  it("honours @sky.function(timeout=…) when the call sets none, and the call's own timeout first", async () => {
    await expect(pool.run(declaredTimeout(10))).rejects.toThrow(/timed out after 1 s/);
    expect(await pool.run(declaredTimeout(1.5).withTimeout(10))).toBe("finished");
  });

  it("shards as the Python project: striped without drop_last", async () => {
    expect(await pool.broadcast(striped(7))).toEqual([
      [0, 2, 4, 6],
      [1, 3, 5],
    ]);
  });
});
