import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { logConfig } from "../spec/options.js";
import { EventHub, type SkywardEvent } from "./events.js";
import {
  attachLogFile,
  eventLogLevel,
  formatLogRecord,
  LogFileWriter,
  parseLogLine,
  parseRotation,
  resolveLogFilePath,
} from "./log-file.js";
import { logFileGenerations, readLogRecords } from "./log-generations.js";
import { REDACTED, Redactor } from "./redact.js";

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-log-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

const DAY = 86_400_000;

function line(index: number, at = Date.now()): string {
  return JSON.stringify({
    ts: new Date(at).toISOString(),
    level: "INFO",
    pool: "p1",
    pid: 1,
    event: "log",
    msg: `line ${index} ${"x".repeat(60)}`,
  });
}

describe("rotation settings and paths", () => {
  it("parses sizes in decimal units and periods in seconds to weeks", () => {
    expect(parseRotation("50 MB")).toEqual({ kind: "size", bytes: 50_000_000 });
    expect(parseRotation("1.5kb")).toEqual({ kind: "size", bytes: 1500 });
    expect(parseRotation("1 day")).toEqual({ kind: "time", ms: DAY });
    expect(parseRotation("2 hours")).toEqual({ kind: "time", ms: 7_200_000 });
    expect(() => parseRotation("soon")).toThrow(/logging\.rotation/);
  });

  it("puts ~/.skyward under $SKYWARD_HOME, other ~ paths under the home directory", () => {
    const saved = process.env.SKYWARD_HOME;
    try {
      process.env.SKYWARD_HOME = "/srv/sky";
      expect(resolveLogFilePath("~/.skyward/logs/skyward.log")).toBe("/srv/sky/logs/skyward.log");
      delete process.env.SKYWARD_HOME;
      expect(resolveLogFilePath("~/.skyward/logs/skyward.log")).toBe(
        join(homedir(), ".skyward/logs/skyward.log"),
      );
      expect(resolveLogFilePath("~/runs/a.log")).toBe(join(homedir(), "runs/a.log"));
      expect(resolveLogFilePath("/var/log/x.log")).toBe("/var/log/x.log");
      expect(resolveLogFilePath("logs/x.log", "/srv/project")).toBe("/srv/project/logs/x.log");
    } finally {
      if (saved === undefined) delete process.env.SKYWARD_HOME;
      else process.env.SKYWARD_HOME = saved;
    }
  });
});

