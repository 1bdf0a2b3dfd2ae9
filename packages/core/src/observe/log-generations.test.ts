import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LogFileWriter, parseRotation } from "./log-file.js";
import { logFileGenerations, readLogRecords } from "./log-generations.js";

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-log-generations-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

function line(index: number): string {
  return JSON.stringify({
    ts: new Date().toISOString(),
    level: "INFO",
    pool: "p1",
    pid: 1,
    event: "log",
    msg: `line ${index} ${"x".repeat(60)}`,
  });
}

const numbers = (records: readonly { msg: string }[]) =>
  records.map((record) => Number(record.msg.split(" ")[1]));

describe("reading a log file's generations", () => {
  it("passes over an index a rotation has emptied for a moment, reading the generations above it", async () => {
    const path = join(directory, "skyward.log");
    // A rotation half done: `path.1` has just moved up to `path.2`; `path` is not yet `path.1`.
    await writeFile(`${path}.2`, `${line(0)}\n${line(1)}\n`);
    await writeFile(path, `${line(2)}\n`);
    await writeFile(`${path}.lock`, "");
    await writeFile(`${path}.old`, `${line(99)}\n`);
    expect(await logFileGenerations(path)).toEqual([`${path}.2`, path]);
    expect(numbers(await readLogRecords(path))).toEqual([0, 1, 2]);
    await rename(path, `${path}.1`);
    expect(await logFileGenerations(path)).toEqual([`${path}.2`, `${path}.1`]);
    expect(numbers(await readLogRecords(path))).toEqual([0, 1, 2]);
  });

  it("reads every line once, in order, while a writer keeps rotating the files", async () => {
    const path = join(directory, "skyward.log");
    const writer = new LogFileWriter({ path, rotation: parseRotation("1 KB"), retention: 60 });
    const total = 300;
    let written = 0;
    const writing = (async () => {
      for (; written < total; written += 1) {
        writer.write(line(written));
        await writer.flush();
        // A pause after each line: a reader then finds moments with no rotation under way, as it
        // does beside a real pool (a writer rotating without pause for 2 s is read as it stands).
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      await writer.close();
    })();
    const reads: number[][] = [];
    let done = false;
    void writing.finally(() => {
      done = true;
    });
    while (!done) reads.push(numbers(await readLogRecords(path)));
    await writing;
    reads.push(numbers(await readLogRecords(path)));
    // Each read holds the lines written so far: from the first, none missing, none twice.
    for (const read of reads) expect(read).toEqual(Array.from({ length: read.length }, (_, index) => index));
    expect(reads.at(-1)).toHaveLength(total);
    expect(reads.filter((read) => read.length > 0 && read.length < total).length).toBeGreaterThan(3);
    expect((await logFileGenerations(path)).length).toBeGreaterThan(20);
  });
});
