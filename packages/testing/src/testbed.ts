/**
 * The test bed: several SSH hosts on this machine, each a Linux network namespace on a private
 * bridge running a real OpenSSH `sshd`, each with its own Skyward root directory.
 *
 * Resources are named so that any run can tell what is whose: a test bed claims the /24
 * `10.213.<octet>.0/24` by creating `/tmp/skyward-testbed-<octet>` (an atomic `mkdir`) with an
 * `owner.json` naming its process; its namespaces are `skyt-<octet>-host<i>`, its veths
 * `skyt-<octet>-v<i>` and its bridge `skyt-<octet>-br`. {@link cleanupStaleTestbeds} removes every
 * `skyt-` resource whose owner process is gone, and leaves the others alone, so parallel runs on
 * one machine do not break each other.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, rmSync, statSync } from "node:fs";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import type { InstanceSsh } from "@skyward/core/contract";
import {
  type CommandResult,
  isProcessRunning,
  runChecked,
  runCommand,
  runCommandSync,
  signalProcess,
  terminateProcesses,
} from "./process.js";
import {
  bridgeName,
  combineSignals,
  DEFAULT_CREATE_TIMEOUT_MS,
  findExecutable,
  MAX_HOSTS,
  mapWithLimit,
  namespaceName,
  requireExecutable,
  SSH_PORT,
  SSHD_PATH,
  SUBNET_PREFIX,
  sleep,
  TESTBED_DIRECTORY_PARENT,
  TESTBED_NAME_PREFIX,
  throwIfAborted,
  vethName,
} from "./testbed-common.js";
import { LOGIN_ENVIRONMENT, removeStaleLoginLocks } from "./testbed-login.js";
import { claimSubnet, listLinks, listNamespaces, namespacePids } from "./testbed-machine.js";
import {
  checkTestbedPrerequisites,
  cleanupStaleTestbeds,
  requireTestbed,
  testbedSkipReason,
} from "./testbed-maintenance.js";

/** One SSH host of a test bed: everything a client needs to log in as root. */
export interface TestbedHost {
  /** `host0`, `host1`, … in creation order. */
  name: string;
  /** The host's IPv4 address on the test bed's bridge (`10.213.<octet>.<index + 2>`). */
  host: string;
  /** The port sshd listens on. */
  port: 22;
  /** The login user; the test bed authorises its client key for root only. */
  user: "root";
  /** The client's private key (OpenSSH format text). A secret: never log it. */
  privateKey: string;
  /** Path of the same private key on disk, mode 0600, for `ssh -i`. */
  identityFile: string;
  /** The host's own Skyward root directory (namespaces share one filesystem; this keeps hosts apart). */
  root: string;
  /** The host key's fingerprint as `ssh-keygen -l` prints it: `SHA256:<base64>`. */
  hostKeyFingerprint: string;
  /** The host's public key, `ssh-ed25519 AAAA…`, as a `known_hosts` line needs it. */
  hostPublicKey: string;
  /** The network namespace the host lives in (`ip netns exec <namespace> …`). */
  namespace: string;
  /** The pid of the host's sshd (its listener process). */
  sshdPid: number;
}

/** What {@link Testbed.exec} returns: a command's exit code and output. */
export type TestbedExecResult = CommandResult;

/** Options of {@link Testbed.exec}. */
export interface TestbedExecOptions {
  /** Aborting kills the command and rejects. */
  signal?: AbortSignal;
  /** Deadline in milliseconds (default 30 s); past it the command is killed and the call rejects. */
  timeoutMs?: number;
}

