// `skyward pools`, `status` and `attach` on a real detached pool: a client process starts a Local
// pool with tasks, detaches it and is SIGKILLed; the CLI lists it, shows it, and attaches to collect
// the outcomes and close it. And a pool on another provider is reached through the provider
// `--provider` names, from the configuration of the CLI's own cwd and home.
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isProcessRunning } from "@skyward/testing";
import { describe, expect, it } from "vitest";
import { detachedLocalPool } from "./detached-pool.js";
import { CLI, runCli } from "./run-cli.js";

const longChild = fileURLToPath(new URL("./fixtures/detach-long-child.ts", import.meta.url));
const valuesChild = fileURLToPath(new URL("./fixtures/detach-values-child.ts", import.meta.url));
const fixturePackage = fileURLToPath(new URL("./fixtures/fake-provider-package", import.meta.url));
const cliIndex = new URL("../dist/index.js", import.meta.url).href;

/** `skyward attach ID --close --json`, which must succeed quietly; its stdout (one outcome a line). */
async function attachAndClose(id: string, scratch: string, env: NodeJS.ProcessEnv): Promise<string> {
  const attached = await runCli(["attach", id, "--close", "--json"], {
    cwd: scratch,
    env,
    timeoutMs: 60_000,
  });
  expect(attached.stderr).toBe("");
  expect(attached.code).toBe(0);
  return attached.stdout;
}

/** A zombie (a killed client's worker not yet reaped) counts as gone: it runs nothing. */
const alive = isProcessRunning;

