/**
 * Reading a log file with its rotated generations (`path.N` … `path.1`, `path`) while writers —
 * this process's or others' — may be rotating them.
 *
 * A rotation renames the generations one at a time, from the highest up (`path.2` → `path.3`, then
 * `path.1` → `path.2`), then `path` → `path.1`, and starts a new `path`; past `retention` the oldest
 * is deleted. A reader walking the names meanwhile can find an index empty for a moment, or meet a
 * generation twice under two names, or miss one that moved past where it looked. So the generations
 * are opened as one snapshot: every name there is opened, the names are then looked up again, and the
 * whole is redone until each name still holds the file opened under it. Their text is then read
 * through those handles (a generation deleted meanwhile still reads whole).
 */
import { type FileHandle, open, readdir, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { type LogRecord, parseLogLine } from "./log-file.js";

/** How long a reader keeps retrying for a moment no rotation is under way before taking what it has. */
const SNAPSHOT_PATIENCE_MS = 2_000;

/** One generation of a log file, opened (`openLogGenerations`): the caller reads through `handle` and closes it. */
export interface OpenLogGeneration {
  /** The name it had when opened: `path.N`, or `path` itself for the file being written. */
  readonly path: string;
  /** Its inode (the same file under a later name has the same). */
  readonly inode: number;
  /** A handle on the file, readable even after a rotation renames or deletes it. */
  readonly handle: FileHandle;
}

/** The names of the generations there now, oldest first: every `path.N` (highest first), then `path`. */
async function generationNames(path: string): Promise<string[]> {
  const prefix = `${basename(path)}.`;
  const entries = await readdir(dirname(path)).catch(() => [] as string[]);
  const indexes: number[] = [];
  for (const name of entries) {
    const suffix = name.startsWith(prefix) ? name.slice(prefix.length) : "";
    if (/^[1-9]\d*$/.test(suffix)) indexes.push(Number(suffix));
  }
  indexes.sort((a, b) => b - a);
  return [...indexes.map((index) => `${path}.${index}`), path];
}

async function openEach(names: readonly string[]): Promise<OpenLogGeneration[]> {
  const opened: OpenLogGeneration[] = [];
  for (const name of names) {
    const handle = await open(name, "r").catch(() => undefined);
    if (!handle) continue;
    try {
      opened.push({ path: name, handle, inode: (await handle.stat()).ino });
    } catch {
      await handle.close().catch(() => undefined);
    }
  }
  return opened;
}

/** Whether the names there now are exactly those opened, each still on the file opened under it. */
async function unchanged(path: string, opened: readonly OpenLogGeneration[]): Promise<boolean> {
  let present = 0;
  for (const name of await generationNames(path)) {
    const now = await stat(name).catch(() => undefined);
    if (!now) continue;
    const at = opened[present];
    if (at?.path !== name || at.inode !== now.ino) return false;
    present += 1;
  }
  return present === opened.length;
}

async function closeAll(opened: readonly OpenLogGeneration[]): Promise<void> {
  for (const generation of opened) await generation.handle.close().catch(() => undefined);
}

/**
 * Handles on a log file's generations as they were at one moment, oldest first: `path.N` … `path.1`,
 * then `path` when it is there. Each is looked up again after all are opened, and the whole redone
 * until no name has moved (a writer rotating meanwhile); past 2 s of rotations without pause, the
 * last look is taken, each file once. The caller closes every handle.
 */
export async function openLogGenerations(path: string): Promise<OpenLogGeneration[]> {
  const giveUpAt = Date.now() + SNAPSHOT_PATIENCE_MS;
  for (let attempt = 1; ; attempt += 1) {
    const opened = await openEach(await generationNames(path));
    if ((await unchanged(path, opened)) || Date.now() >= giveUpAt) {
      const once = new Map<number, OpenLogGeneration>();
      for (const generation of opened) {
        if (once.has(generation.inode)) await generation.handle.close().catch(() => undefined);
        else once.set(generation.inode, generation);
      }
      return [...once.values()];
    }
    await closeAll(opened);
    await new Promise((resolve) => setTimeout(resolve, Math.min(2 * attempt, 20)));
  }
}

/** The log file and its rotated predecessors, oldest first: `path.N` … `path.1`, `path` (those that exist). */
export async function logFileGenerations(path: string): Promise<string[]> {
  const opened = await openLogGenerations(path);
  await closeAll(opened);
  return opened.map((generation) => generation.path);
}

/**
 * Reads every record of a log file and its rotated predecessors, oldest first (for tests and tools) —
 * each line once, none skipped, also while a writer rotates the files.
 */
export async function readLogRecords(path: string): Promise<LogRecord[]> {
  const opened = await openLogGenerations(path);
  const records: LogRecord[] = [];
  try {
    for (const generation of opened) {
      const text = await generation.handle.readFile("utf8").catch(() => "");
      for (const line of text.split("\n")) {
        const record = parseLogLine(line);
        if (record) records.push(record);
      }
    }
  } finally {
    await closeAll(opened);
  }
  return records;
}
