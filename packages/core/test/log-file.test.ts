/**
 * The log file end to end: real Local pools (worker processes, the Python runtime) writing
 * `options.logging.file`.
 */
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { readLogRecords } from "../src/logs.js";

const tasks = fileURLToPath(new URL("./fixtures/log_tasks.py", import.meta.url));
const printEnv = sky.python<[string], number>("log_tasks:print_env");
const chatter = sky.python<[string, number], number>("log_tasks:chatter");
const fail = sky.python<[string], never>("log_tasks:fail");

const SECRET = "hf_Zx81LogFileSecretValue";
const ENV_SECRET = "env_Q7LogFileApiKeyValue";
const PROVIDER_SECRET = "prov_R2LogFileSettingValue";

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-log-e2e-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("a Local pool's log file", () => {
  it("holds the pool's lifecycle, tasks and output as JSON lines, with the image's secrets masked", async () => {
    const file = join(directory, "logs", "pool.log");
    let poolId = "";
    {
      process.env.SKYWARD_LOG_TEST_API_KEY = ENV_SECRET;
      // A provider carrying a credential-looking setting, as a cloud provider's object may.
      const localWithCredentials = { ...sky.Local(), credentials: { apiKey: PROVIDER_SECRET } };
      await using pool = await sky.compute({
        nodes: 2,
        provider: localWithCredentials,
        image: { includes: [tasks], env: { HF_TOKEN: SECRET } },
        options: { console: false, logging: { file, level: "DEBUG" } },
      });
      poolId = pool.id;
      expect(await pool.run(printEnv("HF_TOKEN"))).toBe(SECRET.length);
      await pool.run(chatter(`${ENV_SECRET} and ${PROVIDER_SECRET}`, 1));
      delete process.env.SKYWARD_LOG_TEST_API_KEY;
      await expect(pool.run(fail("it went wrong"))).rejects.toThrow(/it went wrong/);
    }
    const text = await readFile(file, "utf8");
    for (const secret of [SECRET, ENV_SECRET, PROVIDER_SECRET]) expect(text).not.toContain(secret);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const records = await readLogRecords(file);
    expect(records.length).toBe(text.trim().split("\n").length);
    expect(new Set(records.map((record) => record.pool))).toEqual(new Set([poolId]));
    const events = records.map((record) => record.event);
    for (const type of [
      "pool.state",
      "node.provisioned",
      "node.ready",
      "pool.ready",
      "task.started",
      "task.completed",
      "task.failed",
      "log",
      "pool.destroyed",
    ]) {
      expect(events, type).toContain(type);
    }
    // Lifecycle in order: ready before the tasks, destroyed last.
    expect(events.indexOf("pool.ready")).toBeLessThan(events.indexOf("task.started"));
    expect(events.at(-1)).toBe("pool.destroyed");
    const output = records.filter((record) => record.event === "log");
    expect(output).toContainEqual(
      expect.objectContaining({ level: "INFO", stream: "stdout", msg: "HF_TOKEN is [redacted]" }),
    );
    expect(output).toContainEqual(
      expect.objectContaining({ stream: "stderr", msg: "also on stderr: [redacted]" }),
    );
    expect(output).toContainEqual(expect.objectContaining({ msg: "[redacted] and [redacted] line 0" }));
    expect(records.find((record) => record.event === "task.failed")).toMatchObject({
      level: "ERROR",
      error: { type: "ValueError" },
    });
    for (const record of records) {
      expect(Date.parse(record.ts)).toBeGreaterThan(0);
      expect(record.pid).toBe(process.pid);
    }
  });

  it("a failed task's event has the image's secrets masked, as its output lines do (the console and the dashboard print it)", async () => {
    const failures: sky.SkywardEvent[] = [];
    {
      await using pool = await sky.compute({
        image: { includes: [tasks], env: { HF_TOKEN: SECRET } },
        options: { console: false, logging: false },
      });
      pool.on("task.failed", (event) => failures.push(event));
      await expect(pool.run(fail(`the hub refused ${SECRET}`))).rejects.toThrow(/the hub refused/);
    }
    expect(failures).toEqual([
      expect.objectContaining({ error: { type: "ValueError", message: "the hub refused [redacted]" } }),
    ]);
  });

  it("masks the pool's secrets in every event that carries a provider's or an error's words: provision.progress, error (the console and the dashboard print them)", async () => {
    const local = sky.Local();
    let provisions = 0;
    const provider: typeof local = {
      ...local,
      // A scheduler's queue position, a refused replacement: the words a provider sends may hold a secret.
      async provision(options) {
        provisions += 1;
        if (provisions > 1) throw new Error(`the API refused the key ${SECRET}`);
        options.progress?.({ phase: "queue", status: "started", detail: `waiting behind ${SECRET}` });
        return local.provision(options);
      },
    };
    const seen: sky.SkywardEvent[] = [];
    {
      await using pool = await sky.compute(
        {
          provider,
          nodes: sky.nodes({ desired: 1, min: 1, max: 2 }),
          image: { includes: [tasks], env: { HF_TOKEN: SECRET } },
          options: { console: false, logging: false, maxProvisionAttempts: 1 },
        },
        { onEvent: (event) => seen.push(event) },
      );
      await pool.resize(2).catch(() => undefined);
      await expect.poll(() => seen.some((event) => event.type === "error"), { timeout: 60_000 }).toBe(true);
    }
    // An error event's `cause` is the error object itself, unmasked by design (see its TSDoc).
    const texts = seen.map((event) => JSON.stringify({ ...event, cause: undefined }));
    expect(texts.filter((text) => text.includes(SECRET))).toEqual([]);
    expect(seen).toContainEqual(
      expect.objectContaining({ type: "provision.progress", detail: "waiting behind [redacted]" }),
    );
    expect(seen).toContainEqual(
      expect.objectContaining({
        type: "error",
        message: expect.stringContaining("refused the key [redacted]"),
      }),
    );
  });

  it("at the default level INFO leaves task starts and completions out; WARNING keeps failures only", async () => {
    const infoFile = join(directory, "info.log");
    const warningFile = join(directory, "warning.log");
    await Promise.all(
      [
        [infoFile, "INFO"],
        [warningFile, "WARNING"],
      ].map(async ([file, level]) => {
        await using pool = await sky.compute({
          nodes: 1,
          image: { includes: [tasks] },
          options: { console: false, logging: { file: file as string, level: level as sky.LogLevel } },
        });
        await pool.run(chatter("hello", 2));
        await expect(pool.run(fail("bad"))).rejects.toThrow(/bad/);
      }),
    );
    const info = await readLogRecords(infoFile);
    expect(info.map((record) => record.event)).toEqual(
      expect.arrayContaining(["pool.ready", "log", "task.failed"]),
    );
    expect(info.map((record) => record.event)).not.toContain("task.completed");
    expect(info.every((record) => record.level !== "DEBUG" && record.level !== "TRACE")).toBe(true);
    const warning = await readLogRecords(warningFile);
    expect(warning.map((record) => record.event)).toEqual(["task.failed"]);
  });

  it("several pools of one process share one file without tearing a line", async () => {
    const file = join(directory, "shared.log");
    const ids = await Promise.all(
      ["a", "b", "c"].map(async (tag) => {
        await using pool = await sky.compute({
          nodes: 1,
          image: { includes: [tasks] },
          options: { console: false, logging: { file, rotation: "20 KB", retention: 100 } },
        });
        await pool.run(chatter(tag, 300));
        return pool.id;
      }),
    );
    // ~150 bytes a line, 900 lines and more (~140 KB): rotated while the pools wrote. The writer
    // rotates before a write (of up to 64 KiB of queued lines) that would take the file past 20 KB,
    // so how many files there are depends on how the lines were batched; a file holds more than
    // 20 KB only when one write alone is bigger.
    const rotated = (await readdir(directory)).filter((name) => name.startsWith("shared.log."));
    expect(rotated.length).toBeGreaterThanOrEqual(2);
    for (const name of rotated) {
      const size = (await stat(join(directory, name))).size;
      expect(size).toBeGreaterThan(0);
      expect(size).toBeLessThanOrEqual(64 * 1024);
    }
    const records = await readLogRecords(file);
    for (const [index, tag] of ["a", "b", "c"].entries()) {
      const lines = records.filter((record) => record.pool === ids[index] && record.event === "log");
      expect(lines.map((record) => record.msg)).toEqual(
        Array.from({ length: 300 }, (_, line) => `${tag} line ${line}`),
      );
    }
  });

  it("an unwritable file is reported once and the pool works on", async () => {
    const errors: string[] = [];
    {
      await using pool = await sky.compute(
        {
          nodes: 1,
          image: { includes: [tasks] },
          options: { console: false, logging: { file: "/proc/skyward-cannot-write/logs/skyward.log" } },
        },
        { onEvent: (event) => event.type === "error" && errors.push(event.message) },
      );
      expect(await pool.run(chatter("x", 3))).toBe(3);
      expect(await pool.run(chatter("y", 3))).toBe(3);
    }
    expect(errors.filter((message) => message.includes("cannot be written"))).toHaveLength(1);
  });
});
