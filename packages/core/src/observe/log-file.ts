/**
 * The log file (`options.logging`): every pool event as one JSON line — `ts`, `level`, `pool`, `pid`,
 * `event`, `msg`, then the event's own fields — appended to `~/.skyward/logs/skyward.log` by default,
 * rotated by size (`"50 MB"`) or age (`"1 day"`), with `retention` rotated files kept as
 * `skyward.log.1` (newest) … `skyward.log.N`.
 *
 * JSON lines because a line is then both greppable (`grep '"pool":"ab12cd34"'`, `grep '"level":"ERROR"'`)
 * and parsable without ambiguity: a task's output may contain anything, newlines and brackets included,
 * and JSON escapes it, where a text prefix would leave the message's end to guesswork. `skyward logs`
 * renders the lines for people.
 *
 * Many pools in one process share one writer per file; several processes may append to the same file:
 * it is opened in append mode and every `write` holds whole lines only, so lines never interleave.
 * Writing never blocks the pool (lines are queued and written asynchronously) and never fails it: the
 * first error is reported once (an `error` event) and the pool goes on without the file. Secrets the
 * pool knows (credential-looking environment variables, the image's credential-looking `env`, the
 * provider's credential-looking settings, the worker token) are masked in every line.
 */
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { skywardHome } from "../config/home.js";
import type { ConsoleMode, LogConfig, LogLevel } from "../spec/options.js";
import { budgetLine, type ConsoleSink, clock, provisionProgressLine, seconds } from "./console.js";
import type { EventHub, SkywardEvent, SkywardEventType } from "./events.js";
import type { Redactor } from "./redact.js";

/** The log levels, most verbose first. */
export const LOG_LEVELS: readonly LogLevel[] = Object.freeze(["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"]);

/** The rank of a level: higher is more severe. */
export function logLevelRank(level: LogLevel): number {
  return LOG_LEVELS.indexOf(level);
}

/** True when `text` names a level (`"DEBUG"`, case-insensitive). */
export function isLogLevel(text: string): text is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(text);
}

/** When a log file rotates: once it would grow past `bytes`, or once it is `ms` old. */
export type LogRotation =
  | { readonly kind: "size"; readonly bytes: number }
  | { readonly kind: "time"; readonly ms: number };

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9 };
const TIME_UNITS: Record<string, number> = {
  second: 1e3,
  minute: 60e3,
  hour: 3_600e3,
  day: 86_400e3,
  week: 604_800e3,
};

/** Parses `rotation`: `"50 MB"` (decimal units: B, KB, MB, GB) or `"1 day"` (seconds … weeks). */
export function parseRotation(text: string): LogRotation {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/i.exec(text);
  const amount = match ? Number(match[1]) : Number.NaN;
  const unit = (match?.[2] ?? "").toLowerCase();
  const size = SIZE_UNITS[unit];
  if (size !== undefined && amount > 0)
    return { kind: "size", bytes: Math.max(1, Math.round(amount * size)) };
  const period = TIME_UNITS[unit.replace(/s$/, "")];
  if (period !== undefined && amount > 0) return { kind: "time", ms: amount * period };
  throw new Error(
    `logging.rotation: expected a size like "50 MB" or a period like "1 day", received "${text}"`,
  );
}

/**
 * The log file's absolute path: `~/.skyward/…` is under `$SKYWARD_HOME` when that is set (like the
 * offer cache and `known_hosts`), any other `~/…` under the home directory, a relative path under
 * `base` (default: the current directory).
 */
export function resolveLogFilePath(file: string, base: string = process.cwd()): string {
  if (file === "~/.skyward" || file.startsWith("~/.skyward/")) return join(skywardHome(), file.slice(11));
  if (file === "~" || file.startsWith("~/")) return join(homedir(), file.slice(2));
  return resolve(base, file);
}

