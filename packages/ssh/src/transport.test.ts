/**
 * The SSH connection against a real OpenSSH sshd (`test/sshd.ts`): commands, processes, uploads
 * and tunnels, checked by their effects on this machine, which is the remote side.
 */

import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { CancelledError, ConfigurationError, ConnectionError } from "@skyward/core";
import { pythonRuntimeDirectory } from "@skyward/core/contract";
import { WorkerConnection } from "@skyward/core/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dir, eventually, freePort, processRunning, ssh, sshdMissing, useSshdBed } from "../test/sshd.js";

useSshdBed();

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