/** A running test bed. Dispose it (`await using`) or call {@link Testbed.teardown}. */
export interface Testbed extends AsyncDisposable {
  /** The test bed's id: the third octet of its subnet, also in its names and directory. */
  id: string;
  /** The hosts, in order. */
  hosts: readonly TestbedHost[];
  /** The bridge's address in the root namespace (`10.213.<octet>.1`): where connections to hosts come from. */
  bridgeAddress: string;
  /** The test bed's private subnet, `10.213.<octet>.0/24`. */
  subnet: string;
  /** The test bed's temporary directory (keys, sshd configs and logs, host roots); removed on teardown. */
  directory: string;
  /**
   * Runs a command inside a host's namespace, as root, on this machine's filesystem: a string goes
   * through `sh -c`, an array is the program and its arguments. Resolves with the exit code and
   * output whatever the exit code; rejects only when the command cannot run or times out. A
   * process left running in the background must redirect its output (`cmd >/dev/null 2>&1 &`),
   * or the call waits for it; teardown ends it either way.
   */
  exec(
    hostIndex: number,
    command: string | readonly string[],
    options?: TestbedExecOptions,
  ): Promise<TestbedExecResult>;
  /**
   * Removes every namespace, link and directory the test bed made and ends every process in its
   * namespaces. Idempotent (later calls return the first call's promise) and carries on past
   * errors; rejects only if something is still left at the end.
   */
  teardown(): Promise<void>;
}

/** Options of {@link createTestbed}. */
export interface CreateTestbedOptions {
  /** How many hosts (1–200). */
  hosts: number;
  /** Aborting stops the creation and removes whatever was made. */
  signal?: AbortSignal;
  /** Deadline for the whole creation, sshd readiness included (default 60 s). */
  timeoutMs?: number;
  /**
   * Environment variables every SSH session on the hosts gets (sshd's `SetEnv`), given the test
   * bed's directory: for a service whose files live there, such as the Slurm test bed's `SLURM_CONF`.
   * They go beside (and may override) the variables every test bed sets: `PYENV_REHASH_TIMEOUT=3`
   * (a login's `pyenv rehash` waits at most 3 s for its lock).
   */
  sshdEnvironment?: (directory: string) => Readonly<Record<string, string>>;
}

/** Options of {@link testbedSshHost} (and of {@link testbedSshHosts}). */
export interface TestbedSshHostOptions {
  /**
   * Pin the host key by its fingerprint (default `true`). `false` leaves `hostKeyFingerprint` out,
   * so the key is trusted on first use and remembered in `$SKYWARD_HOME`'s `known_hosts`.
   */
  pinHostKey?: boolean;
  /**
   * Give the private key as its file (`identityFile`) rather than its text (`privateKey`, the
   * default): for a host list written to a file or handed to another process.
   */
  keyFile?: boolean;
}

/**
 * A test-bed host as an entry of `@skyward/provider-ssh`'s `SSH({ hosts })`, its port, user and root
 * always given. (The fields of an instance's SSH address, so the test bed needs no provider.)
 */
export type TestbedSshHostInput = Pick<InstanceSsh, "privateKey" | "identityFile" | "hostKeyFingerprint"> &
  Required<Pick<InstanceSsh, "host" | "port" | "user" | "root">>;

/** Options of {@link testbedSshHosts}. */
export interface TestbedSshHostsOptions extends TestbedSshHostOptions {
  /** Which hosts, by index into {@link Testbed.hosts}, in this order (default: all of them). */
  indices?: readonly number[];
}

interface TestbedState {
  octet: number;
  directory: string;
  namespaces: string[];
  links: string[];
  sshds: ChildProcess[];
  teardown?: Promise<void>;
}

const liveTestbeds = new Set<TestbedState>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const state of liveTestbeds) {
      try {
        teardownSync(state);
      } catch {
        // Nothing can be reported while exiting; cleanupStaleTestbeds() removes whatever is left.
      }
    }
  });
}