describe("LogFileWriter", () => {
  it("creates the file 0600 in a new directory and appends whole lines", async () => {
    const path = join(directory, "deep", "logs", "skyward.log");
    const writer = new LogFileWriter({ path, rotation: parseRotation("50 MB"), retention: 10 });
    for (let index = 0; index < 500; index += 1) writer.write(line(index));
    await writer.close();
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const records = await readLogRecords(path);
    expect(records.map((record) => record.msg.split(" ")[1])).toEqual(
      Array.from({ length: 500 }, (_, index) => String(index)),
    );
  });

  it("rotates by size, keeps `retention` rotated files and drops older ones", async () => {
    const path = join(directory, "skyward.log");
    const writer = new LogFileWriter({ path, rotation: parseRotation("1 KB"), retention: 2 });
    for (let index = 0; index < 60; index += 1) {
      writer.write(line(index));
      await writer.flush();
    }
    await writer.close();
    expect((await readdir(directory)).sort()).toEqual(["skyward.log", "skyward.log.1", "skyward.log.2"]);
    for (const file of await logFileGenerations(path))
      expect((await stat(file)).size).toBeLessThanOrEqual(1000);
    const kept = (await readLogRecords(path)).map((record) => Number(record.msg.split(" ")[1]));
    // The newest lines survive, in order and without gaps; the oldest were dropped with the files past retention.
    expect(kept.at(-1)).toBe(59);
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, index) => 60 - kept.length + index));
    expect(kept.length).toBeLessThan(60);
  });

  it("with retention 0 keeps no rotated file", async () => {
    const path = join(directory, "skyward.log");
    const writer = new LogFileWriter({ path, rotation: parseRotation("500 B"), retention: 0 });
    for (let index = 0; index < 20; index += 1) {
      writer.write(line(index));
      await writer.flush();
    }
    await writer.close();
    expect(await readdir(directory)).toEqual(["skyward.log"]);
  });

  it("rotates by age on its clock, also for a file an earlier run started", async () => {
    const path = join(directory, "skyward.log");
    let now = Date.parse("2026-05-01T00:00:00Z");
    const writer = new LogFileWriter({
      path,
      rotation: parseRotation("1 day"),
      retention: 5,
      now: () => now,
    });
    writer.write(line(1, now));
    await writer.flush();
    now += DAY - 1000;
    writer.write(line(2, now));
    await writer.flush();
    expect(await logFileGenerations(path)).toEqual([path]);
    now += 2000;
    writer.write(line(3, now));
    await writer.close();
    expect(await logFileGenerations(path)).toEqual([`${path}.1`, path]);
    expect((await readFile(`${path}.1`, "utf8")).trim().split("\n")).toHaveLength(2);

    // A later process: the current file began with line 3, so it is due a day after line 3's time.
    const later = new LogFileWriter({ path, rotation: parseRotation("1 day"), retention: 5, now: () => now });
    now += DAY / 2;
    later.write(line(4, now));
    await later.flush();
    expect(await logFileGenerations(path)).toEqual([`${path}.1`, path]);
    now += DAY;
    later.write(line(5, now));
    await later.close();
    expect(await logFileGenerations(path)).toEqual([`${path}.2`, `${path}.1`, path]);
    expect((await readLogRecords(path)).map((record) => record.msg.split(" ")[1])).toEqual([
      "1",
      "2",
      "3",
      "4",
      "5",
    ]);
  });

  it("reads when a file an earlier run started began from its first record, however long that record is", async () => {
    const path = join(directory, "skyward.log");
    const began = Date.now() - 2 * DAY;
    // A task's long line first (a printed dict, a traceback): past one 4 KiB read.
    const long = JSON.stringify({ ...JSON.parse(line(1, began)), msg: `line 1 ${"y".repeat(8000)}` });
    await writeFile(path, `${long}\n${line(2, began + 1000)}\n`);
    const writer = new LogFileWriter({ path, rotation: parseRotation("1 day"), retention: 5 });
    writer.write(line(3));
    await writer.close();
    expect(await logFileGenerations(path)).toEqual([`${path}.1`, path]);
  });

  it("several writers on one file (as several processes) rotate it together without losing or tearing a line", async () => {
    const path = join(directory, "skyward.log");
    const writers = Array.from(
      { length: 3 },
      () => new LogFileWriter({ path, rotation: parseRotation("4 KB"), retention: 1000 }),
    );
    const rounds = 100;
    for (let round = 0; round < rounds; round += 1) {
      writers.forEach((writer, index) => {
        writer.write(line(index * rounds + round));
      });
      if (round % 7 === 0) await Promise.all(writers.map((writer) => writer.flush()));
    }
    await Promise.all(writers.map((writer) => writer.close()));
    const files = await logFileGenerations(path);
    expect(files.length).toBeGreaterThan(3);
    let lines = 0;
    for (const file of files) {
      for (const text of (await readFile(file, "utf8")).split("\n").filter(Boolean)) {
        expect(parseLogLine(text)).toBeDefined();
        lines += 1;
      }
    }
    expect(lines).toBe(3 * rounds);
    const seen = new Set((await readLogRecords(path)).map((record) => record.msg.split(" ")[1]));
    expect(seen.size).toBe(3 * rounds);
  });

  it("reports the first error once, then drops lines without throwing", async () => {
    const blocker = join(directory, "not-a-directory");
    await writeFile(blocker, "");
    const writer = new LogFileWriter({
      path: join(blocker, "skyward.log"),
      rotation: parseRotation("1 MB"),
      retention: 1,
    });
    const errors: Error[] = [];
    writer.onError((error) => errors.push(error));
    writer.write(line(1));
    await writer.flush();
    writer.write(line(2));
    await writer.flush();
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/ENOTDIR|EEXIST/);
    expect(writer.failure).toBe(errors[0]);
  });
});

