/**
 * Elastic pools over SSH on the test bed: a `[1, 3]` pool grows onto more hosts under a queue of
 * one-second tasks and, idle, shrinks back; `resize` to a `min: 0` topology scales it to zero and a
 * new task brings a node back. Every worker let go of stops on its host, and nothing runs after close.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedSshHosts, useTestbedAndHome, waitFor } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/ssh_tasks.py", import.meta.url));
const info = sky.python<[], { node: number; pid: number }>("ssh_tasks:info");
const sleep = sky.python<[number], number>("ssh_tasks:sleep");

describe.skipIf(skipReason !== undefined)("elastic pools over SSH on a 3-host test bed", () => {
  const scratch = useTestbedAndHome({ hosts: 3, homePrefix: "skyward-ssh-elastic-" });

  it("refuses a ceiling above the hosts there are before anything starts", async () => {
    const events: string[] = [];
    await expect(
      sky.compute(
        {
          provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
          nodes: [1, 4],
          options: { console: false },
        },
        { onEvent: (event) => events.push(event.type) },
      ),
    ).rejects.toThrow(/nodes\.max: expected at most 3 nodes: the ssh provider holds no more, received 4/);
    expect(events).toEqual([]);
  });

  it("is ready at min with a host unreachable, and the reconcile loop brings the third node once it is back", async () => {
    const failures: string[] = [];
    await scratch.bed.exec(2, "ip link set eth0 down");
    let linkDown = true;
    try {
      await using pool = await sky.compute(
        {
          provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
          nodes: sky.nodes({ desired: 3, min: 2 }),
          ttl: 0,
          image: { includes: [tasks] },
          options: { console: false, sshTimeout: 3, sshRetryInterval: 1, reconcileTickInterval: 0.5 },
        },
        { onEvent: (event) => event.type === "error" && failures.push(event.message) },
      );
      expect(pool.currentNodes()).toBe(2);
      // A broadcast covers every node of the pool's size, those still starting included: node 2's
      // part waits for it — through its failed start, for the node the reconcile loop starts in its place.
      let broadcastDone = false;
      const everyNode = pool.broadcast(info()).finally(() => {
        broadcastDone = true;
      });
      everyNode.catch(() => undefined); // awaited below
      await waitFor(
        () => failures.some((message) => /node 2 failed to start/.test(message)),
        30_000,
        "node 2 to fail",
      );
      expect(broadcastDone).toBe(false);
      await scratch.bed.exec(2, "ip link set eth0 up");
      linkDown = false;
      await waitFor(() => pool.currentNodes() === 3, 60_000, "the third node to join");
      expect((await everyNode).map((entry) => entry.node)).toEqual([0, 1, 2]);
      expect((await pool.broadcast(info())).map((entry) => entry.node)).toEqual([0, 1, 2]);
      expect(pool.nodes().map((node) => node.privateIp)).toEqual(scratch.bed.hosts.map((host) => host.host));
    } finally {
      if (linkDown) await scratch.bed.exec(2, "ip link set eth0 up");
    }
  }, 180_000);

  it("grows [1, 3] to 3 hosts under load, shrinks to 1 when idle, scales to zero and back, and leaves nothing running", async () => {
    const scaling: sky.ScalingEvent[] = [];
    const destroyed: string[] = [];
    const workers = new Set<number>();
    const pool = await sky.compute(
      {
        provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
        nodes: [1, 3],
        ttl: 0,
        image: { includes: [tasks] },
        options: {
          console: false,
          bootstrapTimeout: 240,
          reconcileTickInterval: 0.2,
          autoscaleCooldown: 0.5,
          autoscaleIdleTimeout: 3,
        },
      },
      {
        onEvent: (event) => {
          if (event.type === "scaling") scaling.push(event);
          if (event.type === "node.destroyed") destroyed.push(event.instanceId);
        },
      },
    );
    try {
      expect(pool.currentNodes()).toBe(1);
      let most = 1;
      pool.on("node.ready", () => {
        most = Math.max(most, pool.currentNodes());
      });
      const ran = new Set<number>();
      pool.on("task.started", (event) => ran.add(event.node));
      const results = await pool.map(
        sleep,
        Array.from({ length: 16 }, () => [1] as [number]),
      );
      expect(results).toEqual(Array(16).fill(1));
      expect(most).toBe(3);
      expect(ran).toEqual(new Set([0, 1, 2]));
      expect(scaling[0]).toMatchObject({ from: 1, to: 3 });
      const three = await pool.broadcast(info());
      expect(three.map((entry) => entry.node)).toEqual([0, 1, 2]);
      expect(new Set(pool.nodes().map((node) => node.privateIp))).toEqual(
        new Set(scratch.bed.hosts.map((host) => host.host)),
      );
      for (const entry of three) workers.add(entry.pid);

      await waitFor(
        () => pool.nodes().length === 1 && destroyed.length === 2,
        60_000,
        "the idle hosts to go",
      );
      expect(scaling.at(-1)).toMatchObject({ to: 1, reason: expect.stringMatching(/idle/) });
      const head = three.find((entry) => entry.node === 0);
      await waitFor(
        () => three.filter((entry) => alive(entry.pid)).length === 1,
        20_000,
        "the workers to stop",
      );
      expect(alive(head?.pid as number)).toBe(true);

      await expect(pool.resize(sky.nodes({ desired: 1, min: 0, max: 4 }))).rejects.toThrow(
        /nodes\.max: expected at most 3 nodes: the ssh provider holds no more, received 4/,
      );
      await pool.resize(sky.nodes({ desired: 1, min: 0, max: 3 }));
      await waitFor(() => pool.nodes().length === 0, 60_000, "the pool to scale to zero");
      expect(pool.currentNodes()).toBe(0);
      await waitFor(() => !alive(head?.pid as number), 20_000, "the last worker to stop");

      const back = await pool.run(info());
      workers.add(back.pid);
      expect(pool.currentNodes()).toBe(1);
      expect(scaling.at(-1)).toMatchObject({ from: 0, to: 1 });
    } finally {
      await pool.close();
    }
    await waitFor(() => [...workers].every((pid) => !alive(pid)), 30_000, "every worker to stop after close");
  }, 300_000);
});
