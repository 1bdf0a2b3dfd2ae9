/**
 * No split brain and nothing acknowledged lost in the collections' replication, with real faults on
 * 3 SSH hosts of the test bed (docs/protocol.md, "Distributed collections"):
 *
 * - the client's link to the head is cut (the far link in front of its sshd closed) while the head
 *   lives on and a task on it keeps writing: the pool promotes the newest copy in the next epoch,
 *   and every add the old head acknowledged is on the new holder — the old head stops
 *   acknowledging once the others are fenced, and its task's later adds reach the new holder;
 * - the replica's worker is SIGKILLed while the client writes: the writes go on once the pool's
 *   verdict or a new replica comes, and when the head is killed afterwards the replacement node's
 *   copy holds every acknowledged write;
 * - the replica's worker is SIGSTOPped and the head's SIGKILLed while the client writes: the
 *   promotion's first round gets no answer and is tried again (an `error` event says so); after
 *   SIGCONT the copy is promoted with every acknowledged write;
 * - the head's worker is SIGKILLed while a task on the node holding its copy writes, each write
 *   answered by that copy (docs/protocol.md, "Answered by the copy"): every write the task was told
 *   of is on the promoted copy.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedFarHosts, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
/** The same task module as core's local collections suite. */
const tasks = fileURLToPath(new URL("../../core/test/fixtures/collection_tasks.py", import.meta.url));

const addMembers = sky.python<[string, unknown[]], number>("collection_tasks:add_members");
const addSteadily = sky.python<[string, number, number, string], number>("collection_tasks:add_steadily");
const holdLockThenDie = sky.python<[string], never>("collection_tasks:hold_lock_then_die");
const whoami = sky.python<[], string>("collection_tasks:whoami");
const answeredByCopy = sky.python<[], number>("collection_tasks:answered_by_copy");

interface AddLogEntry {
  readonly i?: number;
  readonly ok?: boolean;
  readonly error?: string;
  readonly done?: boolean;
}

/** The lines `add_steadily` wrote so far (none before it opened its file). */
function readAddLog(path: string): AddLogEntry[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((line) => line.endsWith("}"))
    .map((line) => JSON.parse(line) as AddLogEntry);
}

function acknowledged(entries: readonly AddLogEntry[]): number[] {
  return entries.filter((entry) => entry.ok === true).map((entry) => entry.i as number);
}

/**
 * Waits for `add_steadily`'s log at `path` to say it is done and for the client to reach the
 * promoted holder of set `name`; the indices the log acknowledged that the holder lacks.
 */
async function lostOnPromotedHolder(pool: sky.Pool, name: string, path: string): Promise<number[]> {
  await expect
    .poll(() => readAddLog(path).some((entry) => entry.done === true), { timeout: 180_000 })
    .toBe(true);
  const reachable = () =>
    pool
      .set(name)
      .size()
      .then(
        () => true,
        () => false,
      );
  await expect.poll(reachable, { timeout: 120_000 }).toBe(true);
  const onNewHolder = new Set(await pool.set<number>(name).values());
  return acknowledged(readAddLog(path)).filter((index) => !onNewHolder.has(index));
}

/**
 * Increments counter `c` from the client one call after another until `writes.stop`, counting what
 * was acknowledged and what failed.
 */
function writeSteadily(pool: sky.Pool): {
  writes: { acked: number; failed: number; stop: boolean };
  writer: Promise<void>;
} {
  const writes = { acked: 0, failed: 0, stop: false };
  const writer = (async () => {
    while (!writes.stop) {
      try {
        await pool.counter("c").increment();
        writes.acked += 1;
      } catch {
        writes.failed += 1;
        await pause(50); // no node holds them for a moment: not a busy loop
      }
    }
  })();
  return { writes, writer };
}

