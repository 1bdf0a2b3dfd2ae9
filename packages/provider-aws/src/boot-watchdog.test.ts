import { execFile, spawnSync } from "node:child_process";
import { access, chmod, constants, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bootWatchdogSeconds, renderBootWatchdog } from "./boot-watchdog.js";

const run = promisify(execFile);

/** Seconds this machine has been up, as the script reads them. */
async function uptime(): Promise<number> {
  return Math.floor(Number((await readFile("/proc/uptime", "utf8")).split(" ")[0]));
}

describe("the boot watchdog (user data)", () => {
  let scratch = "";
  let bin = "";
  /** Whether the last script's watchdog was still running when the script itself had returned. */
  let backgrounded = false;
  let root = "";
  let record = "";

  beforeEach(async () => {
    scratch = await mkdtemp(join(tmpdir(), "skyward-watchdog-"));
    bin = join(scratch, "bin");
    root = join(scratch, "root dir");
    record = join(scratch, "shutdown-called");
    await run("mkdir", ["-p", bin, root]);
    // A fake `shutdown` that records its arguments instead of ending this machine.
    await writeFile(join(bin, "shutdown"), `#!/bin/sh\necho "$@" > '${record}'\n`);
    await chmod(join(bin, "shutdown"), 0o755);
  });

  afterEach(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  /** Runs the script with the fake shutdown first on PATH; waits for its background watchdog. */
  async function runWatchdog(
    seconds: number,
    waitMs: number,
    perBootDirectory = join(scratch, "per-boot"),
  ): Promise<string | undefined> {
    const script = join(scratch, "user-data.sh");
    await writeFile(script, renderBootWatchdog({ root, seconds, perBootDirectory }));
    backgrounded = false;
    await run("sh", [script], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    // The script itself has returned (cloud-init goes on); a watchdog still waiting runs on in the background.
    backgrounded = spawnSync("pgrep", ["-f", script]).status === 0;
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    return readFile(record, "utf8").catch(() => undefined);
  }

  it("shuts down when no worker has started by N seconds after boot", async () => {
    expect(await runWatchdog(1, 1000)).toBe("-h now\n");
  });

  it("leaves a node alone once a worker has started", async () => {
    await writeFile(join(root, "worker.pid"), "1234\n");
    expect(await runWatchdog(1, 1000)).toBeUndefined();
  });

  it("waits until N seconds after boot, and checks again then", async () => {
    // N is 2 s from now: a worker that starts within them saves the node.
    const seconds = (await uptime()) + 2;
    const pending = runWatchdog(seconds, 3500);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(backgrounded, "the script returned while its watchdog waits in the background").toBe(true);
    expect(await readFile(record, "utf8").catch(() => undefined)).toBeUndefined();
    await writeFile(join(root, "worker.log"), "started\n");
    expect(await pending).toBeUndefined();
  });

  it("runs again at every boot, and counts only a worker started since that boot", async () => {
    // cloud-init runs user data at the first boot only; an instance rebooted (a scheduled reboot
    // event) lost its worker with the old boot but keeps its worker.pid/worker.log: with the client
    // dead or detached, nothing else would ever end it.
    const perBoot = join(scratch, "per-boot");
    const bootedAt = Date.now() / 1000 - (await uptime()) - 1;
    const stale = async () => {
      for (const name of ["worker.pid", "worker.log"]) {
        await writeFile(join(root, name), "4242\n");
        await utimes(join(root, name), bootedAt - 3600, bootedAt - 3600);
      }
    };
    await stale();
    expect(await runWatchdog(1, 1000, perBoot)).toBe("-h now\n");
    // The next boot: cloud-init runs the per-boot copy, which watches again.
    const copy = join(perBoot, "skyward-boot-watchdog");
    await access(copy, constants.X_OK);
    await rm(record, { force: true });
    await run("sh", [copy], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await readFile(record, "utf8")).toBe("-h now\n");
    // A worker started since boot saves the instance.
    await rm(record, { force: true });
    await writeFile(join(root, "worker.pid"), "4243\n");
    expect(await runWatchdog(1, 1000, perBoot)).toBeUndefined();
  });

  it("N is ttl + sshTimeout + bootstrapTimeout", () => {
    expect(bootWatchdogSeconds({ ttl: 600, sshTimeout: 300, bootstrapTimeout: 300 })).toBe(1200);
    expect(bootWatchdogSeconds({ ttl: 0, sshTimeout: 60, bootstrapTimeout: 120.5 })).toBe(181);
  });
});