/** One line of the log file, parsed. */
export interface LogRecord {
  /** When it happened, ISO 8601 in UTC. */
  readonly ts: string;
  readonly level: LogLevel;
  /** The pool's id. */
  readonly pool: string;
  /** The process that wrote the line. */
  readonly pid: number;
  /** The event's `type` (`task.completed`, `log`, …). */
  readonly event: string;
  /** What happened, for people. */
  readonly msg: string;
  /** The node concerned, when one is. */
  readonly node?: number | null;
  /** The event's other fields. */
  readonly [field: string]: unknown;
}

/**
 * The level of each event type, or for the three whose level depends on the event (`pool.state`,
 * `bootstrap.phase`, `task.failed`) the most severe it can be: what a log at a given level subscribes to.
 */
const TYPE_LEVEL = {
  "pool.state": "INFO",
  "pool.ready": "INFO",
  "pool.destroyed": "INFO",
  "node.provisioned": "INFO",
  "node.bootstrapped": "DEBUG",
  "node.ready": "INFO",
  "node.preempted": "WARNING",
  "node.replaced": "INFO",
  "node.destroyed": "DEBUG",
  "node.lost": "WARNING",
  "bootstrap.phase": "ERROR",
  "task.queued": "TRACE",
  "task.started": "DEBUG",
  "task.completed": "DEBUG",
  "task.failed": "ERROR",
  "task.cancelled": "DEBUG",
  metric: "DEBUG",
  log: "INFO",
  error: "ERROR",
  scaling: "INFO",
  "budget.warning": "WARNING",
  "budget.exceeded": "ERROR",
  "dashboard.ready": "INFO",
  "provision.progress": "INFO",
} as const satisfies Record<SkywardEventType, LogLevel>;

/**
 * The level of an event in the log. INFO and above is what the `"log"` console shows; DEBUG adds
 * task starts and completions, bootstraps' phase starts, node teardown and metrics; TRACE adds queueing.
 */
export function eventLogLevel(event: SkywardEvent): LogLevel {
  switch (event.type) {
    case "pool.state":
      return event.state === "ready" || event.state === "destroyed" ? "DEBUG" : "INFO";
    case "bootstrap.phase":
      return event.status === "failed" ? "ERROR" : event.status === "started" ? "DEBUG" : "INFO";
    case "task.failed":
      return event.willRetry ? "WARNING" : "ERROR";
    default:
      return TYPE_LEVEL[event.type];
  }
}

/** What an event says, for people, without its time or scope (`[node 0]`). */
export function describeEvent(event: SkywardEvent): string {
  switch (event.type) {
    case "pool.state":
      return event.state.replace("_", " ");
    case "pool.ready":
      return `ready: ${event.nodes} node${event.nodes === 1 ? "" : "s"}${seconds(event.durationMs)}`;
    case "pool.destroyed":
      return "destroyed";
    case "node.provisioned":
      return `provisioned ${event.instanceType} at ${event.provider}${event.spot ? " (spot)" : ""}: ${event.instanceId}`;
    case "node.bootstrapped":
      return `bootstrapped${seconds(event.durationMs)}`;
    case "node.ready":
      return "ready";
    case "node.preempted":
      return `preempted${event.reason ? `: ${event.reason}` : ""}`;
    case "node.replaced":
      return `replaced (was ${event.previousInstanceId})`;
    case "node.destroyed":
      return `destroyed: ${event.instanceId}`;
    case "node.lost":
      return `lost: ${event.reason}`;
    case "bootstrap.phase":
      return `${event.phase} ${event.status}${seconds(event.durationMs)}`;
    case "task.queued":
      return `${event.name} queued`;
    case "task.started":
      return `${event.name} started${event.attempt > 1 ? ` (attempt ${event.attempt})` : ""}`;
    case "task.completed":
      return `${event.name} completed${seconds(event.durationMs)}`;
    case "task.failed":
      return `${event.name} failed: ${event.error.type}: ${event.error.message}${event.willRetry ? " (retrying)" : ""}`;
    case "task.cancelled":
      return `${event.name} cancelled`;
    case "metric":
      return `${event.name} ${event.value}${event.unit ? ` ${event.unit}` : ""}`;
    case "log":
      return event.line;
    case "error":
      return event.message;
    case "scaling":
      return `scaling ${event.from} → ${event.to}: ${event.reason}`;
    case "budget.warning":
    case "budget.exceeded":
      return budgetLine(event);
    case "dashboard.ready":
      return `Dashboard: ${event.url}`;
    case "provision.progress":
      return provisionProgressLine(event);
  }
}