describe("skyward pools, status and attach", () => {
  it("list a detached pool, show it, collect its outcomes and close it", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-pools-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "home") };
    const { id, pids } = await detachedLocalPool(scratch, env);

    const pools = await runCli(["pools"], { cwd: scratch, env });
    expect(pools.code).toBe(0);
    const [header, row] = pools.stdout.trim().split("\n");
    expect(header).toMatch(/^POOL\s+PROVIDER\s+TYPE\s+NODES\s+TASKS\s+DETACHED\s+TTL\s+\$\/H\s+COST$/);
    expect(row).toMatch(
      new RegExp(`^${id}\\s+local\\s+local\\s+2/2\\s+6\\s+\\d+s ago\\s+600s\\s+0\\.0000\\s+\\$0\\.0000$`),
    );

    const status = await runCli(["status", id], { cwd: scratch, env });
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`pool ${id} · local · local · local`);
    expect(status.stdout.match(/ running$/gm)).toHaveLength(2);

    const outcomes = (await attachAndClose(id, scratch, env))
      .trim()
      .split("\n")
      .map((text) => JSON.parse(text) as { ok: boolean; value: string });
    expect(outcomes.map((outcome) => outcome.value).sort()).toEqual(["a", "b", "c", "x", "y", "z"]);
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    for (const pid of pids) expect(alive(pid)).toBe(false);

    expect((await runCli(["pools"], { cwd: scratch, env })).stdout).toBe("No detached pools.\n");
    const missing = await runCli(["status", id], { cwd: scratch, env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no detached pool "${id}"`);
  }, 120_000);
});

describe("skyward attach and values JSON has no plain form for", () => {
  it("prints a big integer and an int64 array exactly, bytes as numbers, and closes the pool", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-attach-values-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "home") };
    const { id, pids } = await detachedLocalPool(scratch, env, valuesChild);
    try {
      const stdout = await attachAndClose(id, scratch, env);
      const lines = stdout.trim().split("\n");
      expect(lines).toHaveLength(4);
      // Exact: 2**70 + 1 and 2**62 are past what a JavaScript number holds.
      expect(stdout).toContain('"value":1180591620717411303425');
      expect(stdout).toContain('"value":{"dtype":"int64","shape":[2,2],"data":[1,4611686018427387904,-3,4]}');
      expect(stdout).toContain('"value":[0,1,255]');
      expect(stdout).toContain('"value":"plain"');
      for (const pid of pids) expect(alive(pid)).toBe(false);
    } finally {
      for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  }, 120_000);
});

describe("skyward attach interrupted", () => {
  it("without --close, detaches the pool again on Ctrl-C, a second Ctrl-C included: its workers and their task go on", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-attach-interrupted-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "home") };
    const { id, pids } = await detachedLocalPool(scratch, env, longChild);
    try {
      const log = join(env.SKYWARD_HOME, "logs", "skyward.log");
      const readyRecords = () =>
        readFileSync(log, "utf8")
          .trim()
          .split("\n")
          .filter((text) => {
            const record = JSON.parse(text) as { event?: string; pool?: string };
            return record.event === "pool.ready" && record.pool === id;
          }).length;
      const detachedReady = readyRecords();
      // `skyward attach ID` waits for the outcome of a task that runs for ten minutes.
      const cli = spawn(process.execPath, [CLI, "attach", id], { cwd: scratch, env, stdio: "pipe" });
      let stderr = "";
      cli.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        cli.once("exit", (code, signal) => resolve({ code, signal })),
      );
      await expect.poll(readyRecords, { timeout: 60_000 }).toBe(detachedReady + 1);
      // A second Ctrl-C while it detaches the pool again must not end it half way (the pool's
      // state would be left behind unwritten, its workers unreachable). The workers stopped for a
      // moment hold the detach up, so the second Ctrl-C comes while it is under way.
      for (const pid of pids) process.kill(pid, "SIGSTOP");
      cli.kill("SIGINT");
      await expect.poll(() => stderr, { timeout: 60_000 }).toContain("interrupted while waiting");
      cli.kill("SIGINT");
      await expect.poll(() => stderr, { timeout: 60_000 }).toContain("still finishing");
      for (const pid of pids) process.kill(pid, "SIGCONT");
      expect(await exited).toEqual({ code: 1, signal: null });
      expect(stderr).toContain(`pool ${id} detached again`);
      // The job goes on: the worker runs, and the pool is listed for a later attach.
      for (const pid of pids) expect(alive(pid)).toBe(true);
      const pools = await runCli(["pools"], { cwd: scratch, env });
      expect(pools.stdout).toContain(id);
    } finally {
      for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  }, 120_000);
});

describe("skyward attach --provider and --timeout, status and pools refusing them", () => {
  it("reaches a pool on another provider through the entry --provider names, from the CLI's cwd and home", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "skyward-attach-provider-"));
    const env = { PATH: process.env.PATH ?? "", HOME: scratch, SKYWARD_HOME: join(scratch, "skyward") };
    const { id, pids } = await detachedLocalPool(scratch, env);
    // The pool as if it ran on the fake cloud: each node an instance of it, its worker (a real Local
    // one) reached by the fake's reconnectWorker on loopback.
    const stateFile = join(env.SKYWARD_HOME, "pools", `${id}.json`);
    const state = JSON.parse(readFileSync(stateFile, "utf8"));
    const offer = {
      id: "fake-cpu",
      provider: "fake",
      instanceType: "fake-cpu",
      accelerator: null,
      vcpus: 2,
      memoryGb: 4,
      architecture: "x86_64",
      region: "eu-1",
      spotPrice: null,
      onDemandPrice: 0,
      pricesAsOf: "2026-01-01",
      specific: {},
    };
    const clusterId = `fake-cluster-${id}`;
    state.provider = "fake";
    state.cluster = {
      id: clusterId,
      provider: "fake",
      poolId: id,
      region: "eu-1",
      offer,
      ssh: null,
      specific: {},
    };
    state.nodes = state.nodes.map((node: { index: number }) => ({
      ...node,
      instanceId: `fake-i-${node.index}`,
    }));
    state.instances = state.nodes.map((node: { index: number }) => ({
      id: `fake-i-${node.index}`,
      status: "running",
      publicIp: "127.0.0.1",
      privateIp: "127.0.0.1",
      ssh: null,
      spot: false,
      hourlyPrice: 0,
      offerId: "fake-cpu",
      createdAt: Date.now(),
      tags: { "skyward:cluster": clusterId, "skyward:pool": id },
    }));
    writeFileSync(stateFile, JSON.stringify(state));

    // Two entries of the fake's type: lab1 in the project's skyward.toml, lab2 in the home's defaults.toml.
    const project = join(scratch, "project");
    const home = join(scratch, "userhome");
    mkdirSync(join(project, "node_modules"), { recursive: true });
    mkdirSync(join(home, ".skyward"), { recursive: true });
    symlinkSync(fixturePackage, join(project, "node_modules", "skyward-provider-fake"), "dir");
    const entry = (name: string) =>
      [
        `[providers.${name}]`,
        'type = "fake"',
        'package = "skyward-provider-fake"',
        `state_file = "${join(scratch, `${name}.json`)}"`,
        'api_key = "lab-key-0123456789"',
        "",
      ].join("\n");
    writeFileSync(join(project, "skyward.toml"), entry("lab1"));
    writeFileSync(join(home, ".skyward", "defaults.toml"), entry("lab2"));
    const empty = JSON.stringify({ offers: [], instances: [], calls: [] });
    writeFileSync(join(scratch, "lab1.json"), empty);
    writeFileSync(join(scratch, "lab2.json"), empty);
    const calls = (name: string) =>
      (JSON.parse(readFileSync(join(scratch, `${name}.json`), "utf8")) as { calls: { method: string }[] })
        .calls;
    const userEnv = { ...env, HOME: home };

    // status and pools read state files only: the flags are refused, not ignored.
    for (const args of [
      ["status", id, "--provider", "lab2"],
      ["pools", "--timeout", "5"],
      ["status", id, "--timeout", "5"],
    ]) {
      const refused = await runCli(args, { cwd: project, env: userEnv });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(
        /^skyward: (status|pools) takes no --(provider|timeout): it reads the detached pools' state files/,
      );
    }
    // Without --provider, two entries of the pool's type: which one is not guessed.
    const ambiguous = await runCli(["attach", id], { cwd: project, env: userEnv });
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toContain(
      `pool ${id} runs on "fake": expected exactly one [providers.*] entry of type "fake" in skyward.toml to reach it through, found 2 ("lab2", "lab1"); name one with --provider NAME`,
    );
    // An entry of another kind is refused before any worker is reached.
    const unknown = await runCli(["attach", id, "--provider", "nope"], { cwd: project, env: userEnv });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown provider "nope"');
    expect([...calls("lab1"), ...calls("lab2")]).toEqual([]);

    // --timeout bounds reconnecting: node 0's port answers TCP but never speaks.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const silentPort = (silent.address() as { port: number }).port;
    const ports = state.nodes.map((node: { port: number }) => node.port);
    writeFileSync(
      stateFile,
      JSON.stringify({
        ...state,
        nodes: state.nodes.map((node: object, index: number) =>
          index === 0 ? { ...node, port: silentPort } : node,
        ),
      }),
    );
    const timedOut = await runCli(["attach", id, "--provider", "lab1", "--timeout", "1"], {
      cwd: project,
      env: userEnv,
      timeoutMs: 20_000,
    });
    silent.close();
    expect(timedOut.code).toBe(1);
    expect(timedOut.stderr).toMatch(/aborted/);
    expect(calls("lab1").map((call) => call.method)).toEqual(["reconnectWorker", "reconnectWorker"]);
    writeFileSync(
      stateFile,
      JSON.stringify({
        ...state,
        nodes: state.nodes.map((node: object, index: number) => ({ ...node, port: ports[index] })),
      }),
    );

    // runCli({ cwd, home }) in a process whose own cwd and HOME hold no configuration: lab2 (the
    // home's defaults.toml) is found and used, and the outcomes are collected through it.
    const script = `import { runCli } from ${JSON.stringify(cliIndex)};
process.exitCode = await runCli(["attach", ${JSON.stringify(id)}, "--provider", "lab2", "--close", "--json", "--timeout", "30"], { cwd: ${JSON.stringify(project)}, home: ${JSON.stringify(home)} });`;
    const attached = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--input-type=module", "-e", script],
        { cwd: scratch, env, timeout: 60_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === "number" ? error.code : null) : 0, stdout, stderr }),
      );
    });
    expect(attached.stderr).toBe("");
    expect(attached.code).toBe(0);
    const outcomes = attached.stdout
      .trim()
      .split("\n")
      .map((text) => JSON.parse(text) as { ok: boolean; value: string });
    expect(outcomes.map((outcome) => outcome.value).sort()).toEqual(["a", "b", "c", "x", "y", "z"]);
    expect(calls("lab2").map((call) => call.method)).toEqual([
      "reconnectWorker",
      "reconnectWorker",
      "terminate",
    ]);
    expect(calls("lab1").map((call) => call.method)).toEqual(["reconnectWorker", "reconnectWorker"]);
    for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
  }, 120_000);
});
