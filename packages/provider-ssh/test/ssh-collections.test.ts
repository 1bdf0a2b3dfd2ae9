/**
 * Distributed collections across 3 SSH hosts of the test bed (real sshd in network namespaces), with
 * both executors: the tasks on every host and the client share counters, sets, queues, barriers and
 * locks held by the head host's worker, which the other hosts reach over the cluster network and the
 * client over its SSH tunnel to the head.
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
/** The same task module as core's local collections suite. */
const tasks = fileURLToPath(new URL("../../core/test/fixtures/collection_tasks.py", import.meta.url));

const countUp = sky.python<[string, number], number>("collection_tasks:count_up");
const addMembers = sky.python<[string, unknown[]], number>("collection_tasks:add_members");
const drain = sky.python<[string, number], { who: string; taken: number[] }>("collection_tasks:drain");
const barrierRounds = sky.python<[string, number, number], { who: string; seen: number[] }>(
  "collection_tasks:barrier_rounds",
);
const lockedSection = sky.python<[string, number, number], number>("collection_tasks:locked_section");
const holdLockThenDie = sky.python<[string], never>("collection_tasks:hold_lock_then_die");
const tryLock = sky.python<[string, number], { got: boolean; waited: number }>("collection_tasks:try_lock");
const eventualWrite = sky.python<[string, string, unknown], boolean>("collection_tasks:eventual_write");
const eventualPrime = sky.python<[string, string], unknown>("collection_tasks:eventual_prime");
const eventualWatch = sky.python<
  [string, string, unknown, number],
  { converged: boolean; stale_reads: number; seconds: number }
>("collection_tasks:eventual_watch");

const HOSTS = 3;
const CONCURRENCY = 2;

describe.skipIf(skipReason !== undefined)("collections across 3 SSH hosts of the test bed", () => {
  const scratch = useTestbedAndHome({ hosts: HOSTS, homePrefix: "skyward-ssh-collections-" });

  for (const executor of ["thread", "process"] as const) {
    it(`shares exact counters, sets, queues, barriers and locks across hosts (${executor} executor)`, async () => {
      await using pool = await sky.compute({
        provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
        nodes: HOSTS,
        ttl: 0,
        image: { includes: [tasks], env: { SKYWARD_COLLECTIONS_STALENESS: "1.5" } },
        options: { console: false, bootstrapTimeout: 240, worker: { concurrency: CONCURRENCY, executor } },
      });
      const slots = HOSTS * CONCURRENCY;

      // Exact counts under concurrent increments from every host and the client.
      const fromClient = Promise.all(Array.from({ length: 30 }, () => pool.counter("hits").increment()));
      await pool.gather(...Array.from({ length: slots * 2 }, () => countUp("hits", 25)));
      await fromClient;
      expect(await pool.counter("hits").value()).toBe(slots * 2 * 25 + 30);

      // Dedup across hosts.
      await pool.broadcast(addMembers("seen", [1, 2, 3, 3]));
      await pool.gather(addMembers("seen", [3, 4]), addMembers("seen", [4, 5]));
      expect(await pool.set("seen").size()).toBe(5);

      // A queue fed by the client, drained by every host, each item exactly once.
      const items = Array.from({ length: 200 }, (_, index) => index);
      const drainers = pool.gather(...Array.from({ length: slots }, () => drain("work", 2)));
      for (const item of items) await pool.queue<number>("work").put(item);
      const drained = await drainers;
      expect(drained.flatMap((entry) => entry.taken).sort((a, b) => a - b)).toEqual(items);
      expect(new Set(drained.map((entry) => entry.who.split(":")[0])).size).toBe(HOSTS);

      // A 3-host × 2-worker barrier over several rounds.
      const rounds = 3;
      const crossed = await pool.gather(
        ...Array.from({ length: slots }, () => barrierRounds("epochs", slots, rounds)),
      );
      expect(new Set(crossed.map((entry) => entry.who.split(":")[0])).size).toBe(HOSTS);
      for (const entry of crossed) expect(entry.seen).toEqual(Array.from({ length: rounds }, () => slots));

      // Mutual exclusion, checked by an overlap detector.
      const overlaps = await pool.gather(
        ...Array.from({ length: slots }, () => lockedSection("ckpt", 3, 0.01)),
      );
      expect(overlaps).toEqual(Array.from({ length: slots }, () => 0));
      expect(await pool.counter("ckpt-entries").value()).toBe(slots * 3);

      // Eventual reads converge (stale first on the hosts that had the old value cached).
      await pool.dict("ev").set("k", "old");
      await pool.broadcast(eventualPrime("ev", "k"));
      await pool.run(eventualWrite("ev", "k", "new"), { target: 0 });
      const watched = await pool.broadcast(eventualWatch("ev", "k", "new", 30));
      expect(watched.every((entry) => entry.converged)).toBe(true);

      // A holder killed with SIGKILL on host 1 lets the lock go (its end, or its worker's connection
      // to the head closing with it).
      // The task's failure is expected from the start: it may come before the queue's answer does.
      const died = expect(pool.run(holdLockThenDie("killed"), { target: 1 })).rejects.toThrow(
        sky.WorkerDiedError,
      );
      expect(await pool.queue<string>("killed-held").get({ timeout: 60 })).toMatch(/^1:/);
      await died;
      expect((await pool.run(tryLock("killed", 30), { target: 2 })).got).toBe(true);
    }, 400_000);
  }

  it("keeps every acknowledged write when the head host's worker is SIGKILLed (a replica takes over)", async () => {
    await using pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
      nodes: HOSTS,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240, worker: { concurrency: CONCURRENCY } },
    });
    await Promise.all([1, 2].map((node) => pool.run(countUp("acked", 20), { target: node })));
    await pool.counter("acked").increment(5);
    await pool.dict<string>("acked-d").set("k", "v");
    for (const item of [1, 2, 3]) await pool.queue<number>("acked-q").put(item);
    const acknowledged = await pool.counter("acked").value();
    // The head's task kills its own worker (thread executor: the whole worker, and the store with it).
    await expect(pool.run(holdLockThenDie("head-held"), { target: 0 })).rejects.toThrow(sky.WorkerDiedError);
    await expect
      .poll(
        () =>
          pool
            .counter("acked")
            .value()
            .catch(() => -1),
        { timeout: 120_000 },
      )
      .toBe(acknowledged);
    expect(await pool.dict<string>("acked-d").get("k")).toBe("v");
    expect(await pool.queue<number>("acked-q").size()).toBe(3);
    expect(await pool.lock("head-held").locked()).toBe(false);
    // The hosts still there use them as before.
    expect(await pool.run(countUp("acked", 1), { target: 2 })).toBe(acknowledged + 1);
  }, 400_000);
});