function redactValue(value: unknown, redactor: Redactor): unknown {
  if (typeof value === "string") return redactor.redact(value);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, redactor));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redactValue(item, redactor)]));
  }
  return value;
}

/** The log record of an event, secrets masked: the event's fields minus `cause` (and `line`/`message`, which become `msg`). */
export function eventLogRecord(event: SkywardEvent, redactor: Redactor): LogRecord {
  const { type, timestamp, poolId, ...rest } = event as SkywardEvent & Record<string, unknown>;
  const fields: Record<string, unknown> = { ...rest };
  delete fields.cause;
  if (type === "log") delete fields.line;
  if (type === "error") delete fields.message;
  return {
    ts: new Date(timestamp).toISOString(),
    level: eventLogLevel(event),
    pool: poolId,
    pid: process.pid,
    event: type,
    msg: redactor.redact(describeEvent(event)),
    ...(redactValue(fields, redactor) as Record<string, unknown>),
  };
}

/** Parses one line of a log file; undefined for anything that is not a log record. */
export function parseLogLine(line: string): LogRecord | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value = JSON.parse(line) as Record<string, unknown>;
    if (
      typeof value.ts === "string" &&
      typeof value.level === "string" &&
      isLogLevel(value.level) &&
      typeof value.pool === "string" &&
      typeof value.msg === "string"
    ) {
      return value as LogRecord;
    }
  } catch {
    // not a record
  }
  return undefined;
}

/** A record as people read it: `2026-05-01T10:00:00.000Z INFO    ab12cd34 [node 0] ready`. */
export function formatLogRecord(record: LogRecord): string {
  const scope = typeof record.node === "number" ? `[node ${record.node}]` : "[pool]";
  return `${record.ts} ${record.level.padEnd(7)} ${record.pool} ${scope} ${record.msg}`;
}

// ————————————————————————————————————————————————————————————————— the writer

/** How a {@link LogFileWriter} writes. */
export interface LogFileWriterOptions {
  /** The file's absolute path. */
  readonly path: string;
  /** When it rotates. */
  readonly rotation: LogRotation;
  /** Rotated files kept (`path.1` … `path.N`); 0 keeps none. */
  readonly retention: number;
  /** The clock for time-based rotation, ms since the epoch. Default `Date.now`. */
  readonly now?: () => number;
}

/** Lines waiting beyond this are dropped (and the drop is written once the file catches up). */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024;
/** At most this much per `write`: whole lines, so concurrent appenders never interleave within one. */
const MAX_BATCH_BYTES = 64 * 1024;
/** How far the first record of a file is looked for (its time starts a time-based rotation). */
const MAX_FIRST_LINE_BYTES = 16 * 1024 * 1024;
/** A rotation lock older than this was left by a process that died while rotating. */
const STALE_LOCK_MS = 30_000;

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * `mkdir -p` (mode 0700) by hand: Node's recursive `mkdir` never settles for some paths (under
 * `/proc`, for one), and a log file must fail, not hang.
 */
async function ensureDirectory(directory: string): Promise<void> {
  try {
    await mkdir(directory, { mode: 0o700 });
  } catch (error) {
    if (errorCode(error) === "EEXIST") return;
    const parent = dirname(directory);
    if (errorCode(error) !== "ENOENT" || parent === directory) throw error;
    await ensureDirectory(parent);
    await mkdir(directory, { mode: 0o700 }).catch((again: unknown) => {
      if (errorCode(again) !== "EEXIST") throw again;
    });
  }
}

