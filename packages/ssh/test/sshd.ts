/**
 * The SSH transport's test bed: a real OpenSSH sshd that the tests start themselves on loopback,
 * with generated host keys and an authorized key in a temporary directory. The remote side is this
 * machine, so the tests check the remote effects (files, processes) directly. A test file calls
 * {@link useSshdBed} once; `dir`, `main` and `ssh` are set before its first test.
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, connect as netConnect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on this one.
import { isCi } from "../../testing/src/prerequisites.js";
import type { SshConnectOptions, SshTarget } from "../src/target.js";
import { SshConnection } from "../src/transport.js";

export const sshdPath = "/usr/sbin/sshd";
// These tests need OpenSSH's server (Debian: openssh-server); without it they are reported as
// skipped — and under CI they fail, naming it, rather than skip quietly.
export const sshdMissing = !existsSync(sshdPath);
if (sshdMissing && isCi())
  throw new Error(`CI requires OpenSSH's server at ${sshdPath} (apt-get install openssh-server)`);
export const user = userInfo().username;

/** Every pid in the process tree under `pid` (sshd forks a process per connection, in its own session). */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8")
        .replace(/^.*\) /, "")
        .split(" ");
      const parent = Number(fields[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // The process ended while listing.
    }
  }
  const tree: number[] = [];
  const visit = (current: number) => {
    tree.push(current);
    for (const child of children.get(current) ?? []) visit(child);
  };
  visit(pid);
  return tree;
}

export function killTree(pid: number): void {
  for (const member of processTree(pid).reverse()) {
    try {
      process.kill(member, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

export interface Sshd {
  readonly port: number;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

export let dir: string;
const running = new Set<Sshd>();

/**
 * A Python that runs sshd as a child subreaper (PR_SET_CHILD_SUBREAPER) and never reaps the
 * processes it adopts: as on a machine whose init does not reap (a container whose PID 1 is
 * `sleep infinity` or an application), a detached process that exits stays a zombie.
 */
const NON_REAPING_INIT = [
  "import ctypes, subprocess, sys",
  "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)",
  "sys.exit(subprocess.Popen(sys.argv[1:]).wait())",
].join("\n");

export async function startSshd(
  hostKey: string,
  port?: number,
  extra: { nonReapingInit?: boolean; pam?: boolean } = {},
): Promise<Sshd> {
  const chosen = port ?? (await freePort());
  const config = join(dir, `sshd_config_${chosen}_${running.size}`);
  await writeFile(
    config,
    [
      "ListenAddress 127.0.0.1",
      `HostKey ${join(dir, hostKey)}`,
      "PidFile none",
      // With PAM, a user whose password is locked (`!`, as system accounts have) may log in by key.
      `UsePAM ${extra.pam ? "yes" : "no"}`,
      "StrictModes no",
      "PermitRootLogin prohibit-password",
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "AllowTcpForwarding yes",
      "MaxStartups 50",
      "LogLevel ERROR",
      "",
    ].join("\n"),
  );
  const sshdArgs = ["-D", "-e", "-f", config, "-p", String(chosen)];
  const child = extra.nonReapingInit
    ? spawn("/usr/bin/python3", ["-c", NON_REAPING_INIT, sshdPath, ...sshdArgs], {
        stdio: ["ignore", "ignore", "pipe"],
      })
    : spawn(sshdPath, sshdArgs, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
  });
  const deadline = Date.now() + 10_000;
  while (!(await canConnect(chosen))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      killTree(child.pid ?? 0);
      throw new Error(`sshd did not start on port ${chosen}: ${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const sshd: Sshd = {
    port: chosen,
    process: child,
    async stop() {
      running.delete(sshd);
      if (child.pid !== undefined) killTree(child.pid);
      if (child.exitCode === null && child.signalCode === null) {
        await new Promise((resolve) => child.once("exit", resolve));
      }
    },
  };
  running.add(sshd);
  return sshd;
}

export function keygen(name: string): void {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", join(dir, name)]);
}

export function target(port: number, extra: Partial<SshTarget> = {}): SshTarget {
  return { host: "127.0.0.1", port, user, identityFile: join(dir, "client"), ...extra };
}

export function options(extra: Partial<SshConnectOptions> = {}): SshConnectOptions {
  return {
    timeoutSeconds: 10,
    retryIntervalSeconds: 0.5,
    knownHostsFile: join(dir, "home", "known_hosts"),
    ...extra,
  };
}

/** Whether a process whose command line contains `marker` runs on this machine. */
export function processRunning(marker: string): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").includes(marker)) return true;
    } catch {
      // Gone.
    }
  }
  return false;
}

export async function eventually(check: () => boolean, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}

/** The sshd every test of the file may use, started before the first. */
export let main: Sshd;
/** A connection to {@link main}. */
export let ssh: SshConnection;

/** Starts the bed before the file's first test (sshd, keys, {@link main}, {@link ssh}) and stops it after the last. */
export function useSshdBed(): void {
  beforeAll(async () => {
    if (sshdMissing) return;
    if (!existsSync("/run/sshd")) await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
    dir = await mkdtemp(join(tmpdir(), "skyward-ssh-"));
    for (const name of ["host_a", "host_b", "client", "stranger"]) keygen(name);
    await writeFile(join(dir, "authorized_keys"), await readFile(join(dir, "client.pub")));
    main = await startSshd("host_a");
    ssh = await SshConnection.connect(target(main.port), options());
  }, 30_000);

  afterAll(async () => {
    await ssh?.close();
    for (const sshd of [...running]) await sshd.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
}
