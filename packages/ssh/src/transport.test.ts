/**
 * The SSH transport against a real OpenSSH sshd that the tests start themselves on loopback, with
 * generated host keys and an authorized key in a temporary directory. The remote side is this
 * machine, so the tests check the remote effects (files, processes) directly.
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { CancelledError, ConfigurationError, ConnectionError } from "@skyward/core";
import { pythonRuntimeDirectory } from "@skyward/core/contract";
import { WorkerConnection } from "@skyward/core/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sshKeyFingerprint } from "./known-hosts.js";
import type { SshConnectOptions, SshTarget } from "./target.js";
import { SshConnection } from "./transport.js";

const sshdPath = "/usr/sbin/sshd";
// These tests need OpenSSH's server (Debian: openssh-server); without it they are reported as skipped.
const sshdMissing = !existsSync(sshdPath);
const user = userInfo().username;

/** Every pid in the process tree under `pid` (sshd forks a process per connection, in its own session). */
function processTree(pid: number): number[] {
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

function killTree(pid: number): void {
  for (const member of processTree(pid).reverse()) {
    try {
      process.kill(member, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

interface Sshd {
  readonly port: number;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

let dir: string;
const running = new Set<Sshd>();

async function startSshd(hostKey: string, port?: number): Promise<Sshd> {
  const chosen = port ?? (await freePort());
  const config = join(dir, `sshd_config_${chosen}_${running.size}`);
  await writeFile(
    config,
    [
      "ListenAddress 127.0.0.1",
      `HostKey ${join(dir, hostKey)}`,
      "PidFile none",
      "UsePAM no",
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
  const child = spawn(sshdPath, ["-D", "-e", "-f", config, "-p", String(chosen)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
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

function keygen(name: string): void {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", join(dir, name)]);
}

function target(port: number, extra: Partial<SshTarget> = {}): SshTarget {
  return { host: "127.0.0.1", port, user, identityFile: join(dir, "client"), ...extra };
}

function options(extra: Partial<SshConnectOptions> = {}): SshConnectOptions {
  return {
    timeoutSeconds: 10,
    retryIntervalSeconds: 0.5,
    knownHostsFile: join(dir, "home", "known_hosts"),
    ...extra,
  };
}

/** Whether a process whose command line contains `marker` runs on this machine. */
function processRunning(marker: string): boolean {
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

async function eventually(check: () => boolean, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}

let main: Sshd;
let ssh: SshConnection;

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

describe.skipIf(sshdMissing)("exec", () => {
  it("returns output and exit codes", async () => {
    const ok = await ssh.exec("echo out; echo err >&2");
    expect(ok).toEqual({ code: 0, signal: null, stdout: "out\n", stderr: "err\n" });
    const failed = await ssh.exec("exit 3");
    expect(failed.code).toBe(3);
    const killed = await ssh.exec("kill -TERM $$");
    expect(killed).toMatchObject({ code: null, signal: "SIGTERM" });
  });

  it("passes environment variables quoted, and stdin", async () => {
    const tricky = `it's $(not) "expanded" \`either\``;
    const result = await ssh.exec('printf %s "$GREETING"', { env: { GREETING: tricky } });
    expect(result.stdout).toBe(tricky);
    const bytes = randomBytes(300_000);
    const counted = await ssh.exec("wc -c", { stdin: bytes });
    expect(counted.stdout.trim()).toBe("300000");
    const echoed = await ssh.exec("cat", { stdin: "héllo\n" });
    expect(echoed.stdout).toBe("héllo\n");
    // Without stdin, it is closed at once: `cat` ends instead of waiting.
    expect((await ssh.exec("cat", { timeoutSeconds: 5 })).stdout).toBe("");
    await expect(ssh.exec("true", { env: { "BAD-NAME": "x" } })).rejects.toThrow(ConfigurationError);
  });

  it("passes the environment over stdin, never on a command line", async () => {
    const secret = `token-${randomBytes(8).toString("hex")}\nsecond line 'quoted'`;
    const result = await ssh.exec(`printf %s "$SECRET"; echo; cat; tr '\\0' ' ' < /proc/$$/cmdline >&2`, {
      env: { SECRET: secret, OTHER: "" },
      stdin: "the command's own input\n",
    });
    expect(result.stdout).toBe(`${secret}\nthe command's own input\n`);
    expect(result.stderr).toContain("-c");
    expect(result.stderr).not.toContain("token-");
  });

  it("delivers output live through the callbacks", async () => {
    const flag = join(dir, "live-flag");
    const chunks: string[] = [];
    const errors: string[] = [];
    const result = await ssh.exec(
      `echo first; echo warn >&2; while [ ! -e ${flag} ]; do sleep 0.05; done; echo second`,
      {
        timeoutSeconds: 10,
        onStdout: (chunk) => {
          chunks.push(chunk);
          // Only output that arrives while the command runs lets it finish.
          if (chunk.includes("first")) void writeFile(flag, "");
        },
        onStderr: (chunk) => errors.push(chunk),
      },
    );
    expect(result.code).toBe(0);
    expect(chunks.join("")).toBe("first\nsecond\n");
    expect(errors.join("")).toBe("warn\n");
    expect(result.stdout).toBe("first\nsecond\n");
  });

  it("keeps only the end of the output when a callback receives it", async () => {
    let received = 0;
    const result = await ssh.exec("head -c 300000 /dev/zero | tr '\\0' a; printf END", {
      onStdout: (chunk) => {
        received += chunk.length;
      },
      keepOutputBytes: 1000,
    });
    expect(received).toBe(300_003);
    expect(result.stdout).toHaveLength(1000);
    expect(result.stdout.endsWith("aEND")).toBe(true);
  });

  it("kills the remote command on timeout", async () => {
    const marker = "sleep 31.4159";
    let started = false;
    const running = ssh.exec(`echo started; ${marker}; echo never`, {
      timeoutSeconds: 1.5,
      onStdout: () => {
        started = true;
      },
    });
    await expect(running).rejects.toThrow(/did not finish within 1.5 s and was killed/);
    await expect(running).rejects.toBeInstanceOf(ConnectionError);
    expect(started).toBe(true);
    expect(await eventually(() => !processRunning(marker))).toBe(true);
  });

  it("kills the remote command on abort", async () => {
    const marker = "sleep 27.1828";
    const controller = new AbortController();
    const running = ssh.exec(`echo started; ${marker}; echo never`, {
      signal: controller.signal,
      onStdout: () => {},
    });
    expect(await eventually(() => processRunning(marker))).toBe(true);
    controller.abort();
    await expect(running).rejects.toBeInstanceOf(CancelledError);
    expect(await eventually(() => !processRunning(marker))).toBe(true);
  });
});

describe.skipIf(sshdMissing)("spawn", () => {
  it("streams a long-running process and kills it", async () => {
    const marker = "sleep 0.0123";
    const child = await ssh.spawn(
      `echo ready; echo oops >&2; while read line; do echo "got $line"; done; while true; do ${marker}; done`,
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    expect(await eventually(() => out.includes("ready"))).toBe(true);
    child.stdin.write("ping\n");
    expect(await eventually(() => out.includes("got ping"))).toBe(true);
    child.stdin.end();
    expect(await eventually(() => processRunning(marker))).toBe(true);
    child.kill();
    await expect(child.exited).resolves.toEqual({ code: null, signal: "SIGKILL" });
    expect(err).toBe("oops\n");
    expect(await eventually(() => !processRunning(marker))).toBe(true);
  });

  it("kills a process at once after starting it, and on abort", async () => {
    const first = await ssh.spawn("sleep 43.21; echo never");
    first.stdout.resume();
    first.kill("SIGTERM");
    await expect(first.exited).resolves.toEqual({ code: null, signal: "SIGTERM" });

    const controller = new AbortController();
    const second = await ssh.spawn("echo up; sleep 43.22", { signal: controller.signal });
    second.stdout.resume();
    second.stderr.resume();
    expect(await eventually(() => processRunning("sleep 43.22"))).toBe(true);
    controller.abort();
    await expect(second.exited).resolves.toEqual({ code: null, signal: "SIGKILL" });
    expect(processRunning("sleep 43.2")).toBe(false);
    expect(() => second.kill("NOT A SIGNAL")).toThrow(ConfigurationError);
  });

  it("reports the exit code", async () => {
    const child = await ssh.spawn("exit 7");
    child.stdout.resume();
    child.stderr.resume();
    await expect(child.exited).resolves.toEqual({ code: 7, signal: null });
  });
});

describe.skipIf(sshdMissing)("uploadFiles", () => {
  it("uploads nested files, a 20 MB file, long paths and modes in one tar stream", async () => {
    const big = join(dir, "big.bin");
    const bigContent = randomBytes(20 * 1024 * 1024);
    await writeFile(big, bigContent, { mode: 0o600 });
    const longPath = `${"d".repeat(50)}/${"e".repeat(40)}/${"f".repeat(28)}`; // 120 characters, splits at a /
    const longName = `${"n".repeat(120)}.txt`; // one component longer than 100 bytes: needs pax
    expect(longPath).toHaveLength(120);
    const remote = join(dir, "remote dir's");
    await ssh.uploadFiles(
      [
        { content: "print('hi')\n", target: "pkg/sub/module.py", mode: 0o640 },
        { content: Buffer.from([0, 1, 2, 255]), target: "pkg/data.bin" },
        { content: "#!/bin/sh\necho run\n", target: "bin/run.sh", mode: 0o755 },
        { source: big, target: "blobs/big.bin" },
        { content: "long path", target: longPath },
        { content: "long name", target: longName },
        { content: "", target: "empty" },
      ],
      remote,
      { timeoutSeconds: 60 },
    );
    expect(await readFile(join(remote, "pkg/sub/module.py"), "utf8")).toBe("print('hi')\n");
    expect((await stat(join(remote, "pkg/sub/module.py"))).mode & 0o777).toBe(0o640);
    expect([...(await readFile(join(remote, "pkg/data.bin")))]).toEqual([0, 1, 2, 255]);
    expect((await stat(join(remote, "pkg/data.bin"))).mode & 0o777).toBe(0o644);
    expect((await stat(join(remote, "bin/run.sh"))).mode & 0o777).toBe(0o755);
    expect((await ssh.exec(`${JSON.stringify(join(remote, "bin/run.sh"))}`)).stdout).toBe("run\n");
    const uploaded = await readFile(join(remote, "blobs/big.bin"));
    expect(createHash("sha256").update(uploaded).digest("hex")).toBe(
      createHash("sha256").update(bigContent).digest("hex"),
    );
    expect((await stat(join(remote, "blobs/big.bin"))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(remote, longPath), "utf8")).toBe("long path");
    expect(await readFile(join(remote, longName), "utf8")).toBe("long name");
    expect((await stat(join(remote, "empty"))).size).toBe(0);
  }, 30_000);

  it("rejects bad targets and unreadable sources before running anything", async () => {
    const remote = join(dir, "never");
    await expect(
      ssh.uploadFiles(
        [
          { content: "x", target: "../escape" },
          { source: join(dir, "missing"), target: "a" },
        ],
        remote,
      ),
    ).rejects.toMatchObject({
      issues: [
        { path: "files[0].target", message: expect.stringContaining("..") },
        { path: "files[1].source", message: expect.stringContaining("cannot read") },
      ],
    });
    expect(existsSync(remote)).toBe(false);
  });

  it("reports a failing remote tar", async () => {
    const file = join(dir, "not-a-dir");
    await writeFile(file, "");
    await expect(ssh.uploadFiles([{ content: "x", target: "a" }], file)).rejects.toThrow(
      /uploading 1 file to .*not-a-dir on .* failed: exit code 1: mkdir/,
    );
  });
});

describe.skipIf(sshdMissing)("execWithFiles", () => {
  it("extracts the files and runs what follows in the same session", async () => {
    const remote = join(dir, "with-files");
    const lines: string[] = [];
    const result = await ssh.execWithFiles(
      `mkdir -p '${remote}' && tar -x -m -C '${remote}' -f - && cat >/dev/null && echo "session $$" && sh '${remote}/run.sh'`,
      [
        { content: '#!/bin/sh\necho ran $(cat "$(dirname "$0")/data/value")\nexit 3\n', target: "run.sh" },
        { content: "42", target: "data/value", mode: 0o600 },
      ],
      { timeoutSeconds: 30, onStdout: (chunk) => lines.push(chunk) },
    );
    expect(result.code).toBe(3);
    expect(result.stdout).toMatch(/^session \d+\nran 42\n$/);
    expect(lines.join("")).toBe(result.stdout);
    expect((await stat(join(remote, "data/value"))).mode & 0o777).toBe(0o600);
  });

  it("lets a command that does not extract drain the stream and end", async () => {
    const big = join(dir, "drained.bin");
    await writeFile(big, randomBytes(4 * 1024 * 1024));
    const result = await ssh.execWithFiles(
      "cat >/dev/null; echo skipped",
      [{ source: big, target: "big.bin" }],
      {
        timeoutSeconds: 30,
      },
    );
    expect(result).toMatchObject({ code: 0, stdout: "skipped\n" });
  });

  it("refuses stdin, env and bad files before running anything", async () => {
    const marker = join(dir, "never-ran");
    await expect(
      ssh.execWithFiles(`touch '${marker}'`, [{ content: "x", target: "a" }], {
        stdin: "input",
        env: { A: "1" },
      } as never),
    ).rejects.toMatchObject({ issues: [{ path: "stdin" }, { path: "env" }] });
    await expect(
      ssh.execWithFiles(`touch '${marker}'`, [{ content: "x", target: "/abs" }]),
    ).rejects.toMatchObject({
      issues: [{ path: "files[0].target", message: "expected a relative path" }],
    });
    expect(existsSync(marker)).toBe(false);
  });
});

describe.skipIf(sshdMissing)("forwardOut", () => {
  let echo: Server;
  let echoPort: number;

  beforeAll(async () => {
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    echoPort = (echo.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => echo.close(() => resolve())));

  it("carries bytes to a server on the remote loopback", async () => {
    const tunnel = await ssh.forwardOut("127.0.0.1", echoPort);
    const payload = randomBytes(200_000);
    const received: Buffer[] = [];
    let size = 0;
    const done = new Promise<void>((resolve) => {
      tunnel.on("data", (chunk: Buffer) => {
        received.push(chunk);
        size += chunk.length;
        if (size >= payload.length) resolve();
      });
    });
    tunnel.write(payload);
    await done;
    expect(Buffer.concat(received).equals(payload)).toBe(true);
    tunnel.end();
  });

  it("fails clearly when nothing listens there", async () => {
    const closedPort = await freePort();
    await expect(ssh.forwardOut("127.0.0.1", closedPort)).rejects.toThrow(
      new RegExp(`cannot open a tunnel to 127.0.0.1:${closedPort}`),
    );
  });
});

describe.skipIf(sshdMissing)("a worker through the tunnel", () => {
  it("starts the Python worker with spawn and talks to it over forwardOut", async () => {
    const token = randomBytes(16).toString("hex");
    const python = pythonRuntimeDirectory();
    const worker = await ssh.spawn(
      "exec python3 -m skyward.worker --node 0 --host 127.0.0.1 --port 0 --concurrency 1 --buffer 0 --executor thread --exit-on-stdin-eof",
      { env: { SKYWARD_TOKEN: token, PYTHONPATH: python } },
    );
    worker.stderr.resume();
    let output = "";
    const ready = new Promise<number>((resolve, reject) => {
      worker.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        const match = /SKYWARD_WORKER_READY (\{.*\})/.exec(output);
        if (match?.[1]) resolve((JSON.parse(match[1]) as { port: number }).port);
      });
      worker.exited.then(() => reject(new Error(`worker exited: ${output}`)), reject);
    });
    const port = await ready;
    const tunnel = await ssh.forwardOut("127.0.0.1", port);
    const connection = await WorkerConnection.connect(
      { stream: tunnel, host: "node 0 via ssh" },
      { token, timeoutMs: 10_000 },
    );
    expect(connection.welcome.node).toBe(0);
    connection.send({
      t: "cluster",
      node: 0,
      total_nodes: 1,
      workers_per_node: 1,
      head_addr: "127.0.0.1",
      head_port: 29500,
      job_id: "ssh-transport-test",
      peers: [{ node: 0, private_ip: "127.0.0.1", public_ip: null }],
      accelerators: 0,
      accelerator: null,
      network: null,
      env: {},
    });
    const result = new Promise<unknown>((resolve) => connection.onTask("t-1", (message) => resolve(message)));
    connection.send({
      t: "submit",
      id: "t-1",
      fn: "operator:add",
      args: [2, 3],
      kwargs: {},
      timeout: null,
      stream: false,
      worker: null,
    });
    expect(await result).toMatchObject({ t: "result", id: "t-1", value: 5 });
    await connection.close();
    // The token reached the worker through its environment, not its command line.
    expect(processRunning(token)).toBe(false);
    worker.stdin.end();
    await expect(worker.exited).resolves.toMatchObject({ code: 0 });
  }, 20_000);
});

describe.skipIf(sshdMissing)("host keys", () => {
  it("records the host key on first use and refuses a changed one without connecting", async () => {
    const home = join(dir, "tofu", "nested");
    const knownHosts = join(home, "known_hosts");
    const sshd = await startSshd("host_a");
    const first = await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }));
    await first.close();
    const hostKey = (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ");
    const recorded = await readFile(knownHosts, "utf8");
    expect(recorded).toBe(`[127.0.0.1]:${sshd.port} ${hostKey[0]} ${hostKey[1]}\n`);
    expect((await stat(knownHosts)).mode & 0o777).toBe(0o600);
    expect((await stat(home)).mode & 0o777).toBe(0o700);

    // The same key again: accepted, not recorded twice.
    const second = await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }));
    expect((await second.exec("echo ok")).stdout).toBe("ok\n");
    await second.close();
    expect(await readFile(knownHosts, "utf8")).toBe(recorded);

    // Entries hashed by `ssh-keygen -H` are recognised too.
    execFileSync("ssh-keygen", ["-q", "-H", "-f", knownHosts]);
    await rm(`${knownHosts}.old`, { force: true });
    const hashed = await readFile(knownHosts, "utf8");
    expect(hashed.startsWith("|1|")).toBe(true);
    await (await SshConnection.connect(target(sshd.port), options({ knownHostsFile: knownHosts }))).close();
    expect(await readFile(knownHosts, "utf8")).toBe(hashed);

    // The host comes back with another key on the same port.
    await sshd.stop();
    const changed = await startSshd("host_b", sshd.port);
    const attempts: ConnectionError[] = [];
    const refused = SshConnection.connect(
      target(changed.port),
      options({ knownHostsFile: knownHosts, onAttempt: (_attempt, error) => attempts.push(error) }),
    );
    await expect(refused).rejects.toBeInstanceOf(ConnectionError);
    await expect(refused).rejects.toThrow(
      new RegExp(
        `host key for 127.0.0.1:${sshd.port} changed.*remove the line \\(line 1\\) from ${knownHosts.replaceAll("/", "\\/")}`,
        "is",
      ),
    );
    expect(attempts).toHaveLength(1);
    expect(await readFile(knownHosts, "utf8")).toBe(hashed);
    await changed.stop();
  }, 20_000);

  it("records a host key under its alias: a new machine on a reused address is accepted, a changed key under the same alias is not", async () => {
    const knownHosts = join(dir, "alias", "known_hosts");
    const first = await startSshd("host_a");
    await (
      await SshConnection.connect(
        target(first.port, { hostKeyAlias: "aws:i-0001" }),
        options({ knownHostsFile: knownHosts }),
      )
    ).close();
    const keyA = (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ");
    expect(await readFile(knownHosts, "utf8")).toBe(`aws:i-0001 ${keyA[0]} ${keyA[1]}\n`);
    await first.stop();

    // The cloud gives the same address and port to another machine, with another key.
    const reused = await startSshd("host_b", first.port);
    const second = await SshConnection.connect(
      target(reused.port, { hostKeyAlias: "aws:i-0002" }),
      options({ knownHostsFile: knownHosts }),
    );
    expect((await second.exec("echo ok")).stdout).toBe("ok\n");
    await second.close();
    const keyB = (await readFile(join(dir, "host_b.pub"), "utf8")).split(" ");
    expect(await readFile(knownHosts, "utf8")).toBe(
      `aws:i-0001 ${keyA[0]} ${keyA[1]}\naws:i-0002 ${keyB[0]} ${keyB[1]}\n`,
    );

    // The first instance's alias now meets another key: refused, naming the alias.
    await expect(
      SshConnection.connect(
        target(reused.port, { hostKeyAlias: "aws:i-0001" }),
        options({ knownHostsFile: knownHosts }),
      ),
    ).rejects.toThrow(
      new RegExp(`host key for 127\\.0\\.0\\.1:${reused.port} \\(recorded as aws:i-0001\\) changed`),
    );
    await reused.stop();

    await expect(
      (async () => SshConnection.connect(target(main.port, { hostKeyAlias: "two words" }), options({})))(),
    ).rejects.toThrow(/hostKeyAlias/);
  }, 20_000);

  it("checks a pinned fingerprint instead of known_hosts", async () => {
    const printed = execFileSync("ssh-keygen", ["-l", "-f", join(dir, "host_a.pub")], { encoding: "utf8" });
    const fingerprint = printed.split(" ")[1] ?? "";
    const publicKey = Buffer.from(
      (await readFile(join(dir, "host_a.pub"), "utf8")).split(" ")[1] ?? "",
      "base64",
    );
    expect(sshKeyFingerprint(publicKey)).toBe(fingerprint);

    const knownHosts = join(dir, "pinned", "known_hosts");
    const pinned = await SshConnection.connect(
      target(main.port, { hostKeyFingerprint: fingerprint }),
      options({ knownHostsFile: knownHosts }),
    );
    await pinned.close();
    expect(existsSync(knownHosts)).toBe(false);

    const other = execFileSync("ssh-keygen", ["-l", "-f", join(dir, "host_b.pub")], {
      encoding: "utf8",
    }).split(" ")[1];
    const started = Date.now();
    await expect(
      SshConnection.connect(
        target(main.port, { hostKeyFingerprint: other }),
        options({ knownHostsFile: knownHosts }),
      ),
    ).rejects.toThrow(
      `host key of 127.0.0.1:${main.port} is ssh-ed25519 ${fingerprint}, but ${other} was expected`,
    );
    expect(Date.now() - started).toBeLessThan(500);
  });
});

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
    expect(elapsed).toBeGreaterThanOrEqual(1_200);
    expect(elapsed).toBeLessThan(3_000);
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
      expect(attempts).toEqual([1]);
      expect(Date.now() - started).toBeLessThan(3_000);
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