/** Last-chance cleanup when the process exits without a teardown: only synchronous calls work here. */
function teardownSync(state: TestbedState): void {
  const ip = findExecutable("ip");
  for (const child of state.sshds) if (child.pid !== undefined) signalProcess(child.pid, "SIGKILL");
  if (ip) {
    for (const namespace of state.namespaces) {
      const pids = runCommandSync(ip, ["netns", "pids", namespace]).stdout.split(/\s+/).filter(Boolean);
      for (const pid of pids) signalProcess(Number(pid), "SIGKILL");
      runCommandSync(ip, ["netns", "delete", namespace]);
    }
    for (const link of state.links) runCommandSync(ip, ["link", "delete", link]);
  }
  rmSync(state.directory, { recursive: true, force: true });
  liveTestbeds.delete(state);
}

async function logTail(path: string): Promise<string> {
  try {
    const text = await readFile(path, "utf8");
    return text.slice(-2_000).trim() || "(empty log)";
  } catch {
    return "(no log)";
  }
}

/** Resolves once something on host:port answers with an SSH banner; polls until the signal fires. */
async function waitForSshBanner(
  host: string,
  port: number,
  signal: AbortSignal,
  exited: () => boolean,
): Promise<void> {
  for (;;) {
    throwIfAborted(signal, `waiting for sshd on ${host}:${port}`);
    if (exited()) throw new Error(`sshd for ${host}:${port} exited before accepting connections`);
    if (await sshBannerSeen(host, port)) return;
    await sleep(50, signal);
  }
}

function sshBannerSeen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let received = "";
    const finish = (seen: boolean): void => {
      socket.destroy();
      resolve(seen);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.once("error", () => finish(false));
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
      if (received.startsWith("SSH-")) finish(true);
      else if (received.length >= 4) finish(false);
    });
    socket.once("end", () => finish(false));
  });
}

function sshdConfig(options: {
  address: string;
  hostKey: string;
  authorizedKeys: string;
  pidFile: string;
  environment: Readonly<Record<string, string>>;
}): string {
  // sshd takes the first SetEnv line only: every variable goes on that one.
  const variables = Object.entries(options.environment).map(([name, value]) => `${name}="${value}"`);
  const setEnv = variables.length > 0 ? [`SetEnv ${variables.join(" ")}`] : [];
  return [
    "# Skyward test bed host: root login by key only, on the namespace's own address.",
    `ListenAddress ${options.address}:${SSH_PORT}`,
    `HostKey ${options.hostKey}`,
    `PidFile ${options.pidFile}`,
    `AuthorizedKeysFile ${options.authorizedKeys}`,
    // The test bed's files live under /tmp, which StrictModes would reject as world-writable.
    "StrictModes no",
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "UseDNS no",
    "PrintMotd no",
    "AllowTcpForwarding yes",
    "MaxSessions 64",
    "MaxStartups 64:30:128",
    "Subsystem sftp internal-sftp",
    ...setEnv,
    "",
  ].join("\n");
}

async function fingerprintOf(sshKeygen: string, publicKeyPath: string, signal: AbortSignal): Promise<string> {
  const result = await runChecked(sshKeygen, ["-l", "-E", "sha256", "-f", publicKeyPath], { signal });
  const fingerprint = result.stdout.trim().split(/\s+/)[1];
  if (!fingerprint?.startsWith("SHA256:")) {
    throw new Error(`unexpected ssh-keygen -l output for ${publicKeyPath}: ${result.stdout.trim()}`);
  }
  return fingerprint;
}

/**
 * One test-bed host as an entry of `SSH({ hosts })`: its address, port, user, key, host-key
 * fingerprint and its own Skyward root directory. Spread it to add fields (`privateIp`, …).
 *
 * @example
 * ```ts
 * import { SSH } from "@skyward/provider-ssh";
 * import { createTestbed, testbedSshHost } from "@skyward/testing";
 *
 * await using bed = await createTestbed({ hosts: 1 });
 * SSH({ hosts: [{ ...testbedSshHost(bed.hosts[0]!), privateIp: "10.0.0.5" }] });
 * ```
 */
