/**
 * Data node to node with the client far away (issue 28): 3 test-bed SSH hosts reached through far
 * links (a delaying proxy in front of each sshd, 20 ms each way) while the hosts reach each other
 * directly. A 32 MiB reference made on node 0 and used on node 2 moves host to host, a few KiB
 * through the client, whether the call is bound to node 2 or given its node by the task manager; a broadcast of a 4 MiB argument crosses the client's link once, not 3 times.
 * Bytes are counted twice, apart: by the far links themselves and by `pool.traffic()`.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, type TestbedFarHosts, testbedFarHosts, useTestbedAndHome } from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { trafficSince } from "./traffic.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("../../core/test/fixtures/ref_tasks.py", import.meta.url));

const makeBlob = sky.python<[size: number], Uint8Array>("ref_tasks:make_blob");
const blobInfo = sky.python<[blob: Uint8Array], { length: number; first: number; node: number }>(
  "ref_tasks:blob_info",
);

const MIB = 1024 * 1024;
/** "A few KiB": task messages, the move's two small calls, pings. */
const FEW_KIB = 16 * 1024;

function sum(traffic: readonly sky.NodeTraffic[], field: keyof sky.NodeTraffic): number {
  return traffic.reduce((total, entry) => total + entry[field], 0);
}

describe.skipIf(skipReason !== undefined)("data node to node with the client behind a far link", () => {
  const scratch = useTestbedAndHome({ hosts: 3, homePrefix: "skyward-ssh-far-refs-" });
  let far: TestbedFarHosts;
  let pool: sky.Pool;

  beforeAll(async () => {
    far = await testbedFarHosts(scratch.bed, { delayMs: 20 });
    pool = await sky.compute({
      provider: SSH({ hosts: far.hosts }),
      nodes: 3,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 300 },
    });
  }, 400_000);

  afterAll(async () => {
    await pool?.close();
    await far?.close();
  });

  it("moves a 32 MiB reference made on node 0 to node 2 host to host: a few KiB through the client", async () => {
    const ref = await pool.run(makeBlob(32 * MIB).withKeep(), { target: 0 });
    const links = far.bytes();
    const before = pool.traffic();
    expect(await pool.run(blobInfo(ref), { target: 2 })).toEqual({ length: 32 * MIB, first: 0, node: 2 });
    const moved = trafficSince(before, pool.traffic());
    const linksNow = far.bytes();
    const throughLinks = linksNow.toTarget - links.toTarget + (linksNow.fromTarget - links.fromTarget);
    expect(throughLinks).toBeLessThan(FEW_KIB);
    expect(sum(moved, "sent") + sum(moved, "received")).toBeLessThan(FEW_KIB);
    expect(moved.map((entry) => [entry.node, entry.served > 0, entry.fetched > 0])).toEqual([
      [0, true, false],
      [1, false, false],
      [2, false, true],
    ]);
    expect(moved[0]!.served).toBeGreaterThanOrEqual(32 * MIB);
    expect(moved[2]!.fetched).toBe(moved[0]!.served);
    expect(ref.nodes).toEqual([0, 2]);
    await ref.release();
  }, 180_000);

  it("moves a 32 MiB reference host to host to the nodes unbound calls land on, once each: a few KiB through the client", async () => {
    const ref = await pool.run(makeBlob(32 * MIB).withKeep(), { target: 0 });
    const links = far.bytes();
    const before = pool.traffic();
    // `map`'s calls have no node of their own: the task manager spreads them over the 3 nodes.
    const infos = await pool.map(
      blobInfo,
      Array.from({ length: 6 }, () => [ref]),
    );
    expect(infos.every((info) => info.length === 32 * MIB && info.first === 0)).toBe(true);
    expect(new Set(infos.map((info) => info.node))).toEqual(new Set([0, 1, 2]));
    const moved = trafficSince(before, pool.traffic());
    const linksNow = far.bytes();
    const throughLinks = linksNow.toTarget - links.toTarget + (linksNow.fromTarget - links.fromTarget);
    // Six calls and their answers, a serve and two pulls, pings: no part of the reference.
    expect(throughLinks).toBeLessThan(2 * FEW_KIB);
    expect(sum(moved, "sent") + sum(moved, "received")).toBeLessThan(2 * FEW_KIB);
    expect(moved[1]!.fetched).toBeGreaterThanOrEqual(32 * MIB);
    expect(moved[2]!.fetched).toBe(moved[1]!.fetched);
    expect(moved[0]!.served).toBe(2 * moved[1]!.fetched);
    expect(ref.nodes).toEqual([0, 1, 2]);
    await ref.release();
  }, 180_000);

  it("broadcasts a 4 MiB argument to 3 nodes with about 1× its bytes through the client", async () => {
    const argument = new Uint8Array(4 * MIB).fill(9);
    const links = far.bytes();
    const before = pool.traffic();
    const infos = await pool.broadcast(blobInfo(argument));
    expect(infos.map((info) => [info.node, info.length, info.first])).toEqual([
      [0, 4 * MIB, 9],
      [1, 4 * MIB, 9],
      [2, 4 * MIB, 9],
    ]);
    const moved = trafficSince(before, pool.traffic());
    const linksNow = far.bytes();
    const towardNodes = linksNow.toTarget - links.toTarget;
    // Without the fan-out it would be 3×; SSH framing and the calls' messages add a little.
    expect(towardNodes).toBeGreaterThanOrEqual(4 * MIB);
    expect(towardNodes).toBeLessThan(4 * MIB * 1.1);
    expect(sum(moved, "sent")).toBeLessThan(4 * MIB + FEW_KIB * 4);
    expect(sum(moved, "fetched")).toBeGreaterThanOrEqual(2 * 4 * MIB);
    expect(pool.refs().count).toBe(0);
  }, 180_000);
});