describe.skipIf(skipReason !== undefined)("collections under real faults on the SSH test bed", () => {
  const scratch = useTestbedAndHome({ hosts: 3, homePrefix: "skyward-ssh-collection-faults-" });
  /** A pool on the test bed's first two hosts: node 1 holds the head's copy (the only other node). */
  const twoNodePool = (options: { livenessTimeout?: number } = {}) =>
    sky.compute({
      provider: SSH({ hosts: testbedSshHosts(scratch.bed, { indices: [0, 1] }) }),
      nodes: 2,
      ttl: 0,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240, ...options, worker: { concurrency: 2 } },
    });

  it("keeps every acknowledged write through a SIGKILLed replica, then a SIGKILLed head", async () => {
    await using pool = await twoNodePool();
    // Node 1 is linked to the head and holds its copy (the only other node).
    await pool.run(addMembers("warm", [1]), { target: 1 });
    const { writes, writer } = writeSteadily(pool);
    await expect.poll(() => writes.acked, { timeout: 60_000 }).toBeGreaterThan(20);

    await expect(pool.run(holdLockThenDie("replica-held"), { target: 1 })).rejects.toThrow(
      sky.WorkerDiedError,
    );
    const atReplicaLoss = writes.acked;
    // The head holds its answers until the pool says node 1 is lost (or a replacement has the copy).
    await expect.poll(() => writes.acked, { timeout: 120_000 }).toBeGreaterThan(atReplicaLoss + 20);
    // A task pinned to node 1 waits for its replacement, which connects to the head and takes the copy.
    await pool.run(addMembers("warm", [2]), { target: 1 });
    writes.stop = true;
    await writer;
    const { acked, failed } = writes;

    await expect(pool.run(holdLockThenDie("head-held"), { target: 0 })).rejects.toThrow(sky.WorkerDiedError);
    const value = () =>
      pool
        .counter("c")
        .value()
        .catch(() => -1);
    await expect.poll(value, { timeout: 120_000 }).toBeGreaterThanOrEqual(acked);
    // A failed increment may or may not have been applied; none acknowledged is missing.
    expect(await value()).toBeLessThanOrEqual(acked + failed);
    expect(await pool.set("warm").size()).toBe(2);
  }, 600_000);

  it("keeps every write the copy answered to a task on its node when the head is SIGKILLed", async () => {
    await using pool = await twoNodePool();
    await pool.run(addMembers("warm", [1]), { target: 1 });
    const log = join(scratch.bed.directory, "copy-answered");
    const nodeLog = `${log}.1`;
    pool.run(addSteadily("s", 1500, 0.005, log), { target: 1 }).catch(() => undefined);
    await expect
      .poll(() => acknowledged(readAddLog(nodeLog)).length, { timeout: 60_000 })
      .toBeGreaterThan(50);
    // Node 1 holds the copy: the answers to its task's adds came from there.
    expect(await pool.run(answeredByCopy(), { target: 1 })).toBeGreaterThan(50);

    await expect(pool.run(holdLockThenDie("head-held"), { target: 0 })).rejects.toThrow(sky.WorkerDiedError);
    const lost = await lostOnPromotedHolder(pool, "s", nodeLog);
    expect(lost).toEqual([]);
  }, 600_000);

  it("promotes a replica SIGSTOPped while its head was SIGKILLed, once it goes on, with every acknowledged write", async () => {
    // The stopped replica is not declared lost while it is stopped: its copy is the one to promote.
    await using pool = await twoNodePool({ livenessTimeout: 300 });
    const retries: string[] = [];
    pool.on("error", (event) => {
      if (/promoting a copy of the pool's collections/.test(event.message)) retries.push(event.message);
    });
    // Node 1 is linked to the head and holds its copy (the only other node).
    await pool.run(addMembers("warm", [1]), { target: 1 });
    // The test bed's hosts are namespaces of this machine: their workers' pids are this machine's.
    const [head, replica] = await Promise.all(
      [0, 1].map(async (node) => Number((await pool.run(whoami(), { target: node })).split(":")[2])),
    );
    const { writes, writer } = writeSteadily(pool);
    await expect.poll(() => writes.acked, { timeout: 60_000 }).toBeGreaterThan(20);
    process.kill(replica as number, "SIGSTOP");
    try {
      process.kill(head as number, "SIGKILL");
      // The promotion's round found the replica silent: it is tried again, not given up.
      await expect.poll(() => retries.length, { timeout: 120_000 }).toBeGreaterThan(0);
      expect(retries[0]).toMatch(/node 1 did not say whether it holds a copy/);
    } finally {
      process.kill(replica as number, "SIGCONT");
    }
    const value = () =>
      pool
        .counter("c")
        .value()
        .catch(() => -1);
    await expect.poll(value, { timeout: 120_000 }).toBeGreaterThanOrEqual(writes.acked);
    writes.stop = true;
    await writer;
    const { acked, failed } = writes;
    // A failed increment may or may not have been applied; none acknowledged is missing.
    const final = await value();
    expect(final).toBeGreaterThanOrEqual(acked);
    expect(final).toBeLessThanOrEqual(acked + failed);
    expect(await pool.set("warm").size()).toBe(1);
  }, 600_000);

  it("loses no write a head acknowledged when the client's link to it is cut while its task writes", async () => {
    await using far = await testbedFarHosts(scratch.bed, { delayMs: 0 });
    const pool = await sky.compute({
      provider: SSH({ hosts: far.hosts }),
      nodes: 3,
      // The head outlives its client's link (it would end at once with ttl 0): it is cut off, not dead.
      ttl: 600,
      image: { includes: [tasks] },
      options: { console: false, bootstrapTimeout: 240, worker: { concurrency: 2 } },
    });
    try {
      // Both other nodes are linked to the head (each offered to hold its copy).
      await Promise.all([1, 2].map((node) => pool.run(addMembers("s", [-node]), { target: node })));
      const log = join(scratch.bed.directory, "adds");
      const headLog = `${log}.0`;
      pool.run(addSteadily("s", 1500, 0.01, log), { target: 0 }).catch(() => undefined);
      await expect
        .poll(() => acknowledged(readAddLog(headLog)).length, { timeout: 60_000 })
        .toBeGreaterThan(30);

      await far.links[0]?.close(); // the client's link to the head: its SSH connection and tunnel go
      const atCut = acknowledged(readAddLog(headLog)).length;
      // The head's task goes on without the client and says when it is done; the client reaches the
      // promoted holder once the pool has promoted it.
      const lost = await lostOnPromotedHolder(pool, "s", headLog);
      const entries = readAddLog(headLog);
      expect(lost).toEqual([]);
      // What failed failed naming the move (or the link it was under way on), never silently.
      for (const entry of entries.filter((each) => each.ok === false))
        expect(entry.error).toMatch(/the collections moved|connection/);
      // The old head's task reached the new holder after the move.
      expect(acknowledged(entries).length).toBeGreaterThan(atCut);
    } finally {
      await pool.close().catch(() => undefined);
    }
  }, 600_000);
});
