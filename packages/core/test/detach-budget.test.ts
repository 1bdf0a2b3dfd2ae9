// Detached pools on Local with a fixture price (`Local({ hourlyPrice })`): the budget keeps applying
// while nobody is attached (each worker stops itself when the remaining budget runs out at the pool's
// rate), the cost goes on across attach, and a streaming task's items yielded while detached are kept
// on the worker (up to a byte cap, the rest counted) and handed over on attach.
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, until } from "./fixtures/processes.js";

const tasks = fileURLToPath(new URL("./fixtures/detach_tasks.py", import.meta.url));
const count = sky.python.stream<[n: number, pause: number], number>("detach_tasks:count");
const padded = sky.python.stream<[n: number, pause: number, size: number], string>("detach_tasks:padded");
const pid = sky.python<[], number>("os:getpid");

/** Reads `n` items of a stream, then leaves it running (its later items reach nobody here). */
async function take<T>(stream: AsyncIterable<T>, n: number): Promise<{ got: T[]; rest: Promise<string> }> {
  const iterator = stream[Symbol.asyncIterator]();
  const got: T[] = [];
  while (got.length < n) {
    const next = await iterator.next();
    if (next.done) break;
    got.push(next.value);
  }
  const rest = (async () => {
    try {
      while (!(await iterator.next()).done) {}
      return "ended";
    } catch (error) {
      return (error as Error).name;
    }
  })();
  return { got, rest };
}

describe("detached pools and their budget", () => {
  it("with no client attached, the workers stop themselves when the budget runs out, not before", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detach-budget-"));
    // 36 USD per hour and node: a cent a second for the two nodes together is 0.02 USD a second;
    // a budget of 0.1 USD lasts 5 s. The TTL (10 min) is not what stops them.
    const pool = await sky.compute({
      provider: sky.Local({ workRoot, hourlyPrice: 36 }),
      nodes: 2,
      ttl: 600,
      image: { metrics: null },
      options: { console: false, budget: 0.1 },
    });
    const pids = await pool.broadcast(pid());
    const spent = pool.cost().total;
    const id = await pool.detach();
    const [entry] = (await sky.detachedPools()).filter((candidate) => candidate.id === id);
    const deadline = entry?.budgetDeadline as number;
    expect(deadline).toBeGreaterThan(Date.now());
    // The remaining budget at 72 USD per hour (a whole second of slack for the rounding of "now").
    expect(
      Math.abs(deadline - (entry?.detachedAt as number) - ((0.1 - spent) / 72) * 3_600_000),
    ).toBeLessThan(1000);
    expect(pids.every(alive)).toBe(true);
    let stoppedAt = 0;
    expect(
      await until(() => {
        if (pids.some(alive)) return false;
        stoppedAt = Date.now();
        return true;
      }, 30_000),
    ).toBe(true);
    expect(stoppedAt).toBeGreaterThanOrEqual(deadline - 250);
    // Their self-destruct ran: attach says they are gone, and nothing is left on disk.
    await expect(sky.attach(id)).rejects.toThrow(/workers are gone/);
    expect(readdirSync(workRoot)).toEqual([]);
  }, 60_000);

  it("carries the cost and the budget across attach, and hands over the items streamed while detached", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detach-items-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot, hourlyPrice: 36 }),
      nodes: 1,
      ttl: 600,
      image: { includes: [tasks], metrics: null },
      // 0.01 USD a second: this budget lasts 12 s in all.
      options: { console: false, budget: 0.12 },
    });
    const first = await take(pool.run(count(12, 0.25)), 2);
    expect(first.got).toEqual([0, 1]);
    const before = pool.cost().total;
    const detachedAt = Date.now();
    const id = await pool.detach();
    expect(await first.rest).toBe("TaskDetachedError");
    // Items come while nobody is attached.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const events: sky.SkywardEvent[] = [];
    const again = await sky.attach(id, { options: { console: false } });
    again.on("*", (event) => events.push(event));
    const attachedAt = Date.now();
    // The cost goes on from the detached pool's, with the time it ran detached.
    const carried = again.cost().total;
    expect(carried).toBeGreaterThanOrEqual(before + (0.01 * (attachedAt - detachedAt - 200)) / 1000);
    expect(carried).toBeLessThan(before + (0.01 * (Date.now() - detachedAt + 1000)) / 1000);
    const [outcome] = await again.collected();
    expect(outcome).toMatchObject({ ok: true, dropped: 0, name: "detach_tasks:count" });
    // What the first process had not received, in order, each once: a run of the stream up to its end.
    const items = outcome?.items as number[];
    const from = items[0] as number;
    expect(from).toBeGreaterThanOrEqual(2);
    expect(items).toEqual(Array.from({ length: 12 - from }, (_, index) => from + index));
    // Several were yielded while detached (1.5 s of 0.25 s each).
    expect(items.length).toBeGreaterThanOrEqual(5);
    // The budget applies after attach, counting what was spent: the pool stops at 0.12 USD in all.
    expect(await until(() => events.some((event) => event.type === "budget.exceeded"), 30_000)).toBe(true);
    const exceeded = events.find((event) => event.type === "budget.exceeded") as { total: number };
    expect(exceeded.total).toBeGreaterThanOrEqual(0.12);
    expect(exceeded.total).toBeLessThan(0.14);
    await again.close();
    expect(readdirSync(workRoot)).toEqual([]);
  }, 60_000);

  it("keeps stream items up to keepItemsBytes and counts the rest", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detach-cap-"));
    const pool = await sky.compute({
      provider: sky.Local({ workRoot }),
      nodes: 1,
      ttl: 600,
      image: { includes: [tasks], metrics: null },
      options: { console: false },
    });
    await expect(pool.detach({ keepItemsBytes: -1 })).rejects.toThrow(
      /keepItemsBytes: expected a whole number of bytes >= 0, received -1/,
    );
    const first = await take(pool.run(padded(10, 0.1, 1000)), 1);
    // Room for three items of a kilobyte (and their frames' few bytes each), not four.
    const id = await pool.detach({ keepItemsBytes: 3500 });
    await first.rest;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await using again = await sky.attach(id, { options: { console: false } });
    const [outcome] = await again.collected();
    expect(outcome?.ok).toBe(true);
    const items = outcome?.items as string[];
    expect(items).toHaveLength(3);
    const from = Number((items[0] as string).replace(/x/g, ""));
    expect(items.map((item) => Number(item.replace(/x/g, "")))).toEqual([from, from + 1, from + 2]);
    // Every item after the first process's last one is either kept or counted.
    expect(from + items.length + (outcome?.dropped ?? 0)).toBe(10);
    expect(outcome?.dropped).toBeGreaterThan(0);
  }, 60_000);
});
