import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isProcessRunning, processStartTime, runCommand } from "./process.js";
import {
  checkTestbedPrerequisites,
  cleanupStaleTestbeds,
  createTestbed,
  findExecutable,
  requireTestbed,
  type Testbed,
  type TestbedHost,
  testbedSkipReason,
} from "./testbed.js";

const skipReason = await requireTestbed();
const SSH = findExecutable("ssh") ?? "/usr/bin/ssh";
const IP = findExecutable("ip") ?? "/usr/sbin/ip";

/** Runs the real OpenSSH client against a test-bed host; `-v` makes it print the host key it was shown. */
function ssh(
  host: TestbedHost,
  command: string,
  extraOptions: string[] = [],
  identityFile = host.identityFile,
) {
  return runCommand(
    SSH,
    [
      "-v",
      "-F",
      "/dev/null",
      // ssh keeps the first value it is given for an option: the caller's come first.
      ...extraOptions,
      "-i",
      identityFile,
      "-o",
      "IdentitiesOnly=yes",
      "-o",
      "BatchMode=yes",
      "-o",
      "ConnectTimeout=5",
      "-o",
      "StrictHostKeyChecking=no",
      "-o",
      "UserKnownHostsFile=/dev/null",
      "-p",
      String(host.port),
      `${host.user}@${host.host}`,
      command,
    ],
    { timeoutMs: 15_000 },
  );
}

async function namespaces(): Promise<string[]> {
  const { stdout } = await runCommand(IP, ["netns", "list"]);
  return stdout
    .split("\n")
    .map((line) => line.trim().split(/\s+/)[0] ?? "")
    .filter(Boolean);
}

async function links(): Promise<string[]> {
  const { stdout } = await runCommand(IP, ["-j", "link", "show"]);
  return (JSON.parse(stdout) as Array<{ ifname: string }>).map((link) => link.ifname);
}

async function namespacePids(namespace: string): Promise<number[]> {
  const { stdout } = await runCommand(IP, ["netns", "pids", namespace]);
  return stdout.split(/\s+/).filter(Boolean).map(Number);
}

/** Directories of test beds this process owns, by their owner.json. */
function ownedTestbedDirectories(): string[] {
  const result = spawnSync("sh", ["-c", "ls -d /tmp/skyward-testbed-* 2>/dev/null"], { encoding: "utf8" });
  return result.stdout
    .split("\n")
    .filter(Boolean)
    .filter((directory) => {
      try {
        const owner = JSON.parse(readFileSync(join(directory, "owner.json"), "utf8")) as { pid: number };
        return owner.pid === process.pid;
      } catch {
        return false;
      }
    });
}

