/** `skyward logs`: prints (and follows) the pools' log file, filtered by pool and level. */
import { open, stat } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import type { LogLevel } from "@skyward/core";
import { loadConfig } from "@skyward/core/config";
import {
  formatLogRecord,
  isLogLevel,
  type LogRecord,
  logLevelRank,
  type OpenLogGeneration,
  openLogGenerations,
  parseLogLine,
  resolveLogFilePath,
} from "@skyward/core/logs";
import type { CommandContext } from "./command-context.js";
import { rotatedSince } from "./rotated-since.js";
import { UsageError } from "./usage-error.js";

/** The `skyward logs --help` text. */
export const LOGS_HELP = `Usage: skyward logs [options]

Prints the last lines of the pools' log file (options.logging), oldest first, reading through rotated
files (skyward.log.1, .2, …) when the current one has fewer.

Options:
  --file PATH     the log file (default: logging.file of the pools in skyward.toml, else
                  $SKYWARD_HOME/logs/skyward.log, i.e. ~/.skyward/logs/skyward.log)
  --pool ID       only this pool's lines
  --level LEVEL   only lines at LEVEL and above: TRACE, DEBUG, INFO, WARNING or ERROR
  --lines N       how many lines (default 100; 0 with --follow prints only new ones)
  --follow, -f    keep printing lines as they are written, across rotations, until Ctrl-C
  --json          print the records as JSON lines, as stored
`;

/** What `skyward logs` was asked for. */
export interface LogsOptions {
  /** The log file as given (`~` allowed), or undefined for the configured/default one. */
  readonly file: string | undefined;
  /** Only this pool's lines. */
  readonly pool: string | undefined;
  /** The minimum level. */
  readonly level: LogLevel | undefined;
  /** How many lines at most before following. */
  readonly lines: number;
  /** Keep printing new lines. */
  readonly follow: boolean;
  /** Print the stored JSON lines. */
  readonly json: boolean;
}

/** How often `--follow` looks for new lines. */
const FOLLOW_INTERVAL_MS = 200;

/** `--level warn` → `"WARNING"`; a usage error naming the flag for anything else. */
export function parseLevelFlag(text: string | undefined): LogLevel | undefined {
  if (text === undefined) return undefined;
  const upper = text.trim().toUpperCase();
  const level = upper === "WARN" ? "WARNING" : upper;
  if (!isLogLevel(level)) {
    throw new UsageError(`--level expects TRACE, DEBUG, INFO, WARNING or ERROR, received "${text}"`);
  }
  return level;
}

/** `--lines 20` → 20; a usage error naming the flag unless a whole number >= 0. */
export function parseLinesFlag(text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isInteger(value) || value < 0) {
    throw new UsageError(`--lines expects a whole number >= 0, received "${text}"`);
  }
  return value;
}

/** The file to read: `--file`, else the one the project's pools name, else the default. */
async function logFilePath(context: CommandContext, file: string | undefined): Promise<string> {
  // Relative paths: --file's and skyward.toml's alike are under the project directory.
  if (file !== undefined) return resolveLogFilePath(file, context.cwd);
  const config = await loadConfig({
    cwd: context.cwd,
    ...(context.home !== undefined ? { home: context.home } : {}),
  });
  const named = new Set<string>();
  for (const pool of Object.values(config.pools)) {
    const logging = pool.options.logging;
    if (typeof logging === "object" && logging.file !== undefined)
      named.add(resolveLogFilePath(logging.file, context.cwd));
  }
  if (named.size > 1) {
    throw new UsageError(
      `the pools in skyward.toml log to several files (${[...named].join(", ")}): choose one with --file`,
    );
  }
  return [...named][0] ?? resolveLogFilePath("~/.skyward/logs/skyward.log");
}

/** Prints the lines of a log file that pass the filters; lines that are not records only when nothing filters. */
class LinePrinter {
  constructor(
    private readonly context: CommandContext,
    private readonly options: LogsOptions,
  ) {}

  /** The text to print for a line, or undefined when the filters leave it out. */
  render(line: string): string | undefined {
    if (line.trim() === "") return undefined;
    const record = parseLogLine(line);
    if (!record) {
      const filtered =
        this.options.pool !== undefined || this.options.level !== undefined || this.options.json;
      return filtered ? undefined : line;
    }
    if (!this.matches(record)) return undefined;
    return this.options.json ? line : formatLogRecord(record);
  }

  matches(record: LogRecord): boolean {
    if (this.options.pool !== undefined && record.pool !== this.options.pool) return false;
    if (this.options.level !== undefined && logLevelRank(record.level) < logLevelRank(this.options.level))
      return false;
    return true;
  }

  print(texts: readonly string[]): void {
    if (texts.length > 0) this.context.out(`${texts.join("\n")}\n`);
  }
}

/** The last `count` printable lines of the current file's text and then its rotated predecessors (newest first). */
async function lastLines(
  current: string,
  rotatedNewestFirst: readonly OpenLogGeneration[],
  printer: LinePrinter,
  count: number,
): Promise<string[]> {
  if (count === 0) return [];
  const chunks: string[][] = [];
  let total = 0;
  const add = (text: string) => {
    const rendered = text.split("\n").flatMap((line) => printer.render(line) ?? []);
    chunks.unshift(rendered);
    total += rendered.length;
  };
  add(current);
  for (const generation of rotatedNewestFirst) {
    if (total >= count) break;
    add(await generation.handle.readFile("utf8").catch(() => ""));
  }
  return chunks.flat().slice(-count);
}

