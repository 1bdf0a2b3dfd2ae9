/** `skyward logs --follow`: the generations a writer rotated past the follower between two looks. */
import { open, readdir } from "node:fs/promises";
import { basename, dirname } from "node:path";

/** The highest `N` of the `path.N` generations there now (0 when none). */
async function highestGeneration(path: string): Promise<number> {
  const prefix = `${basename(path)}.`;
  const names = await readdir(dirname(path)).catch(() => [] as string[]);
  let highest = 0;
  for (const name of names) {
    const suffix = name.startsWith(prefix) ? name.slice(prefix.length) : "";
    if (/^\d+$/.test(suffix)) highest = Math.max(highest, Number(suffix));
  }
  return highest;
}

/**
 * The text of every generation rotated after the one followed until now (`left`: its inode and its
 * last write) and other than the one opened now (`currentInode`), oldest first — the files between
 * the two among `path.1`, `path.2`, …. Each is read through a handle opened on it (its inode, not its
 * name: a writer rotating meanwhile renames them one by one, upwards), an index found empty in the
 * middle of such a rotation is passed over while higher ones exist, and a generation met twice (moved
 * up while looked at) is read once. Written after `left`, too: when the file was removed rather than
 * rotated, older generations are not reprinted.
 */
export async function rotatedSince(
  path: string,
  left: { readonly inode: number; readonly mtimeMs: number },
  currentInode: number | undefined,
): Promise<string[]> {
  const texts: string[] = [];
  const seen = new Set<number>();
  let highest = await highestGeneration(path);
  for (let index = 1; index <= highest; index += 1) {
    const handle = await open(`${path}.${index}`, "r").catch(() => undefined);
    if (handle) {
      try {
        const generation = await handle.stat();
        if (generation.ino === left.inode) break;
        if (
          !seen.has(generation.ino) &&
          generation.ino !== currentInode &&
          generation.mtimeMs >= left.mtimeMs
        ) {
          seen.add(generation.ino);
          texts.unshift(await handle.readFile("utf8"));
        }
      } finally {
        await handle.close();
      }
    }
    if (index === highest) highest = await highestGeneration(path); // rotated further meanwhile
  }
  return texts;
}
