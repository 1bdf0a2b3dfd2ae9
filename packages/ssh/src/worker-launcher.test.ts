/**
 * launchSshWorker against a real sshd on loopback. On a node whose init does not reap (a container
 * whose PID 1 is `sleep infinity` or an application) the worker runs detached from the SSH session,
 * so when it exits it stays a zombie, which still answers `kill -0`: the launch must still see it
 * gone. A login user other than root, on a host without sudo, whose root directory is its own: the
 * launch needs no sudo.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BootstrapError, image } from "@skyward/core";
import { type Cluster, type Instance, LaunchCommand, type LaunchWorkerOptions } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
// The CI rule of @skyward/testing, by path: that package depends on this one.
import { isCi } from "../../testing/src/prerequisites.js";
import { dir, freePort, type Sshd, sshdMissing, startSshd, user, useSshdBed } from "../test/sshd.js";
import { launchSshWorker } from "./worker-launcher.js";

useSshdBed();

function fingerprint(publicKey: string): string {
  return execFileSync("ssh-keygen", ["-l", "-f", publicKey], { encoding: "utf8" }).split(" ")[1] as string;
}

function launchOptions(
  sshd: Sshd,
  root: string,
  command: LaunchCommand,
  login: string = user,
): LaunchWorkerOptions {
  const instance = {
    id: "node-under-test",
    status: "running",
    publicIp: "127.0.0.1",
    privateIp: "127.0.0.1",
    ssh: {
      host: "127.0.0.1",
      port: sshd.port,
      user: login,
      identityFile: join(dir, "client"),
      hostKeyFingerprint: fingerprint(join(dir, "host_a.pub")),
      hostKeyScope: "address",
      root,
    },
    spot: false,
    hourlyPrice: 0,
    offerId: "ssh",
    createdAt: Date.now(),
    tags: {},
  } as unknown as Instance;
  const cluster = { id: "c", provider: "ssh", region: "ssh", spec: { volumes: [] } } as unknown as Cluster;
  return {
    instance,
    cluster,
    nodeId: 0,
    image: image({}),
    command: () => command,
    env: {},
    token: "launcher-test-token",
    // Long: a launch that misses the worker's end waits all of it, then says "did not start".
    timeoutSeconds: 90,
    connectTimeoutSeconds: 20,
    connectRetryIntervalSeconds: 1,
    signal: new AbortController().signal,
  };
}

describe.skipIf(sshdMissing)("launchSshWorker on a node whose init does not reap", () => {
  it("reports a worker that exits before it is ready as exited, with its output", async () => {
    const sshd = await startSshd("host_a", undefined, { nonReapingInit: true });
    try {
      const root = join(dir, "root-zombie");
      await mkdir(root, { recursive: true });
      const crashing = LaunchCommand.create({
        launcher: "sh -c 'echo worker-crashed-at-start >&2; exit 7'",
      });
      const launch = launchSshWorker(launchOptions(sshd, root, crashing));
      const error = await launch.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(BootstrapError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/exited before it was ready/);
      expect((error as BootstrapError).logTail).toContain("worker-crashed-at-start");
    } finally {
      await sshd.stop();
    }
  }, 240_000);
});

describe.skipIf(sshdMissing)("launchSshWorker on a machine of your own", () => {
  it("fails fast with the host and port when nothing listens on the SSH port", async () => {
    // A port nothing listens on: the host answers, refusing it.
    const sshd = { port: await freePort() } as Sshd;
    const options = launchOptions(
      sshd,
      join(dir, "root-refused"),
      LaunchCommand.create({ launcher: "true" }),
    );
    // The pool's default sshTimeout: a booting cloud node is waited for this long, your own host is not.
    const error = await launchSshWorker({ ...options, connectTimeoutSeconds: 300 }).catch(
      (caught: unknown) => caught,
    );
    expect((error as Error).message).toMatch(
      new RegExp(`refused .*nothing listens on port ${sshd.port} of 127.0.0.1`),
    );
  }, 60_000);
});

/** A user of this machine other than root that can log in (a shell and a home directory), if any. */
function otherLoginUser(): { name: string; uid: number; gid: number } | undefined {
  for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
    const [name, , uid, gid, , home, shell] = line.split(":");
    if (!name || Number(uid) < 1000 || Number(uid) >= 60_000 || !/\/(ba|z|da)?sh$/.test(shell ?? ""))
      continue;
    if (home && existsSync(home)) return { name, uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/**
 * That user; under CI as root, one made for the test when the machine has none (`useradd`: a locked
 * password, which the test's sshd accepts for key logins with PAM on), so CI never skips the test.
 */
function loginUserOtherThanRoot(): { name: string; uid: number; gid: number } | undefined {
  if (user !== "root") return undefined;
  const found = otherLoginUser();
  if (found || !isCi()) return found;
  execFileSync("useradd", ["--create-home", "--shell", "/bin/sh", "skyward-launch-test"]);
  return otherLoginUser();
}

const other = loginUserOtherThanRoot();

describe.skipIf(sshdMissing || other === undefined)("launchSshWorker as a user other than root", () => {
  it("needs no sudo when the root directory is the user's own", async () => {
    const login = other as { name: string; uid: number; gid: number };
    // sshd reads the authorised keys as the user: the bed's directory must be reachable.
    await chmod(dir, 0o711);
    await chmod(join(dir, "authorized_keys"), 0o644);
    const parent = await mkdtemp(join(tmpdir(), "skyward-launch-user-"));
    const sshd = await startSshd("host_a", undefined, { pam: true });
    try {
      await chmod(parent, 0o755);
      const root = join(parent, "root");
      await mkdir(root);
      await chown(root, login.uid, login.gid);
      const crashing = LaunchCommand.create({ launcher: "sh -c 'echo worker-ran-as-$(id -un) >&2; exit 7'" });
      const error = await launchSshWorker(launchOptions(sshd, root, crashing, login.name)).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      // Uploaded, bootstrapped and started (no sudo asked for): the worker's own exit is what failed.
      expect((error as Error).message).toMatch(/exited before it was ready/);
      expect((error as BootstrapError).logTail).toContain(`worker-ran-as-${login.name}`);
    } finally {
      await sshd.stop();
      await rm(parent, { recursive: true, force: true });
    }
  }, 240_000);
});
