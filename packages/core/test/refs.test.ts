/**
 * Remote references end to end on a 2-node Local pool (real workers, the real Python runtime): a
 * result kept on its node, reused there without moving its bytes, moved once to the other node
 * (node to node, not through the client), fetched, released, lost with its pool. Bytes are counted
 * by the connections' own counters and the workers' peer transfers (`pool.traffic()`).
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/ref_tasks.py", import.meta.url));

const makeBlob = sky.python<[size: number], Uint8Array>("ref_tasks:make_blob");
const blobInfo = sky.python<[blob: Uint8Array], { length: number; first: number; node: number }>(
  "ref_tasks:blob_info",
);
const makeCounter = sky.python<[], sky.PyObject>("ref_tasks:make_counter");
const bump = sky.python<[counter: sky.PyObject], { hits: number; node: number }>("ref_tasks:bump");
const nodeOf = sky.python<[], number>("ref_tasks:node");
const pidOf = sky.python<[], number>("ref_tasks:pid");
const unpicklable = sky.python<[], unknown>("ref_tasks:unpicklable");
const held = sky.python<
  [],
  { node: number; count: number; bytes: number; ids: string[]; served: number; fetched: number }
>("skyward.refs:held");

const PAYLOAD = 4 * 1024 * 1024;
/** Far below the payload: what task messages, pings and small results take. */
const OVERHEAD = 64 * 1024;

function trafficOf(pool: sky.Pool): Map<number, sky.NodeTraffic> {
  return new Map(pool.traffic().map((entry) => [entry.node, entry]));
}

/** Bytes sent and received per node since `before` (through the client), served and fetched (node to node). */
function movedSince(pool: sky.Pool, before: Map<number, sky.NodeTraffic>) {
  const now = trafficOf(pool);
  const delta = (node: number) => ({
    sent: now.get(node)!.sent - before.get(node)!.sent,
    received: now.get(node)!.received - before.get(node)!.received,
    served: now.get(node)!.served - before.get(node)!.served,
    fetched: now.get(node)!.fetched - before.get(node)!.fetched,
  });
  return { 0: delta(0), 1: delta(1) };
}

