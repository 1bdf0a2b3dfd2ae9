/**
 * A torch process group across a pool whose nodes change: on two Local nodes (gloo over loopback), node 1's
 * worker is SIGKILLed and replaced; the next broadcast's all_reduce spans both ranks again (node 0
 * left its stale group and joined the new one with the replacement) rather than failing or hanging;
 * and a pool resized from 1 node to 2 forms a group of 2.
 */
import type * as sky from "@skyward/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  allReduceSum,
  expectAllReduceSum,
  groupInfo,
  localTorchPool,
  torchSkipReasons,
} from "./ddp-tasks.js";

const { torchMissing } = await torchSkipReasons("PyTorch for the torch plugin's healing test");

function nextEvent<T extends sky.SkywardEventType>(pool: sky.Pool, type: T): Promise<sky.EventOf<T>> {
  return new Promise((resolve) => {
    const off = pool.on(type, (event) => {
      off();
      resolve(event);
    });
  });
}

describe.skipIf(torchMissing !== undefined)("torch() on 2 Local nodes when node 1 is replaced", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await localTorchPool(2);
  });

  afterAll(async () => {
    await pool?.close();
  });

  it("forms the group again with the replacement: the next all_reduce sums over both ranks", async () => {
    expectAllReduceSum(await pool.broadcast(allReduceSum(1.5)), 1.5, 2);
    const before = await pool.broadcast(groupInfo());
    const lostPid = before[1]?.pid as number;
    const replaced = nextEvent(pool, "node.replaced");
    process.kill(lostPid, "SIGKILL");
    expect((await replaced).node).toBe(1);

    expectAllReduceSum(await pool.broadcast(allReduceSum(2.5)), 2.5, 2);
    const after = await pool.broadcast(groupInfo());
    expect(after.map((info) => [info.initialized, info.rank, info.world_size])).toEqual([
      [true, 0, 2],
      [true, 1, 2],
    ]);
    expect(after[1]?.pid).not.toBe(lostPid);
    expect(after[0]?.pid).toBe(before[0]?.pid);
  }, 240_000);
});

describe.skipIf(torchMissing !== undefined)("torch() on a Local pool resized from 1 node to 2", () => {
  it("forms the group again at the new size: the next all_reduce has world size 2", async () => {
    await using pool = await localTorchPool(1);
    expectAllReduceSum(await pool.broadcast(allReduceSum(2)), 2, 1);
    await pool.resize(2);
    expectAllReduceSum(await pool.broadcast(allReduceSum(2)), 2, 2);
    const infos = await pool.broadcast(groupInfo());
    expect(infos.map((info) => [info.rank, info.world_size, info.env.WORLD_SIZE])).toEqual([
      [0, 2, "2"],
      [1, 2, "2"],
    ]);
  }, 240_000);
});