export function testbedSshHost(host: TestbedHost, options: TestbedSshHostOptions = {}): TestbedSshHostInput {
  return {
    host: host.host,
    port: host.port,
    user: host.user,
    ...(options.keyFile === true ? { identityFile: host.identityFile } : { privateKey: host.privateKey }),
    ...(options.pinHostKey === false ? {} : { hostKeyFingerprint: host.hostKeyFingerprint }),
    root: host.root,
  };
}

/**
 * A test bed's hosts (all, or those at `options.indices`) as the `hosts` of `SSH`, one node
 * each; see {@link testbedSshHost}. Throws a `RangeError` for an index the test bed has no host at.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 * import { SSH } from "@skyward/provider-ssh";
 * import { createTestbed, testbedSshHosts } from "@skyward/testing";
 *
 * await using bed = await createTestbed({ hosts: 2 });
 * await using pool = await sky.compute({ provider: SSH({ hosts: testbedSshHosts(bed) }), nodes: 2 });
 * ```
 */
export function testbedSshHosts(
  testbed: Pick<Testbed, "hosts">,
  options: TestbedSshHostsOptions = {},
): TestbedSshHostInput[] {
  const { indices, ...hostOptions } = options;
  const hosts =
    indices === undefined
      ? testbed.hosts
      : indices.map((index) => {
          const host = testbed.hosts[index];
          if (host === undefined) {
            throw new RangeError(
              `indices: the test bed has no host ${String(index)} (it has ${testbed.hosts.length})`,
            );
          }
          return host;
        });
  return hosts.map((host) => testbedSshHost(host, hostOptions));
}

/**
 * Creates a test bed of `hosts` SSH hosts on this machine and waits until every sshd accepts
 * connections. Needs root, `ip` (iproute2), `/usr/sbin/sshd` and `ssh-keygen`; see
 * {@link checkTestbedPrerequisites}. On any failure everything made so far is removed before the
 * promise rejects.
 *
 * @example
 * ```ts
 * import { createTestbed } from "@skyward/testing";
 *
 * await using bed = await createTestbed({ hosts: 3 });
 * const [head] = bed.hosts;
 * // ssh -i head.identityFile root@head.host
 * ```
 */
export async function createTestbed(options: CreateTestbedOptions): Promise<Testbed> {
  const count = options.hosts;
  if (!Number.isInteger(count) || count < 1 || count > MAX_HOSTS) {
    throw new RangeError(`hosts: expected an integer from 1 to ${MAX_HOSTS}, received ${String(count)}`);
  }
  const signal = combineSignals(options.signal, options.timeoutMs ?? DEFAULT_CREATE_TIMEOUT_MS);
  throwIfAborted(signal, "creating the test bed");
  const ip = requireExecutable("ip", "iproute2");
  const sshKeygen = requireExecutable("ssh-keygen", "openssh-client");
  try {
    accessSync(SSHD_PATH, constants.X_OK);
  } catch {
    throw new Error(`the test bed needs ${SSHD_PATH}; install it (apt-get install openssh-server)`);
  }

  installExitHook();
  // A rehash lock a killed login left would hold every login on the hosts for a minute. Removing
  // it is a courtesy: whatever fails there (a shims path that is not a directory) fails no bed.
  await removeStaleLoginLocks().catch(() => []);
  const { octet, directory } = await claimSubnet(ip, signal);
  const state: TestbedState = { octet, directory, namespaces: [], links: [], sshds: [] };
  liveTestbeds.add(state);
  try {
    return await buildTestbed(state, count, {
      ip,
      sshKeygen,
      signal,
      environment: { ...LOGIN_ENVIRONMENT, ...options.sshdEnvironment?.(directory) },
    });
  } catch (error) {
    await teardownTestbed(state, ip).catch(() => {
      // The creation error is the one to report; whatever is left, cleanupStaleTestbeds() removes.
    });
    throw error;
  }
}

