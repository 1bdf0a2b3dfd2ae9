import { mkdtemp, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rotatedSince } from "./rotated-since.js";

let directory: string;
let path: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-rotated-"));
  path = join(directory, "skyward.log");
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** Writes `text` to `file`, dated `secondsAgo` back; its inode and that date. */
async function generation(file: string, text: string, secondsAgo: number) {
  await writeFile(file, text);
  const when = new Date(Date.now() - secondsAgo * 1000);
  await utimes(file, when, when);
  const info = await stat(file);
  return { inode: info.ino, mtimeMs: info.mtimeMs };
}

describe("rotatedSince", () => {
  it("reads the generations between the one left and the current one, oldest first", async () => {
    const left = await generation(`${path}.3`, "g1\n", 30);
    await generation(`${path}.2`, "g2\n", 20);
    await generation(`${path}.1`, "g3\n", 10);
    const current = await generation(path, "g4\n", 0);
    expect(await rotatedSince(path, left, current.inode)).toEqual(["g2\n", "g3\n"]);
  });

  it("passes over the index a writer's rotation has emptied for a moment (path.1 moved up, path not yet)", async () => {
    // The writer shifts path.N to path.N+1 from the highest down, then path to path.1: in between,
    // path.1 is missing while path.2 holds the generation the follower has not read.
    const left = await generation(`${path}.3`, "g1\n", 30);
    await generation(`${path}.2`, "g2\n", 20);
    const current = await generation(path, "g3\n", 10);
    expect(await rotatedSince(path, left, current.inode)).toEqual(["g2\n"]);
  });

  it("reads a generation once, by its inode, and not the one opened as current nor older ones", async () => {
    const old = await generation(`${path}.4`, "older than left\n", 60);
    const left = await generation(`${path}.3`, "g1\n", 30);
    const current = await generation(`${path}.2`, "now current, rotated already\n", 20);
    await generation(`${path}.1`, "g3\n", 10);
    await rename(`${path}.4`, `${path}.9`); // an older generation further up: never reached past left
    expect(old.inode).not.toBe(left.inode);
    expect(await rotatedSince(path, left, current.inode)).toEqual(["g3\n"]);
  });

  it("reads nothing older than the file left when it was removed rather than rotated", async () => {
    await generation(`${path}.1`, "older generation\n", 3600);
    const left = { inode: -1, mtimeMs: Date.now() - 1000 }; // gone: no generation has its inode
    const current = await generation(path, "fresh\n", 0);
    expect(await rotatedSince(path, left, current.inode)).toEqual([]);
  });
});