describe.skipIf(skipReason !== undefined)("a three-host test bed", () => {
  let bed: Testbed;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 3 });
  });

  afterAll(async () => {
    await bed?.teardown();
  });

  it("describes three distinct hosts on its own /24", () => {
    expect(bed.hosts).toHaveLength(3);
    const octet = bed.id;
    expect(bed.subnet).toBe(`10.213.${octet}.0/24`);
    expect(bed.bridgeAddress).toBe(`10.213.${octet}.1`);
    expect(bed.hosts.map((host) => host.host)).toEqual([2, 3, 4].map((last) => `10.213.${octet}.${last}`));
    expect(bed.hosts.map((host) => host.name)).toEqual(["host0", "host1", "host2"]);
    expect(new Set(bed.hosts.map((host) => host.namespace)).size).toBe(3);
    expect(new Set(bed.hosts.map((host) => host.hostKeyFingerprint)).size).toBe(3);
    for (const host of bed.hosts) {
      expect(host.port).toBe(22);
      expect(host.user).toBe("root");
      expect(host.namespace.length).toBeLessThanOrEqual(15);
      expect(host.hostKeyFingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
      expect(host.hostPublicKey).toMatch(/^ssh-ed25519 AAAA\S+$/);
    }
  });

  it("keeps the client key in a 0600 file whose text is the privateKey", () => {
    const [host] = bed.hosts as [TestbedHost];
    expect(statSync(host.identityFile).mode & 0o777).toBe(0o600);
    expect(host.privateKey).toContain("-----BEGIN OPENSSH PRIVATE KEY-----");
    expect(readFileSync(host.identityFile, "utf8")).toBe(host.privateKey);
  });

  it("lets the real ssh client log in as root on every host, which presents the reported host key", async () => {
    const results = await Promise.all(bed.hosts.map((host) => ssh(host, "ip -4 -o address show dev eth0")));
    results.forEach((result, index) => {
      const host = bed.hosts[index] as TestbedHost;
      expect(result.exitCode, result.stderr).toBe(0);
      // The command ran inside that host's namespace: eth0 there carries exactly its address.
      expect(result.stdout).toContain(`inet ${host.host}/24`);
      expect(/Server host key: ssh-ed25519 (SHA256:\S+)/.exec(result.stderr)?.[1]).toBe(
        host.hostKeyFingerprint,
      );
    });
  });

  it("gives each host a public key that strict host-key checking accepts, and no other host's", async () => {
    const [first, second] = bed.hosts as [TestbedHost, TestbedHost];
    const knownHosts = join(bed.directory, "known_hosts_test");
    writeFileSync(
      knownHosts,
      `${first.host} ${first.hostPublicKey}\n${second.host} ${first.hostPublicKey}\n`,
    );
    const strict = ["-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${knownHosts}`];
    const accepted = await ssh(first, "true", strict);
    expect(accepted.exitCode, accepted.stderr).toBe(0);
    const refused = await ssh(second, "true", strict);
    expect(refused.exitCode).toBe(255);
    expect(refused.stderr).toMatch(/HOST IDENTIFICATION HAS CHANGED|Host key verification failed/);
  });

  it("refuses a key it did not authorise (root login is by the test bed's key only)", async () => {
    const [host] = bed.hosts as [TestbedHost];
    const otherKey = join(bed.directory, "other_key");
    spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", otherKey]);
    const result = await ssh(host, "true", ["-o", "PreferredAuthentications=publickey,password"], otherKey);
    expect(result.exitCode).toBe(255);
    expect(result.stderr).toContain("Permission denied");
  });

  it("lets hosts reach each other over the bridge", async () => {
    const [first, second, third] = bed.hosts as [TestbedHost, TestbedHost, TestbedHost];
    // A bare TCP connection from host1's namespace to the other two hosts' sshd.
    for (const target of [first, third]) {
      const viaBash = await bed.exec(
        1,
        ["bash", "-c", `exec 3<>/dev/tcp/${target.host}/22 && head -c 8 <&3`],
        {
          timeoutMs: 10_000,
        },
      );
      expect(viaBash.exitCode, viaBash.stderr).toBe(0);
      expect(viaBash.stdout).toBe("SSH-2.0-");
    }
    // A full SSH login from one host to another: second logs into third and reports third's address.
    const hop = await bed.exec(
      1,
      [
        SSH,
        "-F",
        "/dev/null",
        "-i",
        second.identityFile,
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        `root@${third.host}`,
        "ip -4 -o address show dev eth0",
      ],
      { timeoutMs: 15_000 },
    );
    expect(hop.exitCode, hop.stderr).toBe(0);
    expect(hop.stdout).toContain(`inet ${third.host}/24`);
  });

  it("runs exec inside the chosen namespace and rejects an unknown host index", async () => {
    const result = await bed.exec(2, "ip -4 -o address show dev eth0; exit 3");
    expect(result.exitCode).toBe(3);
    expect(result.stdout).toContain(`inet ${(bed.hosts[2] as TestbedHost).host}/24`);
    await expect(bed.exec(3, "true")).rejects.toThrow(/hostIndex/);
  });

  it("gives each host its own existing root directory", async () => {
    const roots = bed.hosts.map((host) => host.root);
    expect(new Set(roots).size).toBe(3);
    for (const root of roots) expect(statSync(root).isDirectory()).toBe(true);
    // What a remote command writes under host0's root is there, and not under host1's.
    const [first] = bed.hosts as [TestbedHost];
    const written = await ssh(first, `echo hello > ${first.root}/marker`);
    expect(written.exitCode, written.stderr).toBe(0);
    expect(readFileSync(join(first.root, "marker"), "utf8")).toBe("hello\n");
    expect(existsSync(join((bed.hosts[1] as TestbedHost).root, "marker"))).toBe(false);
  });

  it("survives cleanupStaleTestbeds: a live test bed is not stale", async () => {
    const report = await cleanupStaleTestbeds();
    for (const host of bed.hosts) {
      expect(report.namespaces).not.toContain(host.namespace);
      expect(isProcessRunning(host.sshdPid)).toBe(true);
    }
    expect(report.directories).not.toContain(bed.directory);
    const result = await ssh(bed.hosts[0] as TestbedHost, "true");
    expect(result.exitCode, result.stderr).toBe(0);
  });
});

