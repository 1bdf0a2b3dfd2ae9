/**
 * Detach and attach of an SSH pool that picked up a released worker of an earlier pool (same code,
 * same settings): that worker holds the earlier pool's token, not this pool's. The state file records
 * each node's own token (sealed, as the pool's is), so that the attach's handshake with that worker
 * succeeds: its task's outcome is collected and the node keeps serving.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/ssh_detach_tasks.py", import.meta.url));
const pid = sky.python<[], number>("ssh_detach_tasks:pid");
const slow = sky.python<[value: string, seconds: number], string>("ssh_detach_tasks:slow");

describe.skipIf(skipReason !== undefined)(
  "detach and attach of a pool that picked up a released worker",
  () => {
    const scratch = useTestbedAndHome({ hosts: 1, homePrefix: "skyward-ssh-reattach-adopted-" });

    it("attaches to the worker holding an earlier pool's token: its task's outcome is collected, and it runs more", async () => {
      const hosts = testbedSshHosts(scratch.bed, { indices: [0] });
      const open = () =>
        sky.compute({
          provider: SSH({ hosts }),
          nodes: 1,
          ttl: 60,
          image: { includes: [tasks] },
          options: { console: false },
        });
      const first = await open();
      const [firstPid] = await first.broadcast(pid());
      await first.close();

      // The second pool picks the released worker up: it keeps the first pool's token.
      const second = await open();
      expect(await second.broadcast(pid())).toEqual([firstPid]);
      const waiting = second.run(slow("kept", 1)).catch((error: Error) => error.name);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const id = await second.detach();
      expect(await waiting).toBe("TaskDetachedError");
      // No token in clear in the state file (each node's is sealed too).
      const state = readFileSync(`${process.env.SKYWARD_HOME}/pools/${id}.json`, "utf8");
      expect(state).not.toMatch(/[0-9a-f]{48}/);
      expect(JSON.parse(state).nodes[0].token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);

      const again = await sky.attach(id, { provider: SSH({ hosts }), options: { console: false } });
      try {
        expect(await again.collected()).toMatchObject([
          { ok: true, value: "kept", name: "ssh_detach_tasks:slow" },
        ]);
        expect(await again.broadcast(pid())).toEqual([firstPid]);
        // Detached and attached once more: the node's token is recorded again.
        const twice = await again.detach();
        const last = await sky.attach(twice, { provider: SSH({ hosts }), options: { console: false } });
        try {
          expect(await last.broadcast(pid())).toEqual([firstPid]);
        } finally {
          await last.close();
        }
      } catch (error) {
        await again.close().catch(() => undefined);
        throw error;
      }
    }, 240_000);
  },
);
