// Remote references across detach and attach, on a 2-node Local pool: a reference kept before the
// detach (and moved to the other node) is the attached pool's, usable without moving its bytes
// again; one a task returns while the pool is detached comes back in `collected()`, usable too;
// releasing either frees it on the workers; closing the pool stops them.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";
import { cleanUpDetached } from "./fixtures/processes.js";

const refTasks = fileURLToPath(new URL("./fixtures/ref_tasks.py", import.meta.url));
const waitTasks = fileURLToPath(new URL("./fixtures/detach_collection_tasks.py", import.meta.url));

const makeBlob = sky.python<[size: number], Uint8Array>("ref_tasks:make_blob");
const blobInfo = sky.python<[blob: Uint8Array], { length: number; first: number; node: number }>(
  "ref_tasks:blob_info",
);
const waitOn = sky.python<[queue: string, value: string], string>("detach_collection_tasks:wait_on");
const held = sky.python<[], { node: number; count: number; bytes: number; ids: string[] }>(
  "skyward.refs:held",
);

const PAYLOAD = 2 * 1024 * 1024;
/** Far below the payload: what task messages, pings and small results take. */
const OVERHEAD = 64 * 1024;

function bytesMoved(pool: sky.Pool): number {
  return pool.traffic().reduce((total, entry) => total + entry.sent + entry.received, 0);
}

describe("remote references across detach and attach", () => {
  it("carries the references the nodes keep, and those tasks return while detached", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "skyward-refs-detach-"));
    let id = "";
    let pids: number[] = [];
    try {
      const pool = await sky.compute({
        provider: sky.Local({ workRoot }),
        nodes: 2,
        image: { includes: [refTasks, waitTasks] },
        options: { console: false, worker: { concurrency: 2 } },
      });
      pids = await pool.broadcast(sky.python<[], number>("os:getpid")());
      const blob = await pool.run(makeBlob(PAYLOAD).withKeep(), { target: 0 });
      // Moved to node 1 once: both nodes hold it from here.
      expect((await pool.run(blobInfo(blob), { target: 1 })).length).toBe(PAYLOAD);
      expect(blob.nodes).toEqual([0, 1]);
      // Ends, with a result kept on its node, while nobody is attached.
      void pool.run(waitOn("qk", "kept while detached").withKeep(), { target: 1 }).catch(() => undefined);
      while ((await pool.dict<string>("d").get("qk")) !== "waiting")
        await new Promise((resolve) => setTimeout(resolve, 20));
      id = await pool.detach();
      expect(blob.state).toBe("released"); // this process let go of it; the workers did not
      // The state file records the reference, not its value.
      const state = JSON.parse(
        readFileSync(join(process.env.SKYWARD_HOME as string, "pools", `${id}.json`), "utf8"),
      ) as { refs: unknown };
      expect(state.refs).toEqual([{ id: blob.id, node: 0, type: "bytes", size: blob.size, holders: [0, 1] }]);

      const again = await sky.attach(id, { options: { console: false } });
      try {
        const [kept, ...others] = again.keptRefs();
        expect(others).toEqual([]);
        expect([kept?.id, kept?.node, kept?.type, kept?.size, kept?.state, kept?.nodes]).toEqual([
          blob.id,
          0,
          "bytes",
          blob.size,
          "held",
          [0, 1],
        ]);
        expect(again.refs()).toMatchObject({ count: 1, bytes: blob.size });
        // Used on both nodes that hold it: no byte of it moves.
        const before = bytesMoved(again);
        expect(await again.run(blobInfo(kept as sky.RemoteRef<Uint8Array>), { target: 0 })).toEqual({
          length: PAYLOAD,
          first: 0,
          node: 0,
        });
        expect((await again.run(blobInfo(kept as sky.RemoteRef<Uint8Array>), { target: 1 })).node).toBe(1);
        expect(bytesMoved(again) - before).toBeLessThan(OVERHEAD);

        await again.queue<string>("qk").put("go");
        const [outcome] = await again.collected();
        const later = outcome?.ok ? outcome.value : undefined;
        expect(later).toBeInstanceOf(sky.RemoteRef);
        const ref = later as sky.RemoteRef<string>;
        expect([ref.node, ref.state]).toEqual([1, "held"]);
        expect(await ref.fetch()).toBe("kept while detached");
        expect(again.refs().count).toBe(2);

        // Released: gone from the client's account and from the workers.
        await kept?.release();
        await ref.release();
        expect(again.refs().count).toBe(0);
        for (const node of [0, 1]) expect((await again.run(held(), { target: node })).ids).toEqual([]);
      } finally {
        await again.close();
      }
    } finally {
      cleanUpDetached({ pids, id, workRoot });
    }
  }, 120_000);
});
