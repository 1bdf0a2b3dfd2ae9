import { execFile } from "node:child_process";
import { access, constants, mkdtemp, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { renderSelfDestructScript } from "./self-destruct-script.js";

const run = promisify(execFile);
const SECRET = "sk_test_s3cret_0123456789";
/** Records its arguments and the secret it read: what a provider's program would send the API. */
const PROGRAM = `import sys
with open(sys.argv[2]) as handle:
    secret = handle.read().strip()
with open(sys.argv[1], "a") as out:
    out.write(" ".join(sys.argv[3:]) + " " + secret + "\\n")
`;

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-self-destruct-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function boot(watchdog?: { seconds: number; root: string; target: string; perBootDirectory?: string }) {
  const calls = join(directory, "calls.log");
  const script = renderSelfDestructScript({
    secret: SECRET,
    secretFile: join(directory, "etc", "secret"),
    program: PROGRAM,
    programArguments: [calls],
    commandPath: join(directory, "bin", "skyward-self-destruct"),
    ...(watchdog ? { watchdog } : {}),
  });
  await writeFile(join(directory, "boot.sh"), script);
  await run("sh", [join(directory, "boot.sh")]);
  return { script, calls, command: join(directory, "bin", "skyward-self-destruct") };
}

async function waitForFile(path: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await readFile(path, "utf8").catch(() => "");
    if (text !== "" || Date.now() > deadline) return text;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("renderSelfDestructScript", () => {
  it("installs a command that runs the program with the secret's file, the secret never on a command line", async () => {
    const { script, calls, command } = await boot();
    expect(script.split("\n").filter((line) => line.includes(SECRET))).toEqual([SECRET]);
    expect((await stat(join(directory, "etc", "secret"))).mode & 0o777).toBe(0o600);
    expect((await stat(command)).mode & 0o777).toBe(0o700);
    expect(await readFile(command, "utf8")).not.toContain(SECRET);
    await run(command, ["1234"]);
    expect(await readFile(calls, "utf8")).toBe(`1234 ${SECRET}\n`);
  });

  it("the boot watchdog runs the command with the VM's name when no worker started, and not when one did", async () => {
    const started = join(directory, "started");
    await run("mkdir", ["-p", started]);
    await writeFile(join(started, "worker.pid"), "1\n");
    // This machine booted long ago: the watchdog's time is up at once.
    const { calls } = await boot({ seconds: 1, root: started, target: "vm-spared" });
    await boot({ seconds: 1, root: join(directory, "never"), target: "vm-ended" });
    expect(await waitForFile(calls, 10_000)).toBe(`vm-ended ${SECRET}\n`);
    const { script } = await boot({ seconds: 0, root: "/opt/skyward", target: "x" });
    expect(script).not.toContain("watchdog");
  });

  it("the boot watchdog runs again at every boot and counts only a worker started since that boot", async () => {
    // Cloud-init runs user data (TensorDock's runcmd, Hyperstack's user_data) at the first boot only.
    // A VM rebooted (host maintenance) lost its worker and the worker's TTL with the old boot, but
    // keeps its worker.pid/worker.log: with the client dead or detached, nothing else ends it.
    const root = join(directory, "root");
    const perBootDirectory = join(directory, "per-boot");
    await run("mkdir", ["-p", root, perBootDirectory]);
    const uptime = Math.floor(Number((await readFile("/proc/uptime", "utf8")).split(" ")[0]));
    const bootedAt = Date.now() / 1000 - uptime - 1;
    for (const name of ["worker.pid", "worker.log"]) {
      await writeFile(join(root, name), "4242\n");
      await utimes(join(root, name), bootedAt - 3600, bootedAt - 3600);
    }
    const { calls } = await boot({ seconds: 1, root, target: "vm-rebooted", perBootDirectory });
    expect(await waitForFile(calls, 10_000)).toBe(`vm-rebooted ${SECRET}\n`);
    // The next boot: cloud-init runs the per-boot copy, which watches again.
    const copy = join(perBootDirectory, "skyward-boot-watchdog");
    await access(copy, constants.X_OK);
    await rm(calls);
    await run("sh", [copy]);
    expect(await waitForFile(calls, 10_000)).toBe(`vm-rebooted ${SECRET}\n`);
    // A worker started since this boot spares the VM.
    await rm(calls);
    await writeFile(join(root, "worker.pid"), "4243\n");
    await run("sh", [copy]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await readFile(calls, "utf8").catch(() => "")).toBe("");
  }, 30_000);
});