describe("remote references on a 2-node local pool", () => {
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

  it("a remote reference reused on its node without transfer (bytes counted)", async () => {
    let before = trafficOf(pool);
    const ref = await pool.run(makeBlob(PAYLOAD).withKeep(), { target: 0 });
    expect(ref).toBeInstanceOf(sky.RemoteRef);
    expect([ref.node, ref.type, ref.state, ref.nodes]).toEqual([0, "bytes", "held", [0]]);
    expect(ref.size).toBeGreaterThanOrEqual(PAYLOAD);
    expect(ref.size).toBeLessThan(PAYLOAD + 1024);
    // Keeping it sent nothing of it back.
    expect(movedSince(pool, before)[0].received).toBeLessThan(OVERHEAD);

    // Reused on its node, twice: a call with no target goes where the reference is.
    before = trafficOf(pool);
    expect(await pool.run(blobInfo(ref))).toEqual({ length: PAYLOAD, first: 0, node: 0 });
    expect(await pool.run(blobInfo(ref))).toEqual({ length: PAYLOAD, first: 0, node: 0 });
    let moved = movedSince(pool, before);
    expect(moved[0].sent + moved[0].received).toBeLessThan(OVERHEAD);
    expect(moved[1].sent + moved[1].received).toBeLessThan(OVERHEAD);

    // To the other node: it moves once, node 0 → node 1 directly, none of it through the client…
    before = trafficOf(pool);
    expect(await pool.run(blobInfo(ref), { target: 1 })).toEqual({ length: PAYLOAD, first: 0, node: 1 });
    moved = movedSince(pool, before);
    expect(moved[0].sent + moved[0].received).toBeLessThan(OVERHEAD);
    expect(moved[1].sent + moved[1].received).toBeLessThan(OVERHEAD);
    expect(moved[0].served).toBeGreaterThanOrEqual(ref.size);
    expect(moved[0].served).toBeLessThan(ref.size + 1024);
    expect(moved[1].fetched).toBe(moved[0].served);
    expect(moved[0].fetched + moved[1].served).toBe(0);
    expect(ref.nodes).toEqual([0, 1]);

    // …and stays there: a second use on node 1 moves nothing.
    before = trafficOf(pool);
    expect(await pool.run(blobInfo(ref), { target: 1 })).toEqual({ length: PAYLOAD, first: 0, node: 1 });
    moved = movedSince(pool, before);
    expect(moved[0].sent + moved[0].received).toBeLessThan(OVERHEAD);
    expect(moved[1].sent + moved[1].received).toBeLessThan(OVERHEAD);
    expect(moved[1].fetched).toBe(0);

    // Visible: the client's account and each worker's own agree.
    expect(
      pool
        .refs()
        .nodes.filter((entry) => entry.count > 0)
        .map((entry) => entry.node),
    ).toEqual([0, 1]);
    for (const node of [0, 1]) {
      const worker = await pool.run(held(), { target: node });
      expect(worker.ids).toContain(ref.id);
      expect(worker.bytes).toBeGreaterThanOrEqual(ref.size);
      expect(pool.refs().nodes.find((entry) => entry.node === node)?.bytes).toBe(worker.bytes);
      // What the nodes moved between them: the client's count (from the pulls' answers) and theirs.
      expect(trafficOf(pool).get(node)).toMatchObject({ served: worker.served, fetched: worker.fetched });
    }

    // fetch() brings the value itself.
    const value = await ref.fetch();
    expect(value).toBeInstanceOf(Uint8Array);
    expect(value.byteLength).toBe(PAYLOAD);

    // Released: freed on both nodes, and a later use is a typed error naming it.
    await ref.release();
    expect(ref.state).toBe("released");
    for (const node of [0, 1]) expect((await pool.run(held(), { target: node })).ids).not.toContain(ref.id);
    const error = await pool.run(blobInfo(ref)).catch((caught: unknown) => caught);
    expect(sky.RemoteRefError.isInstance(error)).toBe(true);
    expect((error as sky.RemoteRefError).refId).toBe(ref.id);
    expect((error as sky.RemoteRefError).problem).toBe("released");
    expect((error as Error).message).toContain(ref.id);
    await expect(ref.fetch()).rejects.toThrow(/was released/);
  });

  it("keeps the very object on its node: its state carries from task to task", async () => {
    const counter = await pool.run(makeCounter().withKeep(), { target: 1 });
    expect(counter.type).toBe("ref_tasks.Counter");
    expect(await pool.run(bump(counter))).toEqual({ hits: 1, node: 1 });
    expect(await pool.run(bump(counter))).toEqual({ hits: 2, node: 1 });
    await pool.release(counter);
    expect(pool.refs().count).toBe(0);
  });

  it("broadcast keeps one reference per node, and map moves one at most once per node, node to node", async () => {
    const refs = await pool.broadcast(makeBlob(1024 * 1024).withKeep());
    expect(refs.map((ref) => ref.node)).toEqual([0, 1]);
    expect(await pool.broadcast(nodeOf())).toEqual([0, 1]);
    const [onZero] = refs;
    const before = trafficOf(pool);
    // More items than node 1 has slots: every slot there may wait for the same move at once.
    const infos = await pool.map(
      blobInfo,
      Array.from({ length: 24 }, () => [onZero!]),
    );
    expect(infos.every((info) => info.length === 1024 * 1024 && info.first === 0)).toBe(true);
    expect(new Set(infos.map((info) => info.node))).toEqual(new Set([0, 1]));
    const moved = movedSince(pool, before);
    // The map's calls have no node of their own: node 1 fetched the reference from node 0 once, once
    // the task manager gave it one, and none of it went through the client.
    expect(moved[1].sent + moved[0].received).toBeLessThan(OVERHEAD);
    expect(moved[0].served).toBeGreaterThanOrEqual(onZero!.size);
    expect(moved[0].served).toBeLessThan(onZero!.size + 1024);
    expect(moved[1].fetched).toBe(moved[0].served);
    // Node 0: its own; node 1: its own and the copy of node 0's.
    expect(pool.refs().nodes.map((entry) => [entry.node, entry.count])).toEqual([
      [0, 1],
      [1, 2],
    ]);
    for (const ref of refs) await ref.release();
    await expect(pool.map(blobInfo, [[onZero!]])).rejects.toThrow(sky.RemoteRefError);
    await expect(pool.broadcast(blobInfo(onZero!))).rejects.toThrow(/was released/);
  });

  it("broadcast sends a large argument once and the nodes fan it out, node to node", async () => {
    const large = new Uint8Array(PAYLOAD).fill(7);
    const before = trafficOf(pool);
    const infos = await pool.broadcast(blobInfo(large));
    expect(infos.map((info) => [info.length, info.first, info.node])).toEqual([
      [PAYLOAD, 7, 0],
      [PAYLOAD, 7, 1],
    ]);
    const moved = movedSince(pool, before);
    // Twice the payload (once per node) without the fan-out; once with it.
    expect(moved[0].sent + moved[1].sent).toBeGreaterThanOrEqual(PAYLOAD);
    expect(moved[0].sent + moved[1].sent).toBeLessThan(PAYLOAD + OVERHEAD);
    expect(moved[1].fetched).toBeGreaterThanOrEqual(PAYLOAD);
    expect(moved[0].served).toBe(moved[1].fetched);
    // The reference it went by is released with the broadcast.
    expect(pool.refs().count).toBe(0);
  });

  it("refuses what cannot be kept, before anything runs or with the worker's reason", async () => {
    const checked = sky.python("ref_tasks:node", { result: z.number() });
    expect(() => checked().withKeep()).toThrow(sky.ConfigurationError);
    expect(() => checked().withKeep()).toThrow(/keep/);
    await expect(pool.run(unpicklable().withKeep())).rejects.toThrow(
      /cannot keep a value of type _thread.lock/,
    );
  });

  it("frees every reference when the pool closes: a later use names the reference", async () => {
    const other = await sky.compute({
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const ref = await other.run(makeCounter().withKeep());
    // A reference belongs to the pool that made it.
    const foreign = await pool.run(bump(ref)).catch((caught: unknown) => caught);
    expect((foreign as sky.RemoteRefError).problem).toBe("other-pool");
    await other.close();
    expect(ref.state).toBe("released");
    const error = await pool.run(bump(ref)).catch((caught: unknown) => caught);
    expect(sky.RemoteRefError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain(ref.id);
  });
});

describe("a remote reference whose node is lost", () => {
  it("is lost when every node holding it is: a later use names it, a copy elsewhere survives", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false },
    });
    const onlyThere = await pool.run(makeCounter().withKeep(), { target: 1 });
    const copied = await pool.run(makeBlob(1024).withKeep(), { target: 1 });
    await pool.run(blobInfo(copied), { target: 0 }); // now on node 0 too
    const lost = new Promise<void>((resolve) => pool.on("node.lost", () => resolve()));
    process.kill(await pool.run(pidOf(), { target: 1 }), "SIGKILL");
    await lost;
    expect(onlyThere.state).toBe("lost");
    const error = await pool.run(bump(onlyThere)).catch((caught: unknown) => caught);
    expect(sky.RemoteRefError.isInstance(error)).toBe(true);
    expect((error as sky.RemoteRefError).problem).toBe("lost");
    expect((error as Error).message).toMatch(new RegExp(`${onlyThere.id}.*every node holding it was lost`));
    // The copy on node 0 is still there: it is used there, and moves to node 1's replacement from it.
    expect(copied.state).toBe("held");
    expect(copied.nodes).toEqual([0]);
    expect(await pool.run(blobInfo(copied))).toEqual({ length: 1024, first: 1, node: 0 });
    expect(await pool.run(blobInfo(copied), { target: 1 })).toEqual({ length: 1024, first: 1, node: 1 });
  }, 120_000);
});

describe("remote references under the process executor", () => {
  it("hands each task a copy of the kept object, on its node or moved to another", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image: { includes: [tasks] },
      options: { console: false, worker: { executor: "process", concurrency: 1 } },
    });
    const counter = await pool.run(makeCounter().withKeep(), { target: 0 });
    // A child process gets the object unpickled: its changes stay there, the kept one is unchanged.
    expect(await pool.run(bump(counter))).toEqual({ hits: 1, node: 0 });
    expect(await pool.run(bump(counter))).toEqual({ hits: 1, node: 0 });
    expect(await pool.run(bump(counter), { target: 1 })).toEqual({ hits: 1, node: 1 });
    expect(counter.nodes).toEqual([0, 1]);
    expect((await pool.run(held(), { target: 1 })).ids).toEqual([counter.id]);
  }, 120_000);
});
