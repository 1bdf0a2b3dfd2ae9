// Distributed collections across detach and attach: a client fills collections, starts tasks that
// use them across the detach (one holds a lock, one blocks on a queue, one calls while nobody is
// attached, one ends holding a lock), detaches and is killed with SIGKILL; this process attaches and
// finds the collections where they stayed — on the head node, which answered the tasks meanwhile; the
// state file keeps none of them — the waits served, the locks as documented (docs/sessions.md,
// "Collections across detach"), and carries on.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { alive, cleanUpDetached, until } from "./fixtures/processes.js";

const child = fileURLToPath(new URL("./fixtures/detach-collections-child.ts", import.meta.url));

describe("collections across detach and attach", () => {
  it("keeps a SIGKILLed client's collections for the next process, and serves what tasks asked meanwhile", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detcoll-"));
    let pids: number[] = [];
    let stateFile = "";
    try {
      const client = spawn(process.execPath, [child, workRoot], { stdio: ["ignore", "pipe", "inherit"] });
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: client.stdout }).once("line", resolve);
        client.once("exit", (code) => reject(new Error(`the client exited (${code}) before detaching`)));
      });
      const { id, outcomes, after } = JSON.parse(line) as { id: string; outcomes: string[]; after: string };
      expect(outcomes).toEqual(Array(5).fill("TaskDetachedError"));
      expect(after).toBe("CancelledError"); // the collections left with the detach
      client.kill("SIGKILL");
      await new Promise((resolve) => client.once("exit", resolve));

      // Sealed: the owner's only, and no value in clear.
      stateFile = join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`);
      expect(statSync(stateFile).mode & 0o777).toBe(0o600);
      const state = JSON.parse(readFileSync(stateFile, "utf8")) as {
        collections?: string;
        nodes: { pid: number }[];
      };
      pids = state.nodes.map((node) => node.pid);
      expect(state.collections).toBeUndefined();
      expect(readFileSync(stateFile, "utf8")).not.toContain("secret-value-7f3a");
      expect(Buffer.from(readFileSync(stateFile)).includes(Buffer.from("secret-value-7f3a"))).toBe(false);

      // Nobody is attached while `during` calls the counter (2 s in): the head answers it.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const pool = await sky.attach(id, { options: { console: false } });
      try {
        const d = pool.dict<unknown, unknown>("d");
        expect(await d.get("k")).toBe("secret-value-7f3a");
        expect(await d.get(["tuple", 1])).toBe(2n ** 70n);
        expect(await pool.set<string>("s").values()).toEqual(["a"]);
        expect(await pool.queue<number>("q").size()).toBe(3);
        // Held by a task still running: still held. Held by a task that ended meanwhile, or by the
        // client that went away: free.
        expect(await pool.lock("L").locked()).toBe(true);
        expect(await pool.lock("S").locked()).toBe(false);
        expect(await pool.lock("C").locked()).toBe(false);
        expect(await pool.lock("L").acquire({ timeout: 0 })).toBe(false);

        // The waits that were open at detach time are served by this client.
        await pool.queue<string>("w").put("hello");
        await pool.queue<string>("go").put("go");
        const collected = await pool.collected();
        const byName = Object.fromEntries(
          collected.map((entry) => [entry.name.split(":")[1], entry.ok ? entry.value : entry.errorType]),
        );
        expect(byName.hold).toBe("held");
        expect(byName.taker).toBe("hello");
        expect(byName.short_lock).toBe("ended");
        // An eventual write made while nobody was attached, by a task that has ended since: applied.
        expect(byName.eventual_during).toBe("written");
        expect(await pool.counter("ev").value()).toBe(5);
        const during = byName.during as { n: number; waited: number };
        expect(during.n).toBe(6);
        expect(await d.get("during")).toBe(6);
        expect(await d.get("holder")).toBe("done");
        expect(await pool.lock("L").locked()).toBe(false);

        // A task of the attached pool sees the same collections.
        const read = sky.python<[], Record<string, unknown>>("detach_collection_tasks:read_all");
        expect(await pool.run(read())).toEqual({
          k: "secret-value-7f3a",
          c: 6,
          q: 1,
          s: true,
          locked: false,
        });
        expect(await pool.counter("c").increment()).toBe(7);
      } finally {
        await pool.close();
      }
      for (const pid of pids) expect(await until(() => !alive(pid), 10_000)).toBe(true);
      expect(existsSync(stateFile)).toBe(false);
      expect(readdirSync(workRoot)).toEqual([]);
    } finally {
      // A failure above leaves no worker behind.
      for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
      if (stateFile) rmSync(stateFile, { force: true });
      rmSync(workRoot, { recursive: true, force: true });
    }
  }, 120_000);

  it("a pool attached and detached again keeps the collections and the running task's lock and wait", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detcoll-"));
    const tasks = fileURLToPath(new URL("./fixtures/detach_collection_tasks.py", import.meta.url));
    let pids: number[] = [];
    let id = "";
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 1,
        image: { includes: [tasks] },
        options: { console: false, worker: { concurrency: 2 } },
      });
      pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
      await pool.dict<string>("d").set("k", "kept");
      // `hold` takes "L", then waits on queue "go" through both detaches.
      void pool.run(sky.python<[], string>("detach_collection_tasks:hold")()).catch(() => undefined);
      while ((await pool.dict<string>("d").get("holder")) !== "holding")
        await new Promise((resolve) => setTimeout(resolve, 20));
      id = await pool.detach();

      const first = await sky.attach(id, { options: { console: false } });
      expect(await first.lock("L").locked()).toBe(true);
      await first.dict<string>("d").set("k", "changed while attached");
      expect(await first.detach()).toBe(id);

      const second = await sky.attach(id, { options: { console: false } });
      try {
        expect(await second.dict<string>("d").get("k")).toBe("changed while attached");
        expect(await second.lock("L").locked()).toBe(true);
        await second.queue<string>("go").put("go");
        // `hold` gets its item from this client, finishes, and its lock is released.
        const d = second.dict<string>("d");
        const deadline = Date.now() + 20_000;
        while ((await d.get("holder")) !== "done" || (await second.lock("L").locked())) {
          expect(Date.now()).toBeLessThan(deadline);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(await second.queue("go").size()).toBe(0);
        // `hold` was picked up by the first attach, which was detached before it ended: the second
        // attach hands its outcome over.
        expect((await second.collected()).map((entry) => [entry.name, entry.ok && entry.value])).toEqual([
          ["detach_collection_tasks:hold", "held"],
        ]);
      } finally {
        await second.close();
      }
      for (const pid of pids) expect(await until(() => !alive(pid), 10_000)).toBe(true);
    } finally {
      cleanUpDetached({ pids, id, workRoot });
    }
  }, 120_000);

  it("runs on the attached pool a nested task asked for by a task picked up on attach", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detcoll-"));
    const tasks = fileURLToPath(new URL("./fixtures/detach_collection_tasks.py", import.meta.url));
    let pids: number[] = [];
    let id = "";
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 1,
        image: { includes: [tasks] },
        options: { console: false },
      });
      pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
      void pool
        .run(sky.python<[], string>("detach_collection_tasks:nested_after_attach")())
        .catch(() => undefined);
      while ((await pool.dict<string>("d").get("nested")) !== "waiting")
        await new Promise((resolve) => setTimeout(resolve, 20));
      id = await pool.detach();
      const again = await sky.attach(id, { options: { console: false } });
      try {
        await again.queue<string>("go2").put("go");
        const [outcome] = await again.collected();
        // Its nested task ran on the attached pool's only node: the worker's own process.
        expect(outcome?.ok && outcome.value).toBe(`ran ${pids[0]}`);
      } finally {
        await again.close();
      }
      for (const pid of pids) expect(await until(() => !alive(pid), 10_000)).toBe(true);
    } finally {
      cleanUpDetached({ pids, id, workRoot });
    }
  }, 120_000);

  it("an attach detached again before collected() settles hands everything over at the next attach", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-detcoll-"));
    const tasks = fileURLToPath(new URL("./fixtures/detach_collection_tasks.py", import.meta.url));
    const waitOn = sky.python<[string, string], string>("detach_collection_tasks:wait_on");
    let pids: number[] = [];
    let id = "";
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 1,
        image: { includes: [tasks] },
        options: { console: false, worker: { concurrency: 2 } },
      });
      pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
      const d = pool.dict<string>("d");
      void pool.run(waitOn("qa", "secret-result-a")).catch(() => undefined);
      void pool.run(waitOn("qb", "result-b")).catch(() => undefined);
      while ((await d.get("qa")) !== "waiting" || (await d.get("qb")) !== "waiting")
        await new Promise((resolve) => setTimeout(resolve, 20));
      id = await pool.detach();

      // The first attach sees task a end (its outcome reaches it) and is detached again, with task b
      // still waiting, without anyone asking for collected().
      const first = await sky.attach(id, { options: { console: false } });
      await first.queue<string>("qa").put("go");
      while ((await first.dict<string>("d").get("qa")) !== "done")
        await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await first.detach()).toBe(id);
      const stateFile = join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`);
      const text = readFileSync(stateFile, "utf8");
      const state = JSON.parse(text) as { outcomes?: string; tasks: { name: string }[] };
      // a's outcome is sealed in the 0600 state file, not in clear; b is recorded as still on its worker.
      expect(state.outcomes).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      expect(text).not.toContain("secret-result-a");
      expect(state.tasks.map((task) => task.name)).toEqual(["detach_collection_tasks:wait_on"]);

      const second = await sky.attach(id, { options: { console: false } });
      try {
        await second.queue<string>("qb").put("go");
        const outcomes = await second.collected();
        expect(outcomes.map((entry) => entry.ok && entry.value).sort()).toEqual([
          "result-b",
          "secret-result-a",
        ]);
        // Handed over: a third attach has nothing more to give.
        expect(await second.detach()).toBe(id);
        const third = await sky.attach(id, { options: { console: false } });
        try {
          expect(await third.collected()).toEqual([]);
        } finally {
          await third.close();
        }
      } catch (error) {
        await second.close();
        throw error;
      }
      for (const pid of pids) expect(await until(() => !alive(pid), 10_000)).toBe(true);
    } finally {
      cleanUpDetached({ pids, id, workRoot });
    }
  }, 120_000);
});