async function buildTestbed(
  state: TestbedState,
  count: number,
  tools: {
    ip: string;
    sshKeygen: string;
    signal: AbortSignal;
    environment: Readonly<Record<string, string>>;
  },
): Promise<Testbed> {
  const { ip, sshKeygen, signal, environment } = tools;
  const { octet, directory } = state;
  const subnet = `${SUBNET_PREFIX}.${octet}.0/24`;
  const bridgeAddress = `${SUBNET_PREFIX}.${octet}.1`;
  const bridge = bridgeName(octet);
  const run = (args: readonly string[]): Promise<CommandResult> => runChecked(ip, args, { signal });

  // sshd refuses to start without its privilege separation directory (normally made by its service).
  await mkdir("/run/sshd", { recursive: true, mode: 0o755 });

  const clientDirectory = join(directory, "client");
  await mkdir(clientDirectory, { mode: 0o700 });
  const identityFile = join(clientDirectory, "id_ed25519");
  await runChecked(
    sshKeygen,
    ["-q", "-t", "ed25519", "-N", "", "-C", "skyward-testbed-client", "-f", identityFile],
    {
      signal,
    },
  );
  const privateKey = await readFile(identityFile, "utf8");

  state.links.push(bridge);
  await run(["link", "add", bridge, "type", "bridge"]);
  await run(["address", "add", `${bridgeAddress}/24`, "dev", bridge]);
  await run(["link", "set", bridge, "up"]);

  const indexes = Array.from({ length: count }, (_, index) => index);
  const hosts = await mapWithLimit(indexes, 8, async (index): Promise<TestbedHost> => {
    const namespace = namespaceName(octet, index);
    const veth = vethName(octet, index);
    const address = `${SUBNET_PREFIX}.${octet}.${index + 2}`;
    state.namespaces.push(namespace);
    await run(["netns", "add", namespace]);
    state.links.push(veth);
    // The peer is born inside the namespace, so no second name is ever visible in the root namespace.
    await run(["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace]);
    await run(["link", "set", veth, "master", bridge, "up"]);
    await run(["-n", namespace, "link", "set", "lo", "up"]);
    await run(["-n", namespace, "address", "add", `${address}/24`, "dev", "eth0"]);
    await run(["-n", namespace, "link", "set", "eth0", "up"]);

    const hostDirectory = join(directory, `host${index}`);
    const root = join(hostDirectory, "root");
    await mkdir(root, { recursive: true, mode: 0o700 });
    const hostKey = join(hostDirectory, "ssh_host_ed25519_key");
    await runChecked(
      sshKeygen,
      ["-q", "-t", "ed25519", "-N", "", "-C", `skyward-testbed-host${index}`, "-f", hostKey],
      {
        signal,
      },
    );
    const authorizedKeys = join(hostDirectory, "authorized_keys");
    await copyFile(`${identityFile}.pub`, authorizedKeys);
    const configPath = join(hostDirectory, "sshd_config");
    const pidFile = join(hostDirectory, "sshd.pid");
    const logPath = join(hostDirectory, "sshd.log");
    await writeFile(configPath, sshdConfig({ address, hostKey, authorizedKeys, pidFile, environment }), {
      mode: 0o600,
    });

    throwIfAborted(signal, "creating the test bed");
    // `ip netns exec` execs sshd in place, so the child's pid is the sshd listener's pid.
    const sshd = spawn(ip, ["netns", "exec", namespace, SSHD_PATH, "-D", "-f", configPath, "-E", logPath], {
      stdio: "ignore",
    });
    state.sshds.push(sshd);
    // A forgotten teardown must not keep the process alive; the exit hook still ends sshd.
    sshd.unref();
    let exited = false;
    sshd.once("exit", () => {
      exited = true;
    });
    sshd.once("error", () => {
      exited = true;
    });
    try {
      await waitForSshBanner(address, SSH_PORT, signal, () => exited);
    } catch (error) {
      throw new Error(
        `${(error as Error).message}\n--- sshd log (${logPath}) ---\n${await logTail(logPath)}`,
        {
          cause: error,
        },
      );
    }
    const hostPublicKey = (await readFile(`${hostKey}.pub`, "utf8"))
      .trim()
      .split(/\s+/)
      .slice(0, 2)
      .join(" ");
    return {
      name: `host${index}`,
      host: address,
      port: SSH_PORT,
      user: "root",
      privateKey,
      identityFile,
      root,
      hostKeyFingerprint: await fingerprintOf(sshKeygen, `${hostKey}.pub`, signal),
      hostPublicKey,
      namespace,
      sshdPid: sshd.pid as number,
    };
  });

  const teardown = (): Promise<void> => teardownTestbed(state, ip);
  return {
    id: String(octet),
    hosts,
    bridgeAddress,
    subnet,
    directory,
    exec(hostIndex, command, execOptions = {}) {
      const host = hosts[hostIndex];
      if (!host) {
        return Promise.reject(
          new RangeError(`hostIndex: expected 0 to ${hosts.length - 1}, received ${String(hostIndex)}`),
        );
      }
      const argv = typeof command === "string" ? ["sh", "-c", command] : [...command];
      return runCommand(ip, ["netns", "exec", host.namespace, ...argv], {
        signal: execOptions.signal,
        timeoutMs: execOptions.timeoutMs ?? 30_000,
      });
    },
    teardown,
    [Symbol.asyncDispose]: teardown,
  };
}

// ---------------------------------------------------------------------------------------------
// Teardown
// ---------------------------------------------------------------------------------------------

function teardownTestbed(state: TestbedState, ip: string): Promise<void> {
  state.teardown ??= runTeardown(state, ip);
  return state.teardown;
}

async function runTeardown(state: TestbedState, ip: string): Promise<void> {
  const errors: unknown[] = [];
  const attempt = async (step: () => Promise<unknown>): Promise<void> => {
    try {
      await step();
    } catch (error) {
      errors.push(error);
    }
  };

  // Every process inside our namespaces (sshd, its sessions, whatever a test started), then ours.
  const pids = new Set<number>();
  for (const child of state.sshds) if (child.pid !== undefined) pids.add(child.pid);
  for (const namespace of state.namespaces) {
    await attempt(async () => {
      for (const pid of await namespacePids(ip, namespace)) pids.add(pid);
    });
  }
  let survivors: number[] = [];
  await attempt(async () => {
    survivors = await terminateProcesses([...pids]);
  });

  const namespaces = new Set(state.namespaces);
  const links = new Set(state.links);
  for (const namespace of namespaces) {
    await attempt(() => runCommand(ip, ["netns", "delete", namespace]));
  }
  // Deleting a namespace deletes its veth pair; the bridge and any half-made veth go here.
  for (const link of links) {
    await attempt(() => runCommand(ip, ["link", "delete", link]));
  }
  await attempt(() => rm(state.directory, { recursive: true, force: true }));

  // Verify rather than trust: report whatever is still there.
  const left: string[] = [];
  await attempt(async () => {
    for (const name of await listNamespaces(ip)) if (namespaces.has(name)) left.push(`namespace ${name}`);
    for (const name of await listLinks(ip)) if (links.has(name)) left.push(`link ${name}`);
  });
  for (const pid of survivors) if (isProcessRunning(pid)) left.push(`process ${pid}`);
  try {
    statSync(state.directory);
    left.push(`directory ${state.directory}`);
  } catch {
    // Gone, as it should be.
  }
  liveTestbeds.delete(state);
  if (left.length > 0) {
    throw new AggregateError(errors, `test bed ${state.octet} teardown left: ${left.join(", ")}`);
  }
}

export type { StaleTestbedCleanup } from "./testbed-maintenance.js";
export {
  checkTestbedPrerequisites,
  cleanupStaleTestbeds,
  findExecutable,
  requireTestbed,
  TESTBED_DIRECTORY_PARENT,
  TESTBED_NAME_PREFIX,
  testbedSkipReason,
};