type FileHandle = Awaited<ReturnType<typeof open>>;

/** A file being read line by line from an offset. */
class FollowedFile {
  #offset: number;
  #partial = "";
  // A read may end inside a multi-byte character: its first bytes wait here for the rest.
  #decoder = new StringDecoder("utf8");
  readonly #buffer = Buffer.alloc(256 * 1024);

  constructor(
    readonly handle: FileHandle,
    readonly inode: number,
    offset: number,
  ) {
    this.#offset = offset;
  }

  get offset(): number {
    return this.#offset;
  }

  /** Starts over (the file was truncated in place). */
  rewind(): void {
    this.#offset = 0;
    this.#partial = "";
    this.#decoder = new StringDecoder("utf8");
  }

  /** The whole lines written since the last call. */
  async newLines(): Promise<string[]> {
    const lines: string[] = [];
    for (;;) {
      const { bytesRead } = await this.handle.read(this.#buffer, 0, this.#buffer.length, this.#offset);
      if (bytesRead === 0) return lines;
      this.#offset += bytesRead;
      const parts = (this.#partial + this.#decoder.write(this.#buffer.subarray(0, bytesRead))).split("\n");
      this.#partial = parts.pop() ?? "";
      lines.push(...parts);
    }
  }
}

async function openFollowed(path: string, offset = 0): Promise<FollowedFile | undefined> {
  const handle = await open(path, "r").catch(() => undefined);
  return handle ? new FollowedFile(handle, (await handle.stat()).ino, offset) : undefined;
}

/** A rotated file is still read this long, for lines a writer appended before it saw the rotation. */
const ROTATED_GRACE_MS = 2000;

/**
 * Follows `path`: new lines as they come; when the file is rotated, the rest of the old one, then every
 * generation rotated meanwhile (found by the old file's inode among `path.1`, `path.2`, …), then the new one.
 */
async function follow(
  path: string,
  first: FollowedFile | undefined,
  printer: LinePrinter,
  signal: AbortSignal,
): Promise<void> {
  let current = first;
  const rotated: { file: FollowedFile; until: number }[] = [];
  const emit = (lines: readonly string[]) =>
    printer.print(lines.flatMap((line) => printer.render(line) ?? []));
  const wait = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, FOLLOW_INTERVAL_MS);
      signal.addEventListener("abort", done, { once: true });
    });

  try {
    while (!signal.aborted) {
      for (const entry of [...rotated]) {
        emit(await entry.file.newLines());
        if (Date.now() > entry.until) {
          rotated.splice(rotated.indexOf(entry), 1);
          await entry.file.handle.close();
        }
      }
      if (current) emit(await current.newLines());
      const now = await stat(path).catch(() => undefined);
      // The same inode is not always the same file: one followed through rotations past the
      // retention is deleted, and the new file may get its number (then it is a rotation too).
      const deleted = current !== undefined && (await current.handle.stat()).nlink === 0;
      if (now && (now.ino !== current?.inode || deleted)) {
        const left = current;
        // Opened first: a generation rotated between the look above and this open is then one of
        // the files between the one left and the one opened, read below — never skipped.
        current = await openFollowed(path);
        if (left) {
          emit(await left.newLines());
          rotated.push({ file: left, until: Date.now() + ROTATED_GRACE_MS });
          // Generations newer than the one just left and not the one opened: oldest first.
          const leftStat = await left.handle.stat();
          const missed = await rotatedSince(
            path,
            { inode: left.inode, mtimeMs: leftStat.mtimeMs },
            current?.inode,
          );
          for (const text of missed) emit(text.split("\n"));
        }
        continue;
      }
      if (now && current && now.size < current.offset) current.rewind();
      await wait();
    }
  } finally {
    await current?.handle.close();
    for (const entry of rotated) await entry.file.handle.close();
  }
}

/** Runs `skyward logs`; resolves with the exit code. */
export async function logsCommand(context: CommandContext, options: LogsOptions): Promise<number> {
  const path = await logFilePath(context, options.file);
  const printer = new LinePrinter(context, options);
  // One snapshot of the generations, read through their handles: a writer rotating meanwhile moves
  // nothing under the reader, and the current file is read through the handle following goes on with.
  const generations = await openLogGenerations(path);
  const newest = generations.at(-1);
  const first = newest?.path === path ? new FollowedFile(newest.handle, newest.inode, 0) : undefined;
  const rotated = generations.filter((generation) => generation !== newest || !first).reverse();
  try {
    if (generations.length === 0 && !options.follow) {
      context.err(`skyward: no log file at ${path} (pools write it as they run; --file names another)\n`);
      return 1;
    }
    const current = first ? (await first.newLines()).join("\n") : "";
    printer.print(await lastLines(current, rotated, printer, options.lines));
  } finally {
    for (const generation of rotated) await generation.handle.close().catch(() => undefined);
  }
  if (!options.follow) {
    await first?.handle.close();
    return 0;
  }
  if (!first) context.err(`skyward: waiting for ${path} to be written\n`);
  await follow(path, first, printer, context.signal);
  return 0;
}
