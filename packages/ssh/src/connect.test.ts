/**
 * Connecting against a real OpenSSH sshd (`test/sshd.ts`): authentication failures are not
 * retried, refused and silent servers are until the deadline, abort, bad input and a lost connection.
 */

import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { join } from "node:path";
import { CancelledError, ConnectionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import {
  dir,
  freePort,
  main,
  options,
  sshdMissing,
  startSshd,
  target,
  user,
  useSshdBed,
} from "../test/sshd.js";
import { SshConnection } from "./transport.js";

useSshdBed();

describe.skipIf(sshdMissing)("connecting", () => {
  it("does not retry an authentication failure", async () => {
    const attempts: number[] = [];
    const failing = SshConnection.connect(
      target(main.port, { identityFile: join(dir, "stranger") }),
      options({ onAttempt: (attempt) => attempts.push(attempt) }),
    );
    await expect(failing).rejects.toBeInstanceOf(ConnectionError);
    await expect(failing).rejects.toThrow(
      `SSH authentication failed for ${user}@127.0.0.1 (port ${main.port})`,
    );
    expect(attempts).toEqual([1]);
  });

  it("retries a refused connection until the deadline, then says why", async () => {
    const port = await freePort();
    const attempts: ConnectionError[] = [];
    const started = Date.now();
    const error = await SshConnection.connect(
      target(port),
      options({
        timeoutSeconds: 2,
        retryIntervalSeconds: 0.4,
        onAttempt: (_attempt, failure) => attempts.push(failure),
      }),
    ).catch((failure: unknown) => failure);
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as ConnectionError).host).toBe(`127.0.0.1:${port}`);
    expect((error as Error).message).toMatch(
      new RegExp(
        `could not connect to ${user}@127.0.0.1:${port} within 2 s \\(${attempts.length} attempts, every 0.4 s\\); last error: .*ECONNREFUSED`,
      ),
    );
    // Attempts at 0, 0.4, 0.8, 1.2 s (and 1.6 s unless the machine is slow); none after the deadline.
    expect(attempts.length).toBeGreaterThanOrEqual(4);
    expect(attempts.length).toBeLessThanOrEqual(5);
    // It kept trying until the deadline (how soon after it, a loaded machine decides: the bench's business).
    expect(elapsed).toBeGreaterThanOrEqual(1_200);
  });

  it("fails a port refused for longer than refusedRetrySeconds, naming host and port, long before the deadline", async () => {
    const port = await freePort();
    const attempts: number[] = [];
    // A 300 s deadline (the pool's sshTimeout): without the refusal limit this waits all of it and
    // the test's own 60 s limit fails it.
    const error = await SshConnection.connect(
      target(port),
      options({
        timeoutSeconds: 300,
        retryIntervalSeconds: 0.2,
        refusedRetrySeconds: 1,
        onAttempt: (attempt) => attempts.push(attempt),
      }),
    ).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as ConnectionError).host).toBe(`127.0.0.1:${port}`);
    expect((error as Error).message).toMatch(
      new RegExp(
        `connection to ${user}@127.0.0.1:${port} refused .*nothing listens on port ${port} of 127.0.0.1`,
      ),
    );
    expect(attempts.length).toBeGreaterThanOrEqual(2);
  });

  it("rejects a negative refusedRetrySeconds, naming the field", async () => {
    await expect(
      SshConnection.connect(target(main.port), options({ refusedRetrySeconds: -1 })),
    ).rejects.toThrow(/refusedRetrySeconds/);
  });

  it("gives up on a server that accepts but never speaks SSH, within the deadline", async () => {
    const held = new Set<Socket>();
    const silent = createServer((socket) => held.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as { port: number }).port;
    const attempts: number[] = [];
    const started = Date.now();
    try {
      await expect(
        SshConnection.connect(
          target(port),
          options({
            timeoutSeconds: 1.5,
            retryIntervalSeconds: 0.2,
            onAttempt: (attempt) => attempts.push(attempt),
          }),
        ),
      ).rejects.toThrow(/within 1.5 s \(1 attempt, every 0.2 s\); last error: .*(timed out|within)/i);
      // One attempt, held to the deadline: no retry once the server accepted (a hang would time the test out).
      expect(attempts).toEqual([1]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });

  it("keeps retrying until sshd comes up", async () => {
    const port = await freePort();
    const attempts: number[] = [];
    const connecting = SshConnection.connect(
      target(port),
      options({
        timeoutSeconds: 10,
        retryIntervalSeconds: 0.2,
        onAttempt: (attempt) => attempts.push(attempt),
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 700));
    const late = await startSshd("host_a", port);
    const connection = await connecting;
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect((await connection.exec("echo up")).stdout).toBe("up\n");
    await connection.close();
    await late.stop();
  });

  it("rejects bad input and an unreadable key before connecting", async () => {
    await expect(
      SshConnection.connect({ host: "", port: 70000, user }, options({ timeoutSeconds: -1 })),
    ).rejects.toMatchObject({
      issues: expect.arrayContaining([
        expect.objectContaining({ path: "host" }),
        expect.objectContaining({ path: "port" }),
      ]),
    });
    await expect(
      SshConnection.connect(target(main.port, { identityFile: join(dir, "nope") }), options()),
    ).rejects.toMatchObject({ issues: [{ path: "identityFile" }] });
    await expect(
      SshConnection.connect(target(main.port, { privateKey: "not a key" }), options()),
    ).rejects.toMatchObject({ issues: [{ path: "privateKey" }] });
  });

  it("uses ssh-agent for an encrypted identityFile given no passphrase, as ssh does; without an agent says so", async () => {
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "sesame", "-f", join(dir, "locked")]);
    await appendFile(join(dir, "authorized_keys"), await readFile(join(dir, "locked.pub")));
    const locked = target(main.port, { identityFile: join(dir, "locked") });
    const saved = process.env.SSH_AUTH_SOCK;
    const socket = join(dir, "agent.sock");
    const agent = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
    try {
      delete process.env.SSH_AUTH_SOCK;
      await expect(SshConnection.connect(locked, options())).rejects.toThrow(
        /identityFile: .*encrypted.*passphrase.*ssh-agent/,
      );
      while (!existsSync(socket)) await new Promise((resolve) => setTimeout(resolve, 20));
      const askpass = join(dir, "askpass.sh");
      await writeFile(askpass, "#!/bin/sh\necho sesame\n", { mode: 0o700 });
      execFileSync("ssh-add", [join(dir, "locked")], {
        env: {
          ...process.env,
          SSH_AUTH_SOCK: socket,
          SSH_ASKPASS: askpass,
          SSH_ASKPASS_REQUIRE: "force",
          DISPLAY: ":0",
        },
        stdio: "ignore",
      });
      process.env.SSH_AUTH_SOCK = socket;
      const connection = await SshConnection.connect(locked, options());
      expect((await connection.exec("echo unlocked")).stdout).toBe("unlocked\n");
      await connection.close();
    } finally {
      if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = saved;
      agent.kill();
    }
  });

  it("can be aborted while retrying", async () => {
    const port = await freePort();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    await expect(
      SshConnection.connect(target(port), options({ signal: controller.signal, retryIntervalSeconds: 5 })),
    ).rejects.toBeInstanceOf(CancelledError);
  });

  it("reports a lost connection, and reconnects", async () => {
    const sshd = await startSshd("host_a");
    const connection = await SshConnection.connect(target(sshd.port), options({ keepaliveIntervalMs: 1000 }));
    const lost = new Promise<ConnectionError>((resolve) => connection.onLost(resolve));
    await sshd.stop();
    const error = await lost;
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error.message).toContain(`SSH connection to ${user}@127.0.0.1:${sshd.port} was lost`);
    expect(connection.isOpen).toBe(false);
    await expect(connection.exec("true")).rejects.toThrow(/the SSH connection .* is lost/);

    const back = await startSshd("host_a", sshd.port);
    const again = await connection.reconnect();
    expect((await again.exec("echo again")).stdout).toBe("again\n");
    let closedLost = false;
    again.onLost(() => {
      closedLost = true;
    });
    await again.close();
    expect(closedLost).toBe(false);
    await back.stop();
  });
});