describe.skipIf(skipReason !== undefined)("test bed teardown", () => {
  it("removes every namespace, link, process and directory, and can be called again", async () => {
    const bed = await createTestbed({ hosts: 2 });
    // A process a test left running inside a host must go too.
    const started = await bed.exec(0, "sleep 300 >/dev/null 2>&1 &");
    expect(started.exitCode).toBe(0);
    const pids = [
      ...(await namespacePids(bed.hosts[0]!.namespace)),
      ...(await namespacePids(bed.hosts[1]!.namespace)),
    ];
    expect(pids).toEqual(expect.arrayContaining(bed.hosts.map((host) => host.sshdPid)));
    expect(pids.length).toBeGreaterThanOrEqual(3);
    expect(pids.every(isProcessRunning)).toBe(true);

    await bed.teardown();
    await bed.teardown();

    const names = await namespaces();
    for (const host of bed.hosts) expect(names).not.toContain(host.namespace);
    expect((await links()).filter((link) => link.startsWith(`skyt-${bed.id}-`))).toEqual([]);
    expect(pids.filter(isProcessRunning)).toEqual([]);
    expect(existsSync(bed.directory)).toBe(false);
  });

  it("tears down on `await using`", async () => {
    let directory = "";
    let namespace = "";
    {
      await using bed = await createTestbed({ hosts: 1 });
      directory = bed.directory;
      namespace = bed.hosts[0]!.namespace;
      expect(existsSync(directory)).toBe(true);
    }
    expect(existsSync(directory)).toBe(false);
    expect(await namespaces()).not.toContain(namespace);
  });

  it.each([
    ["once it has claimed its directory", (_directory: string) => true],
    [
      "once it has made a namespace",
      (directory: string) => existsSync(`/run/netns/${namespaceOf(directory)}`),
    ],
    ["once an sshd is running", (directory: string) => existsSync(join(directory, "host0", "sshd.pid"))],
  ])("removes what it made when the creation is aborted %s", async (_stage, reached) => {
    const before = ownedTestbedDirectories();
    const controller = new AbortController();
    // More hosts than are set up at once (8), so much is still to do when the stage is reached.
    const creation = createTestbed({ hosts: 12, signal: controller.signal });
    let claimed: string | undefined;
    const watcher = setInterval(() => {
      claimed ??= ownedTestbedDirectories().find((directory) => !before.includes(directory));
      if (claimed !== undefined && reached(claimed)) controller.abort();
    }, 1);
    try {
      await expect(creation).rejects.toThrow(/aborted/);
    } finally {
      clearInterval(watcher);
    }
    expect(claimed).toBeDefined();
    const directory = claimed as string;
    const octet = directory.slice("/tmp/skyward-testbed-".length);
    expect(existsSync(directory)).toBe(false);
    expect((await namespaces()).filter((name) => name.startsWith(`skyt-${octet}-`))).toEqual([]);
    expect((await links()).filter((name) => name.startsWith(`skyt-${octet}-`))).toEqual([]);
    // No sshd (or anything else) started with a path inside the test bed's directory is left.
    const { stdout } = await runCommand("ps", ["-eo", "stat=,args="]);
    const survivors = stdout
      .split("\n")
      .filter((line) => line.includes(directory) && !line.trim().startsWith("Z"));
    expect(survivors).toEqual([]);
  });

  it("rejects a host count out of range", async () => {
    await expect(createTestbed({ hosts: 0 })).rejects.toThrow(/hosts: expected an integer from 1 to 200/);
    await expect(createTestbed({ hosts: 1.5 })).rejects.toThrow(RangeError);
  });
});

/** The first namespace of the test bed whose directory this is. */
function namespaceOf(directory: string): string {
  return `skyt-${directory.slice("/tmp/skyward-testbed-".length)}-host0`;
}

