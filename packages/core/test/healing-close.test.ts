/**
 * Healing seen from its edges, on the Local provider with real worker processes and real faults: a
 * pool closed while a lost node's replacement is being provisioned, and a worker stopped for less
 * than the liveness window.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/healing_tasks.py", import.meta.url));
const image = { includes: [tasks] };

type Work = { key: string; node: number; pid: number };
const work = sky.python<[string, number, string?], Work>("healing_tasks:work");
const whoami = sky.python<[], { node: number; pid: number; total_nodes: number }>("healing_tasks:whoami");

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "skyward-healing-close-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

function nextEvent<T extends sky.SkywardEventType>(pool: sky.Pool, type: T): Promise<sky.EventOf<T>> {
  return new Promise((resolve) => {
    const off = pool.on(type, (event) => {
      off();
      resolve(event);
    });
  });
}

async function journal(path: string): Promise<Work[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Work);
}

/** Resolves once the journal shows `count` task starts. */
async function started(path: string, count: number): Promise<Work[]> {
  for (;;) {
    const entries = await journal(path);
    if (entries.length >= count) return entries;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Resolves (with true) when `promise` does, or with false after `ms`. */
function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe("a pool closed while a lost node's replacement is being provisioned", () => {
  it("terminates the replacement's instance too: nothing made is left running after close", async () => {
    const local = sky.Local();
    // What the provider made and was not asked to terminate: what would bill on.
    const live = new Set<string>();
    let provisions = 0;
    let replacementAsked!: () => void;
    const replacementStarted = new Promise<void>((resolve) => {
      replacementAsked = resolve;
    });
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let replacementReturned: Promise<unknown> = Promise.resolve();
    const provider: sky.ProviderV1<sky.LocalCluster> = {
      ...local,
      async provision(options) {
        provisions += 1;
        const made = local.provision(options).then((instances) => {
          for (const instance of instances) live.add(instance.id);
          return instances;
        });
        if (provisions === 1) return made;
        // The replacement: the cloud's call is under way when the pool closes, and its instance
        // comes back afterwards (an API call in flight is not undone by an abort).
        replacementAsked();
        const late = gate.then(() => made);
        replacementReturned = late;
        return late;
      },
      async terminate(options) {
        // Close's own terminate call: the replacement's answer comes after it.
        if (options.ids.length > 1) openGate();
        await local.terminate(options);
        for (const id of options.ids) live.delete(id);
      },
    };
    const pool = await sky.compute({ provider, nodes: 2, image, options: { console: false } });
    const before = await pool.broadcast(whoami());
    const lost = nextEvent(pool, "node.lost");
    process.kill(before[1]?.pid ?? 0, "SIGKILL");
    await lost;
    await replacementStarted;
    const closing = pool.close();
    // A close that waits for the replacement does not reach its terminate call first: it gets the
    // answer after a while all the same.
    if (!(await within(closing, 5000))) openGate();
    await closing;
    await replacementReturned;
    expect(provisions).toBe(2);
    expect([...live]).toEqual([]);
  }, 120_000);
});

describe("a worker stopped for less than the liveness window (SIGSTOP, then SIGCONT)", () => {
  it("is not taken for lost: its task finishes there, nothing runs twice, no node is replaced", async () => {
    await using pool = await sky.compute({
      nodes: 2,
      image,
      options: { console: false, livenessTimeout: 20 },
    });
    const path = join(scratch, "brief-stop.jsonl");
    const victim = await pool.run(whoami(), { target: 1 });
    const losses: string[] = [];
    pool.on("node.lost", (event) => losses.push(event.reason));
    pool.on("node.replaced", (event) => losses.push(`replaced ${event.node}`));
    const retried: string[] = [];
    pool.on("task.failed", (event) => retried.push(event.taskId));
    const result = pool.run(work("paused", 2, path), { target: 1 });
    await started(path, 1);
    // A network drop of 3 s, far inside the 20 s window: the worker sends nothing meanwhile.
    process.kill(victim.pid, "SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, 3000));
    process.kill(victim.pid, "SIGCONT");
    await expect(result).resolves.toMatchObject({ key: "paused", pid: victim.pid });
    expect((await journal(path)).map((entry) => entry.key)).toEqual(["paused"]);
    expect(losses).toEqual([]);
    expect(retried).toEqual([]);
    // The node still serves, on the same worker.
    await expect(pool.run(whoami(), { target: 1 })).resolves.toMatchObject({ pid: victim.pid });
  }, 120_000);
});
