/**
 * Bytes through the SSH tunnel to a worker on a test-bed host (real sshd in a network namespace;
 * needs root, as the test bed does): a `bytes` echo of `--mib` MiB (there and back) through a
 * pool's worker, beside a baseline measured in the same run — OpenSSH's own client piping the same
 * bytes through `cat` on the same host, less the same command with nothing to send (connection
 * and session set-up) — and the same echo on a `Local` pool (no SSH at all).
 * `@skyward/ssh` runs ssh2 on Node's crypto (its native binding aborts the process on Node 24.19+,
 * see `packages/ssh/src/ssh2-module.ts`): this says what that costs. Figures are printed, never asserted.
 *
 *     pnpm -s turbo run build --filter @skyward/provider-ssh...
 *     node packages/provider-ssh/bench/tunnel.ts [--mib 32] [--runs 5]
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as sky from "@skyward/core";
import { createTestbed, requireTestbed, testbedSshHosts, useScratchSkywardHome } from "@skyward/testing";
import { SSH } from "../dist/index.js";

const { values: flags } = parseArgs({
  options: { mib: { type: "string", default: "32" }, runs: { type: "string", default: "5" } },
});
const mib = Number(flags.mib);
const runs = Number(flags.runs);
const bytes = mib * 1024 * 1024;
const tasks = fileURLToPath(new URL("../../core/bench/bench_tasks.py", import.meta.url));
const echo = sky.python<[Uint8Array], Uint8Array>("bench_tasks:echo");

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
/** MB/s for `bytes` there and back in `ms`. */
const rate = (ms: number) => (2 * bytes) / 1e6 / (ms / 1000);

/** OpenSSH's client sends `payload` to `cat` on the host and reads it back: milliseconds. */
function opensshEcho(host: { host: string; identityFile: string }, payload: Uint8Array): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(
      "ssh",
      [
        "-i",
        host.identityFile,
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "BatchMode=yes",
        `root@${host.host}`,
        "cat",
      ],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    let received = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0 || received !== payload.length)
        reject(new Error(`ssh cat: exit ${code}, ${received} of ${payload.length} bytes back`));
      else resolve(performance.now() - started);
    });
    child.stdin.end(payload);
  });
}

async function poolEcho(pool: sky.Pool, payload: Uint8Array): Promise<number> {
  const started = performance.now();
  const back = await pool.run(echo(payload));
  if (back.length !== payload.length) throw new Error(`echo: ${back.length} of ${payload.length} bytes back`);
  return performance.now() - started;
}

const skip = await requireTestbed();
if (skip !== undefined) {
  process.stderr.write(`no test bed here: ${skip}\n`);
  process.exit(1);
}
const home = await useScratchSkywardHome("skyward-bench-tunnel-");
const bed = await createTestbed({ hosts: 1 });
const payload = new Uint8Array(bytes).fill(7);
try {
  const [host] = bed.hosts;
  if (!host) throw new Error("the test bed has no host");
  await using remote = await sky.compute({
    provider: SSH({ hosts: testbedSshHosts(bed) }),
    nodes: 1,
    ttl: 0,
    image: { includes: [tasks] },
    options: { console: false, bootstrapTimeout: 240 },
  });
  await using local = await sky.compute({
    nodes: 1,
    image: { includes: [tasks] },
    options: { console: false },
  });
  // Warm-up: a first echo of each (buffers, the interpreter's allocator, the SSH window).
  await poolEcho(remote, payload);
  await poolEcho(local, payload);
  await opensshEcho(host, payload);
  const times = { openssh: [] as number[], tunnel: [] as number[], local: [] as number[] };
  const empty = new Uint8Array(0);
  for (let run = 0; run < runs; run += 1) {
    // Interleaved, so that load on the machine weighs on each the same. OpenSSH's figure is its
    // transfer alone: its connection and session set-up (an empty `cat`) taken off.
    const setup = await opensshEcho(host, empty);
    times.openssh.push(Math.max(1, (await opensshEcho(host, payload)) - setup));
    times.tunnel.push(await poolEcho(remote, payload));
    times.local.push(await poolEcho(local, payload));
  }
  const baseline = rate(median(times.openssh));
  const row = (label: string, values: number[]) => {
    const mbps = rate(median(values));
    return `| ${label} | ${Math.round(median(values))} ms | ${mbps.toFixed(0)} MB/s | ${(mbps / baseline).toFixed(2)}× |`;
  };
  process.stdout.write(
    [
      `bytes echo of ${mib} MiB there and back, one test-bed SSH host, medians of ${runs}:`,
      "| path | time | throughput | vs baseline |",
      "| --- | --- | --- | --- |",
      row("baseline: OpenSSH client, `ssh host cat` less its set-up", times.openssh),
      row("pool worker over Skyward's SSH tunnel (ssh2, Node crypto)", times.tunnel),
      row("Local pool worker (loopback, no SSH)", times.local),
      "",
    ].join("\n"),
  );
} finally {
  await bed.teardown();
  await home.restore();
}
