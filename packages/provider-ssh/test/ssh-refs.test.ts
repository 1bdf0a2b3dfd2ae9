/**
 * Remote references across 2 SSH hosts of the test bed (real sshd in network namespaces, workers
 * reached through SSH tunnels): a result kept on its host is reused there without its bytes crossing
 * the tunnel, and moves once to the other host, host to host over the bed's network, not through
 * the client — or through the client, with an `error` event saying why, when the holder cannot
 * serve its peers. Bytes are counted by the pool's connections and the workers' peer transfers.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { trafficSince } from "./traffic.js";

const skipReason = await requireTestbed();
/** The same task module as core's local remote-reference suite. */
const tasks = fileURLToPath(new URL("../../core/test/fixtures/ref_tasks.py", import.meta.url));

const makeBlob = sky.python<[size: number], Uint8Array>("ref_tasks:make_blob");
const blobInfo = sky.python<[blob: Uint8Array], { length: number; first: number; node: number }>(
  "ref_tasks:blob_info",
);
const held = sky.python<[], { node: number; count: number; bytes: number; ids: string[] }>(
  "skyward.refs:held",
);

const PAYLOAD = 2 * 1024 * 1024;
const OVERHEAD = 64 * 1024;

describe.skipIf(skipReason !== undefined)("remote references across 2 SSH hosts of the test bed", () => {
  const scratch = useTestbedAndHome({ hosts: 2, homePrefix: "skyward-ssh-refs-" });

  it("reuses a reference on its host without transfer and moves it host to host once (process executor)", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
      nodes: 2,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240, worker: { concurrency: 2, executor: "process" } },
    });
    const moved = (before: readonly sky.NodeTraffic[]) => trafficSince(before, pool.traffic());

    const ref = await pool.run(makeBlob(PAYLOAD).withKeep(), { target: 0 });
    expect(ref.size).toBeGreaterThanOrEqual(PAYLOAD);

    let before = pool.traffic();
    expect(await pool.run(blobInfo(ref))).toEqual({ length: PAYLOAD, first: 0, node: 0 });
    for (const entry of moved(before)) expect(entry.sent + entry.received).toBeLessThan(OVERHEAD);

    before = pool.traffic();
    expect(await pool.run(blobInfo(ref), { target: 1 })).toEqual({ length: PAYLOAD, first: 0, node: 1 });
    const [zero, one] = moved(before);
    for (const entry of [zero!, one!]) expect(entry.sent + entry.received).toBeLessThan(OVERHEAD);
    expect(zero!.served).toBeGreaterThanOrEqual(ref.size);
    expect(zero!.served).toBeLessThan(ref.size + 1024);
    expect(one!.fetched).toBe(zero!.served);

    before = pool.traffic();
    expect(await pool.run(blobInfo(ref), { target: 1 })).toEqual({ length: PAYLOAD, first: 0, node: 1 });
    for (const entry of moved(before)) expect(entry.sent + entry.received).toBeLessThan(OVERHEAD);

    await ref.release();
    for (const node of [0, 1]) expect((await pool.run(held(), { target: node })).ids).not.toContain(ref.id);
    await expect(pool.run(blobInfo(ref), { target: 1 })).rejects.toThrow(sky.RemoteRefError);
  }, 300_000);

  it("goes through the client, saying so in an event, when the holder cannot serve its peers", async () => {
    // Node 0 is told a cluster address it does not have (TEST-NET-1, RFC 5737): its peer server
    // cannot bind there, so node 1 cannot fetch from it.
    const [first, second] = testbedSshHosts(scratch.bed);
    await using pool = await sky.compute({
      provider: SSH({ hosts: [{ ...first!, privateIp: "192.0.2.1" }, second!] }),
      nodes: 2,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240 },
    });
    const errors: string[] = [];
    pool.on("error", (event) => errors.push(event.message));
    const ref = await pool.run(makeBlob(PAYLOAD).withKeep(), { target: 0 });
    const before = pool.traffic();
    expect(await pool.run(blobInfo(ref), { target: 1 })).toEqual({ length: PAYLOAD, first: 0, node: 1 });
    const [zero, one] = trafficSince(before, pool.traffic());
    expect(zero!.received).toBeGreaterThanOrEqual(ref.size);
    expect(one!.sent).toBeGreaterThanOrEqual(ref.size);
    expect(one!.fetched).toBe(0);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`remote reference ${ref.id} could not move from node 0 to node 1 directly`);
    expect(errors[0]).toMatch(
      /cannot serve references to its peers.*\): it goes through the client instead$/,
    );
    expect(ref.nodes).toEqual([0, 1]);
  }, 300_000);
});
