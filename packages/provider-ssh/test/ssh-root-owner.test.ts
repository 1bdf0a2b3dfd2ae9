/**
 * A host root shared by a worker and its successor (the test bed's real sshd hosts and workers): a
 * released worker cut off (SIGSTOPped) while its TTL runs, a later pool starting its own worker in the
 * same root, then the old worker resumed past its TTL. The old worker's TTL stops it, but the cleanup
 * (the SSH provider's `selfDestruct`) is left to the root's owner: the new worker keeps its files and
 * its pool keeps working. Without a successor, a released worker's TTL still cleans the root up.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { eventually, requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/ssh_tasks.py", import.meta.url));
const info = sky.python<[], { pid: number }>("ssh_tasks:info");

/** What a pool leaves under the root, removed by the cleanup (the environment and the runtime are kept). */
const POOL_FILES = ["env.sh", "work", "worker.token", "worker.pid", "worker.json", "bootstrap.sh"];

describe.skipIf(skipReason !== undefined)(
  "a host root shared by a worker and its successor (test bed)",
  () => {
    const scratch = useTestbedAndHome({ hosts: 1, homePrefix: "skyward-ssh-root-owner-" });

    /** A one-node pool on the test bed's host; `generation` changes the image, so nothing is reattached. */
    const pool = (generation: string, ttl: number) =>
      sky.compute({
        provider: SSH({ hosts: testbedSshHosts(scratch.bed) }),
        nodes: 1,
        ttl,
        image: { includes: [tasks], env: { SKYWARD_TEST_GENERATION: generation } },
        options: { console: false, sshRetryInterval: 1 },
      });

    it("an old worker's TTL running out leaves the live successor's files alone; without one it cleans up", async () => {
      const root = scratch.bed.hosts[0]?.root as string;

      // The old worker: released with a 2 s TTL, then cut off (stopped) before the TTL runs out.
      const first = await pool("1", 2);
      const old = (await first.run(info())).pid;
      await first.close();
      process.kill(old, "SIGSTOP");
      const stoppedAt = Date.now();
      let resumed = false;
      try {
        // Another pool (another image: no reattaching) starts its worker in the same root.
        const second = await pool("2", 2);
        try {
          const successor = (await second.run(info())).pid;
          expect(successor).not.toBe(old);
          expect(readFileSync(join(root, "worker.pid"), "utf8").trim()).toBe(String(successor));

          // The old worker resumes past its TTL: it stops, without cleaning the successor's root.
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, 3_000 - (Date.now() - stoppedAt))));
          process.kill(old, "SIGCONT");
          resumed = true;
          expect(await eventually(() => !alive(old), 30_000)).toBe(true);
          await new Promise((resolve) => setTimeout(resolve, 500));

          for (const file of POOL_FILES) expect(existsSync(join(root, file)), file).toBe(true);
          expect(readFileSync(join(root, "worker.pid"), "utf8").trim()).toBe(String(successor));
          expect(readFileSync(join(root, "env.sh"), "utf8")).toContain("SKYWARD_TEST_GENERATION");
          // The successor keeps working: a task after that succeeds, on the same worker.
          expect((await second.run(info())).pid).toBe(successor);
          expect(alive(successor)).toBe(true);
        } finally {
          await second.close();
        }
      } finally {
        if (!resumed) process.kill(old, "SIGCONT");
      }

      // The plain case: the released successor's TTL runs out with no one after it — the pool's files
      // are gone, the environment is kept for a later pool.
      // The worker removes them one after another as it stops: wait for the last, then check each.
      expect(await eventually(() => POOL_FILES.every((file) => !existsSync(join(root, file))), 30_000)).toBe(
        true,
      );
      for (const file of POOL_FILES) expect(existsSync(join(root, file)), file).toBe(false);
      for (const kept of ["venv", ".content-hash", "runtime/skyward_worker.py"])
        expect(existsSync(join(root, kept)), kept).toBe(true);
    }, 300_000);
  },
);
