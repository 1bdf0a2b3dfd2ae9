/**
 * Two pools on one of your machines at once (two scripts, two terminals, two people sharing a lab
 * box), each with its own image: the second pool's launch must not stop the worker that serves the
 * first (its tasks would be lost, and the first pool's replacement would stop the second's in turn).
 * The second is refused, naming the host and the root; the first pool carries on undisturbed. With
 * the same image, the second must not be handed the first's worker either (as a released one is).
 */
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { requireTestbed, testbedSshHosts, useTestbedAndHome } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { SSH } from "../src/index.js";
import { alive } from "./processes.js";

const skipReason = await requireTestbed();
const tasks = fileURLToPath(new URL("./fixtures/ssh_tasks.py", import.meta.url));
const sleep = sky.python<[number], number>("ssh_tasks:sleep");
const info = sky.python<[], { node: number; pid: number }>("ssh_tasks:info");

describe.skipIf(skipReason !== undefined)("two pools on one SSH host (test bed)", () => {
  const scratch = useTestbedAndHome({ hosts: 1, homePrefix: "skyward-ssh-shared-" });

  /** A pool runs a task while a second pool starts on the same host; each image's env names its pool. */
  async function secondPoolWhileFirstRuns(firstName: string, secondName: string): Promise<void> {
    const hosts = testbedSshHosts(scratch.bed);
    await using first = await sky.compute({
      provider: SSH({ hosts }),
      ttl: 30,
      image: { includes: [tasks], env: { WHICH_POOL: firstName } },
      options: { console: false },
    });
    const [before] = await first.broadcast(info());
    let retried = 0;
    first.on("task.failed", (event) => {
      if (event.willRetry) retried += 1;
    });
    // Runs while the second pool tries to start on the same host.
    const running = first.run(sleep(8));
    running.catch(() => undefined); // awaited below; a rejection must not go unhandled meanwhile
    const second = sky
      .compute({
        // Another provider object: another script's view of the same machine.
        provider: SSH({ hosts }),
        ttl: 30,
        image: { includes: [tasks], env: { WHICH_POOL: secondName } },
        options: { console: false, sshTimeout: 30 },
      })
      .then(
        async (pool) => {
          await pool.close();
          return undefined;
        },
        (error: unknown) => error as Error,
      );
    const refused = await second;
    expect(refused?.message).toMatch(/serves another pool/);
    expect(refused?.message).toContain(hosts[0]?.root);
    expect(await running).toBe(8);
    expect(retried).toBe(0);
    const [after] = await first.broadcast(info());
    expect(after?.pid).toBe(before?.pid);
    expect(alive(before?.pid ?? 0)).toBe(true);
  }

  it("refuses a second pool's worker on a host whose worker serves another pool, and loses nothing of the first", async () => {
    await secondPoolWhileFirstRuns("first", "second");
  }, 300_000);

  it("does not hand a second pool with the same image the worker that serves the first", async () => {
    await secondPoolWhileFirstRuns("same", "same");
  }, 300_000);
});
