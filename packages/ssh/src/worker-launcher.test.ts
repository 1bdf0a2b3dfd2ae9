/**
 * launchSshWorker on a node whose init does not reap (a container whose PID 1 is `sleep infinity` or
 * an application): the worker runs detached from the SSH session, so when it exits it stays a
 * zombie, which still answers `kill -0`. The launch must still see it gone.
 */
import { execFileSync } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { BootstrapError, image } from "@skyward/core";
import { type Cluster, type Instance, LaunchCommand, type LaunchWorkerOptions } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { dir, type Sshd, sshdMissing, startSshd, user, useSshdBed } from "../test/sshd.js";
import { launchSshWorker } from "./worker-launcher.js";

useSshdBed();

function fingerprint(publicKey: string): string {
  return execFileSync("ssh-keygen", ["-l", "-f", publicKey], { encoding: "utf8" }).split(" ")[1] as string;
}

function launchOptions(sshd: Sshd, root: string, command: LaunchCommand): LaunchWorkerOptions {
  const instance = {
    id: "node-under-test",
    status: "running",
    publicIp: "127.0.0.1",
    privateIp: "127.0.0.1",
    ssh: {
      host: "127.0.0.1",
      port: sshd.port,
      user,
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