/**
 * Appends lines to a log file, rotating it; safe with other writers (other pools, other processes) on
 * the same file. `write` never blocks or throws: lines are queued and written in the background. After
 * the first error the writer drops everything and tells its `onError` listeners once.
 */
export class LogFileWriter {
  readonly path: string;
  readonly #rotation: LogRotation;
  readonly #retention: number;
  readonly #now: () => number;
  readonly #queue: string[] = [];
  #queuedBytes = 0;
  #dropped = 0;
  #handle: Awaited<ReturnType<typeof open>> | undefined;
  #inode = -1;
  #size = 0;
  /** When the current file got its first line (time-based rotation). */
  #startedAt: number | undefined;
  #draining: Promise<void> | undefined;
  #failure: Error | undefined;
  readonly #errorListeners = new Set<(error: Error) => void>();

  constructor(options: LogFileWriterOptions) {
    this.path = options.path;
    this.#rotation = options.rotation;
    this.#retention = options.retention;
    this.#now = options.now ?? Date.now;
  }

  /** The error that stopped the writer, if one did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** Calls `listener` once when the writer fails (at once if it already has); returns a function that stops it. */
  onError(listener: (error: Error) => void): () => void {
    if (this.#failure) {
      listener(this.#failure);
      return () => {};
    }
    this.#errorListeners.add(listener);
    return () => this.#errorListeners.delete(listener);
  }

  /** Queues one line (without its line break). */
  write(line: string): void {
    if (this.#failure) return;
    const text = `${line.replaceAll("\n", "\\n")}\n`;
    if (this.#queuedBytes + text.length > MAX_QUEUED_BYTES) {
      this.#dropped += 1;
      return;
    }
    this.#queue.push(text);
    this.#queuedBytes += text.length;
    this.#draining ??= this.#drain();
  }

  /** Resolves once every line queued so far is written (or the writer failed). */
  async flush(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  /** Flushes and closes the file. Writes after this reopen it. */
  async close(): Promise<void> {
    await this.flush();
    const handle = this.#handle;
    this.#handle = undefined;
    await handle?.close().catch(() => undefined);
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#failure) {
        let batch = "";
        while (
          this.#queue.length > 0 &&
          (batch === "" || batch.length + (this.#queue[0] as string).length <= MAX_BATCH_BYTES)
        ) {
          batch += this.#queue.shift() as string;
        }
        this.#queuedBytes -= batch.length;
        if (this.#dropped > 0 && this.#queue.length === 0) {
          batch += `${JSON.stringify({
            ts: new Date(this.#now()).toISOString(),
            level: "WARNING",
            pool: "",
            pid: process.pid,
            event: "log.dropped",
            msg: `${this.#dropped} log lines dropped: the file could not keep up`,
          })}\n`;
          this.#dropped = 0;
        }
        await this.#append(Buffer.from(batch));
      }
    } catch (error) {
      this.#fail(error instanceof Error ? error : new Error(String(error)));
    } finally {
      this.#draining = undefined;
    }
  }

  #fail(error: Error): void {
    this.#failure = error;
    this.#queue.length = 0;
    this.#queuedBytes = 0;
    const handle = this.#handle;
    this.#handle = undefined;
    handle?.close().catch(() => undefined);
    for (const listener of [...this.#errorListeners]) {
      try {
        listener(error);
      } catch {
        // a listener's failure is not the log's
      }
    }
    this.#errorListeners.clear();
  }

  async #append(bytes: Buffer): Promise<void> {
    await this.#ensureCurrent();
    if (this.#shouldRotate(bytes.length)) await this.#rotate();
    const handle = this.#handle;
    if (!handle) throw new Error(`${this.path} is not open`);
    let offset = 0;
    while (offset < bytes.length) {
      const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
      offset += bytesWritten;
    }
    this.#size += bytes.length;
    this.#startedAt ??= this.#now();
  }

  /** Opens the file, or reopens it when another writer rotated it (or someone removed it) meanwhile. */
  async #ensureCurrent(): Promise<void> {
    if (!this.#handle) return this.#open();
    let current: Awaited<ReturnType<typeof stat>>;
    try {
      current = await stat(this.path);
    } catch (error) {
      if (errorCode(error) === "ENOENT") return this.#open();
      throw error;
    }
    if (current.ino !== this.#inode) return this.#open();
    this.#size = current.size;
  }

  async #open(): Promise<void> {
    const previous = this.#handle;
    this.#handle = undefined;
    await previous?.close().catch(() => undefined);
    await ensureDirectory(dirname(this.path));
    // "a+": appends, and reads the first line (time-based rotation).
    const handle = await open(this.path, "a+", 0o600);
    this.#handle = handle;
    const stats = await handle.stat();
    this.#inode = stats.ino;
    this.#size = stats.size;
    this.#startedAt = stats.size > 0 ? await this.#firstLineTime(stats.mtimeMs) : undefined;
  }

  /** When the current file was started: its first record's time (its mtime when that is unreadable). */
  async #firstLineTime(fallback: number): Promise<number> {
    if (this.#rotation.kind !== "time") return fallback;
    const handle = this.#handle;
    if (!handle) return fallback;
    // Up to its first line break, however far (a long task line may come first), within a bound.
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < MAX_FIRST_LINE_BYTES; ) {
      const { bytesRead, buffer } = await handle.read(Buffer.alloc(64 * 1024), 0, 64 * 1024, offset);
      if (bytesRead === 0) break;
      const chunk = buffer.subarray(0, bytesRead);
      const end = chunk.indexOf(0x0a);
      chunks.push(end < 0 ? chunk : chunk.subarray(0, end));
      if (end >= 0) break;
      offset += bytesRead;
    }
    const first = Buffer.concat(chunks).toString("utf8");
    const time = Date.parse(parseLogLine(first)?.ts ?? "");
    return Number.isFinite(time) ? time : fallback;
  }

  #shouldRotate(incoming: number): boolean {
    if (this.#size === 0) return false;
    if (this.#rotation.kind === "size") return this.#size + incoming > this.#rotation.bytes;
    return this.#startedAt !== undefined && this.#now() >= this.#startedAt + this.#rotation.ms;
  }

  /**
   * Renames `path` → `path.1` (shifting older ones up, dropping those past `retention`) and starts a
   * new file. A lock file keeps two writers from rotating at once; one that finds it held writes on
   * and sees the new file on its next batch.
   */
  async #rotate(): Promise<void> {
    const lock = `${this.path}.lock`;
    let lockHandle: Awaited<ReturnType<typeof open>>;
    try {
      lockHandle = await open(lock, "wx", 0o600);
    } catch (error) {
      if (errorCode(error) !== "EEXIST") throw error;
      const held = await stat(lock).catch(() => undefined);
      if (held && Date.now() - held.mtimeMs > STALE_LOCK_MS) await rm(lock, { force: true });
      return;
    }
    try {
      const current = await stat(this.path).catch(() => undefined);
      if (current === undefined || current.ino !== this.#inode) return await this.#open();
      if (this.#retention === 0) {
        await rm(this.path, { force: true });
      } else {
        for (let index = this.#retention; ; index += 1) {
          try {
            await rm(`${this.path}.${index}`);
          } catch (error) {
            if (errorCode(error) === "ENOENT") break;
            throw error;
          }
        }
        for (let index = this.#retention - 1; index >= 1; index -= 1) {
          await rename(`${this.path}.${index}`, `${this.path}.${index + 1}`).catch((error: unknown) => {
            if (errorCode(error) !== "ENOENT") throw error;
          });
        }
        await rename(this.path, `${this.path}.1`);
      }
      await this.#open();
    } finally {
      await lockHandle.close().catch(() => undefined);
      await rm(lock, { force: true });
    }
  }
}

// ————————————————————————————————————————————————————————————————— pools

interface SharedWriter {
  readonly writer: LogFileWriter;
  users: number;
}

/** One writer per file in this process, so the process's pools never race each other rotating it. */
const sharedWriters = new Map<string, SharedWriter>();

function acquireWriter(options: LogFileWriterOptions): SharedWriter {
  const existing = sharedWriters.get(options.path);
  // A failed writer stays failed for the pools that use it; a new pool tries the file afresh.
  if (existing && !existing.writer.failure) {
    existing.users += 1;
    return existing;
  }
  const shared = { writer: new LogFileWriter(options), users: 1 };
  sharedWriters.set(options.path, shared);
  return shared;
}

async function releaseWriter(shared: SharedWriter): Promise<void> {
  shared.users -= 1;
  if (shared.users > 0) return shared.writer.flush();
  if (sharedWriters.get(shared.writer.path) === shared) sharedWriters.delete(shared.writer.path);
  await shared.writer.close();
}

/** What a pool tells {@link attachLogFile}. */
export interface AttachLogFileOptions {
  /** The pool's id. */
  readonly poolId: string;
  /** The pool's `logging` option. */
  readonly logging: LogConfig | false;
  /** The pool's `console` option: a silent console stays silent whatever `logging.console` says. */
  readonly console: boolean | ConsoleMode;
  /** Masks the pool's secrets in every line. */
  readonly redactor: Redactor;
  /** Where `logging.console` echoes DEBUG and TRACE lines. Default `process.stderr`. */
  readonly sink?: ConsoleSink;
  /** The writer's clock (time-based rotation). Default `Date.now`. */
  readonly now?: () => number;
}

/** A pool's connection to its log file. */
export interface LogFileAttachment {
  /** The file written, or undefined when logging is off. */
  readonly path: string | undefined;
  /** Stops logging this pool's events and resolves once its lines are written. */
  close(): Promise<void>;
}

/**
 * Writes the hub's events at `logging.level` and above to the log file until `close()`. With
 * `logging.console` (and a console that is not silent) the DEBUG and TRACE lines, which the console
 * does not show itself, are echoed there too; INFO and above are the console's own lines already.
 * A file that cannot be written is reported once as an `error` event; the pool goes on without it.
 */
export function attachLogFile(hub: EventHub, options: AttachLogFileOptions): LogFileAttachment {
  const logging = options.logging;
  if (logging === false) return { path: undefined, close: async () => {} };
  const path = resolveLogFilePath(logging.file);
  const shared = acquireWriter({
    path,
    rotation: parseRotation(logging.rotation),
    retention: logging.retention,
    ...(options.now ? { now: options.now } : {}),
  });
  const writer = shared.writer;
  const threshold = logLevelRank(logging.level);
  const silentConsole = options.console === false || options.console === "silent";
  const echo = logging.console && !silentConsole && threshold < logLevelRank("INFO");
  const sink = options.sink ?? process.stderr;
  let closed = false;

  const record = (event: SkywardEvent) => {
    const level = eventLogLevel(event);
    if (logLevelRank(level) < threshold) return;
    const entry = eventLogRecord(event, options.redactor);
    writer.write(JSON.stringify(entry));
    if (echo && logLevelRank(level) < logLevelRank("INFO")) {
      const scope = typeof entry.node === "number" ? `node ${entry.node}` : "pool";
      sink.write(`${clock(event.timestamp)} [${scope}] ${level} ${entry.msg}\n`);
    }
  };
  // Only the types that can reach the level, so events nobody else wants are not built for the log's sake.
  const unsubscribe = (Object.keys(TYPE_LEVEL) as SkywardEventType[])
    .filter((type) => logLevelRank(TYPE_LEVEL[type]) >= threshold)
    .map((type) => hub.on(type, record));
  const stopErrors = writer.onError((error) => {
    if (closed) return;
    hub.emit({
      type: "error",
      timestamp: Date.now(),
      poolId: options.poolId,
      message: options.redactor.redact(
        `the log file ${path} cannot be written (${error.message}); the pool goes on without it`,
      ),
    });
  });

  return {
    path,
    async close() {
      if (closed) return;
      closed = true;
      for (const off of unsubscribe) off();
      stopErrors();
      await releaseWriter(shared);
    },
  };
}