describe("attachLogFile", () => {
  const poolId = "pool1234";
  const at = Date.parse("2026-05-01T10:00:00Z");
  const events: SkywardEvent[] = [
    { type: "pool.state", timestamp: at, poolId, state: "provisioning", previous: "requesting" },
    { type: "task.queued", timestamp: at, poolId, taskId: "t1", name: "tasks:add" },
    { type: "task.started", timestamp: at, poolId, taskId: "t1", name: "tasks:add", node: 1, attempt: 1 },
    { type: "metric", timestamp: at, poolId, node: 1, name: "cpu", value: 12.5, unit: "%" },
    {
      type: "log",
      timestamp: at,
      poolId,
      node: 1,
      worker: 0,
      stream: "stdout",
      line: "token is hf_0123456789abcdef",
      taskId: "t1",
    },
    {
      type: "task.failed",
      timestamp: at,
      poolId,
      taskId: "t1",
      name: "tasks:add",
      node: 1,
      durationMs: 5,
      error: { type: "ValueError", message: "bad hf_0123456789abcdef" },
      willRetry: false,
    },
    { type: "error", timestamp: at, poolId, message: "something broke", cause: new Error("inner") },
  ];

  function emitAll(
    level: "TRACE" | "DEBUG" | "INFO" | "WARNING" | "ERROR",
    console: boolean,
    poolConsole: boolean | "log" | "silent",
  ) {
    const hub = new EventHub();
    const redactor = new Redactor();
    redactor.addEnvironment({ HF_TOKEN: "hf_0123456789abcdef" });
    const echoed: string[] = [];
    const path = join(directory, `${level}.log`);
    const attachment = attachLogFile(hub, {
      poolId,
      logging: logConfig({ file: path, level, console }),
      console: poolConsole,
      redactor,
      sink: { write: (text: string) => echoed.push(text) },
    });
    for (const event of events) hub.emit(event);
    return { attachment, echoed, path };
  }

  it("writes the events at the level and above, as JSON lines with the event's fields, secrets masked", async () => {
    const { attachment, path } = emitAll("DEBUG", false, "log");
    await attachment.close();
    const text = await readFile(path, "utf8");
    expect(text).not.toContain("hf_0123456789abcdef");
    const records = text
      .trim()
      .split("\n")
      .map((entry) => parseLogLine(entry));
    expect(records.map((record) => record?.event)).toEqual([
      "pool.state",
      "task.started",
      "metric",
      "log",
      "task.failed",
      "error",
    ]);
    expect(records[3]).toMatchObject({
      ts: "2026-05-01T10:00:00.000Z",
      level: "INFO",
      pool: poolId,
      pid: process.pid,
      event: "log",
      msg: `token is ${REDACTED}`,
      node: 1,
      stream: "stdout",
      taskId: "t1",
    });
    expect(records[4]).toMatchObject({
      level: "ERROR",
      error: { type: "ValueError", message: `bad ${REDACTED}` },
    });
    expect(records[5]).toMatchObject({ level: "ERROR", msg: "something broke" });
    expect(records[5]).not.toHaveProperty("cause");
    expect(formatLogRecord(records[3] as never)).toBe(
      `2026-05-01T10:00:00.000Z INFO    ${poolId} [node 1] token is ${REDACTED}`,
    );
  });

  it("filters by level: WARNING keeps only failures and errors, TRACE keeps queueing too", async () => {
    const warning = emitAll("WARNING", false, "log");
    await warning.attachment.close();
    expect((await readLogRecords(warning.path)).map((record) => record.event)).toEqual([
      "task.failed",
      "error",
    ]);
    const trace = emitAll("TRACE", false, "log");
    await trace.attachment.close();
    expect((await readLogRecords(trace.path)).map((record) => record.event)).toContain("task.queued");
    expect(eventLogLevel(events[1] as SkywardEvent)).toBe("TRACE");
  });

  it("echoes DEBUG lines on the console with logging.console, but never on a silent console nor at INFO", async () => {
    const echoing = emitAll("DEBUG", true, "log");
    await echoing.attachment.close();
    expect(echoing.echoed).toHaveLength(2);
    expect(echoing.echoed[0]).toMatch(/^\d\d:\d\d:\d\d \[node 1\] DEBUG tasks:add started\n$/);
    expect(echoing.echoed[1]).toMatch(/\[node 1\] DEBUG cpu 12\.5 %\n$/);
    const silent = emitAll("DEBUG", true, "silent");
    await silent.attachment.close();
    expect(silent.echoed).toEqual([]);
    const info = emitAll("INFO", true, "log");
    await info.attachment.close();
    expect(info.echoed).toEqual([]);
  });

  it("reports an unwritable file once as an error event and keeps the hub going", async () => {
    const blocker = join(directory, "blocker");
    await writeFile(blocker, "");
    const hub = new EventHub();
    const errors: string[] = [];
    hub.on("error", (event) => errors.push(event.message));
    const attachment = attachLogFile(hub, {
      poolId,
      logging: logConfig({ file: join(blocker, "skyward.log") }),
      console: false,
      redactor: new Redactor(),
    });
    for (const event of events) hub.emit(event);
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const event of events) hub.emit(event);
    await attachment.close();
    expect(errors.filter((message) => message.includes("cannot be written"))).toHaveLength(1);
    expect(errors.find((message) => message.includes("cannot be written"))).toContain(
      join(blocker, "skyward.log"),
    );
  });

  it("does nothing with logging off", async () => {
    const hub = new EventHub();
    const attachment = attachLogFile(hub, {
      poolId,
      logging: false,
      console: false,
      redactor: new Redactor(),
    });
    expect(attachment.path).toBeUndefined();
    hub.emit(events[0] as SkywardEvent);
    await attachment.close();
  });
});