describe.skipIf(skipReason !== undefined)("cleanupStaleTestbeds", () => {
  it("removes a crashed run's namespace, links, processes and directory", async () => {
    // Octets above 255 are never allocated, so this cannot collide with a real test bed.
    const octet = 900 + Math.floor(Math.random() * 99);
    const namespace = `skyt-${octet}-host0`;
    const veth = `skyt-${octet}-v0`;
    const bridge = `skyt-${octet}-br`;
    const directory = `/tmp/skyward-testbed-${octet}`;
    // The crashed run's owner is alive while its resources are made, so that another process's sweep
    // (a parallel suite's global setup) leaves them alone; it dies just before this sweep, as a crashed
    // run's owner did (a sweep between the two could still take them: a window of milliseconds).
    const owner = spawn("sleep", ["300"], { stdio: "ignore" });
    const ownerExited = new Promise((resolve) => owner.once("exit", resolve));
    let sleeper: number | undefined;
    try {
      await runCommand(IP, ["netns", "add", namespace]);
      await runCommand(IP, ["link", "add", bridge, "type", "bridge"]);
      await runCommand(IP, ["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace]);
      const child = spawn(IP, ["netns", "exec", namespace, "sleep", "300"], { stdio: "ignore" });
      child.unref();
      sleeper = child.pid;
      mkdirSync(join(directory, "host0"), { recursive: true });
      writeFileSync(
        join(directory, "owner.json"),
        JSON.stringify({
          pid: owner.pid,
          startTime: processStartTime(owner.pid as number),
          createdAt: new Date().toISOString(),
        }),
      );
      await expect.poll(() => namespacePids(namespace)).toContain(sleeper);
      // The crash: the owner dies (and is reaped, so no zombie answers for it).
      owner.kill("SIGKILL");
      await ownerExited;

      const report = await cleanupStaleTestbeds();

      expect(report.failures.filter((failure) => failure.includes(`skyt-${octet}-`))).toEqual([]);
      expect(report.namespaces).toContain(namespace);
      expect(report.links).toContain(bridge);
      expect(report.directories).toContain(directory);
      expect(report.processes).toContain(sleeper);
      expect(await namespaces()).not.toContain(namespace);
      const remaining = await links();
      expect(remaining).not.toContain(bridge);
      expect(remaining).not.toContain(veth);
      expect(isProcessRunning(sleeper as number)).toBe(false);
      expect(existsSync(directory)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      if (sleeper !== undefined && isProcessRunning(sleeper)) process.kill(sleeper, "SIGKILL");
      await runCommand(IP, ["netns", "delete", namespace]);
      await runCommand(IP, ["link", "delete", bridge]);
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe.skipIf(skipReason !== undefined)("test-bed prerequisites", () => {
  it("finds nothing missing on this machine", async () => {
    expect(await checkTestbedPrerequisites()).toEqual([]);
    expect(await testbedSkipReason()).toBeUndefined();
    expect(await requireTestbed()).toBeUndefined();
  });
});

/** The package built to plain JavaScript, so that other (real) processes can run it. */
async function buildPackage(outDir: string): Promise<string> {
  const { build } = await import("tsup");
  chmodSync(outDir, 0o755);
  await build({
    // Only the test bed (the package index also pulls in the conformance suite, and with it @skyward/core).
    entry: { index: fileURLToPath(new URL("./testbed.ts", import.meta.url)) },
    outDir,
    format: ["esm"],
    target: "node22",
    platform: "node",
    config: false,
    silent: true,
    dts: false,
    sourcemap: false,
  });
  return join(outDir, "index.js");
}

interface ChildTestbed {
  id: string;
  directory: string;
  namespaces: string[];
  sshdPids: number[];
}

/** Starts a node process that makes a test bed, reports it on stdout, and then ends as `ending` says. */
async function startTestbedProcess(
  entry: string,
  ending: "returns" | "hangs",
): Promise<{ testbed: ChildTestbed; child: ChildProcess; exited: Promise<number | null> }> {
  const script = [
    `const testing = await import(${JSON.stringify(entry)});`,
    "const bed = await testing.createTestbed({ hosts: 2 });",
    "console.log(JSON.stringify({ id: bed.id, directory: bed.directory,",
    "  namespaces: bed.hosts.map((host) => host.namespace), sshdPids: bed.hosts.map((host) => host.sshdPid) }));",
    // "returns": nothing keeps the event loop alive, so node exits without a teardown.
    ending === "hangs" ? "setInterval(() => {}, 1000);" : "",
  ].join("\n");
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const testbed = await new Promise<ChildTestbed>((resolve, reject) => {
    lines.once("line", (line) => resolve(JSON.parse(line) as ChildTestbed));
    child.once("exit", (code) => reject(new Error(`the test-bed process exited (${String(code)}) early`)));
  });
  return { testbed, child, exited };
}

describe.skipIf(skipReason !== undefined)("test beds in other processes", () => {
  const outDir = mkdtempSync("/tmp/skyt-build-");
  let entry = "";

  beforeAll(async () => {
    entry = await buildPackage(outDir);
  });

  afterAll(() => {
    rmSync(outDir, { recursive: true, force: true });
  });

  it("a process that exits without a teardown still removes its test bed (exit hook)", async () => {
    const { testbed, exited } = await startTestbedProcess(entry, "returns");
    expect(await exited).toBe(0);
    expect(testbed.sshdPids.filter(isProcessRunning)).toEqual([]);
    const names = await namespaces();
    for (const namespace of testbed.namespaces) expect(names).not.toContain(namespace);
    expect((await links()).filter((link) => link.startsWith(`skyt-${testbed.id}-`))).toEqual([]);
    expect(existsSync(testbed.directory)).toBe(false);
  });

  it("a killed process's test bed is left behind, and cleanupStaleTestbeds removes it", async () => {
    const { testbed, child, exited } = await startTestbedProcess(entry, "hangs");
    try {
      child.kill("SIGKILL");
      await exited;
      // SIGKILL runs no hook: everything is still there, sshd included.
      expect(testbed.sshdPids.every(isProcessRunning)).toBe(true);
      expect(await namespaces()).toEqual(expect.arrayContaining(testbed.namespaces));

      const report = await cleanupStaleTestbeds();

      expect(report.namespaces).toEqual(expect.arrayContaining(testbed.namespaces));
      expect(report.links).toContain(`skyt-${testbed.id}-br`);
      expect(report.directories).toContain(testbed.directory);
      expect(report.processes).toEqual(expect.arrayContaining(testbed.sshdPids));
      expect(testbed.sshdPids.filter(isProcessRunning)).toEqual([]);
      const names = await namespaces();
      for (const namespace of testbed.namespaces) expect(names).not.toContain(namespace);
      expect((await links()).filter((link) => link.startsWith(`skyt-${testbed.id}-`))).toEqual([]);
      expect(existsSync(testbed.directory)).toBe(false);
    } finally {
      child.kill("SIGKILL");
      await cleanupStaleTestbeds();
    }
  });

  it("as a non-root user: reports root missing, skips outside CI and throws under CI=true", () => {
    const script = [
      `const testing = await import(${JSON.stringify(entry)});`,
      "const missing = await testing.checkTestbedPrerequisites();",
      "let outcome;",
      "try { outcome = { reason: await testing.requireTestbed() }; }",
      "catch (error) { outcome = { thrown: error.message }; }",
      "console.log(JSON.stringify({ missing, ...outcome }));",
    ].join("\n");
    const runAsNobody = (ci: string | undefined) => {
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
      if (ci !== undefined) env.CI = ci;
      // A copy of this Node that nobody can run: the toolchain's may sit in a directory only root can
      // enter (a clone made with `mktemp -d`, mode 0700).
      const node = join(outDir, "node");
      if (!existsSync(node)) {
        copyFileSync(process.execPath, node);
        chmodSync(node, 0o755);
      }
      const result = spawnSync(node, ["--input-type=module", "-e", script], {
        uid: 65534,
        gid: 65534,
        cwd: "/tmp",
        env,
        encoding: "utf8",
        timeout: 20_000,
      });
      expect(result.status, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as { missing: string[]; reason?: string; thrown?: string };
    };

    const outsideCi = runAsNobody(undefined);
    expect(outsideCi.missing).toEqual([expect.stringContaining("root is required")]);
    expect(outsideCi.reason).toContain("root is required");
    expect(outsideCi.thrown).toBeUndefined();

    const inCi = runAsNobody("true");
    expect(inCi.thrown).toContain("root is required");
    expect(inCi.thrown).toContain("CI");
  });
});
