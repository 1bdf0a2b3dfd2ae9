/**
 * The Slurm test bed: a real Slurm cluster in the test bed's network namespaces. Host 0 is the login
 * node (`slurmctld` and `sshd`, the only host a client reaches); the others are compute nodes running
 * `slurmd` and no sshd. One `munged` with the test bed's own key serves every host through its socket
 * (the namespaces share this machine's filesystem, as a cluster shares its home). GPUs are declared as
 * GRES backed by device files, and a second partition is preemptible (`PreemptMode=REQUEUE`), so jobs
 * really queue, run, time out, get cancelled and get preempted by Slurm itself.
 *
 * Each compute node also has a directory of its own (a tmpfs mounted in its namespace, as a node's
 * local disk), and the login sessions' `MODULEPATH` names a directory of environment module files
 * (Lmod's `module load` finds them; steps inherit the variable).
 *
 * Nothing of Slurm is installed by hand here: `scripts/toolchain.sh` installs `slurm-wlm`, `munge`
 * and `lmod`.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { requirePrerequisite } from "./prerequisites.js";
import { type CommandResult, runCommand, signalProcess } from "./process.js";
import {
  checkTestbedPrerequisites,
  createTestbed,
  findExecutable,
  type Testbed,
  type TestbedExecOptions,
  type TestbedHost,
} from "./testbed.js";

/** The Slurm daemons the test bed runs, and the Debian package each comes from. */
const SLURM_PROGRAMS = Object.freeze([
  ["slurmctld", "slurm-wlm"],
  ["slurmd", "slurm-wlm"],
  ["sbatch", "slurm-wlm"],
  ["munged", "munge"],
] as const);

/** The partition every node is in, where jobs go by default. */
export const SLURM_TESTBED_PARTITION = "main";
/** A partition of the same nodes at a lower priority tier: its jobs are requeued when `main` needs the nodes. */
export const SLURM_TESTBED_PREEMPTIBLE_PARTITION = "preemptible";

/** One compute node of a Slurm test bed. */
export interface SlurmComputeNode {
  /** Its Slurm node name (`node1`, `node2`, …). */
  readonly name: string;
  /** Its address on the test bed's network (Slurm's `NodeAddr`), reachable from the login node. */
  readonly address: string;
  /** The network namespace it lives in. */
  readonly namespace: string;
}

/** A running Slurm test bed. Dispose it (`await using`) or call {@link SlurmTestbed.teardown}. */
export interface SlurmTestbed extends AsyncDisposable {
  /** The test bed underneath (host 0 is the login node). */
  readonly testbed: Testbed;
  /** The login node: `slurmctld` and `sshd`, what a client connects to. Its SSH sessions have `SLURM_CONF` set. */
  readonly login: TestbedHost;
  /**
   * How a client logs in to the login node, as `Slurm({ login })` of `@skyward/provider-slurm` takes
   * it: address, port, user, the key's file and the pinned host key.
   */
  readonly loginSettings: SlurmTestbedLogin;
  /** A directory every node sees (this machine's filesystem): `Slurm({ sharedDirectory })`. */
  readonly sharedDirectory: string;
  /**
   * A directory each compute node sees as its own (a tmpfs mounted in its namespace; what one node
   * writes there the others and the login node do not see): `Slurm({ nodeLocalDirectory })`.
   */
  readonly nodeLocalDirectory: string;
  /**
   * The login sessions' `MODULEPATH` (steps inherit it): an environment module file written here,
   * `<name>/<version>.lua`, is what `module load <name>/<version>` loads on a compute node.
   */
  readonly moduleDirectory: string;
  /** The compute nodes, `node1` … in order. */
  readonly computeNodes: readonly SlurmComputeNode[];
  /** GPUs (GRES `gpu`) each compute node declares. */
  readonly gpusPerNode: number;
  /** CPUs each compute node declares. */
  readonly cpusPerNode: number;
  /** Memory each compute node declares, MB. */
  readonly memoryMb: number;
  /** The cluster's `slurm.conf` (commands find it through `SLURM_CONF`). */
  readonly slurmConf: string;
  /** Where Slurm's files live: config, state, spools, logs. Removed on teardown. */
  readonly directory: string;
  /**
   * Runs a command on the login node with `SLURM_CONF` set (as an SSH session there has it): a string
   * goes through `sh -c`, an array is the program and its arguments.
   */
  exec(command: string | readonly string[], options?: TestbedExecOptions): Promise<CommandResult>;
  /** The last lines of the Slurm daemons' logs, for a failing test's message. */
  logTail(lines?: number): Promise<string>;
  /** Stops every Slurm daemon and job (every process in the namespaces) and removes the test bed. */
  teardown(): Promise<void>;
}

/** The login node's SSH address and credentials, as the Slurm provider's `login` setting. */
export interface SlurmTestbedLogin {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly identityFile: string;
  readonly hostKeyFingerprint: string;
}

/** Options of {@link createSlurmTestbed}. */
export interface CreateSlurmTestbedOptions {
  /** Compute nodes (1–8, default 2). */
  computeNodes?: number;
  /** GPUs (GRES) per compute node (0–8, default 2). */
  gpusPerNode?: number;
  /** CPUs per compute node (default 4; Slurm is told to trust this over the hardware). */
  cpusPerNode?: number;
  /** Memory per compute node, MB (default 4000). */
  memoryMb?: number;
  /** Seconds Slurm waits between SIGTERM and SIGKILL when it ends a job (`KillWait`, default 5). */
  killWaitSeconds?: number;
  /** Aborting stops the creation and removes whatever was made. */
  signal?: AbortSignal;
  /** Deadline for the whole creation, every node idle included (default 90 s). */
  timeoutMs?: number;
}

function slurmConfText(options: {
  directory: string;
  loginAddress: string;
  nodes: readonly SlurmComputeNode[];
  gpus: number;
  cpus: number;
  memoryMb: number;
  killWait: number;
}): string {
  const { directory, nodes, gpus } = options;
  const nodeList = nodes.map((node) => node.name).join(",");
  return [
    "# Written by @skyward/testing's Slurm test bed.",
    "ClusterName=skyward-testbed",
    // slurmctld checks that it runs on one of these hosts: this machine's name, at the login's address.
    `SlurmctldHost=${hostname()}(${options.loginAddress})`,
    "AuthType=auth/munge",
    "CredType=cred/munge",
    `AuthInfo=socket=${directory}/munge/munge.socket`,
    "SlurmUser=root",
    "SlurmdUser=root",
    `StateSaveLocation=${directory}/state`,
    `SlurmdSpoolDir=${directory}/spool/%n`,
    `SlurmctldPidFile=${directory}/slurmctld.pid`,
    `SlurmdPidFile=${directory}/spool/%n/slurmd.pid`,
    `SlurmctldLogFile=${directory}/log/slurmctld.log`,
    `SlurmdLogFile=${directory}/log/slurmd-%n.log`,
    // No systemd and no cgroup hierarchy of our own here: processes are tracked by their parentage.
    "ProctrackType=proctrack/linuxproc",
    "TaskPlugin=task/none",
    "JobAcctGatherType=jobacct_gather/none",
    "AccountingStorageType=accounting_storage/none",
    "SelectType=select/cons_tres",
    "SelectTypeParameters=CR_CPU_Memory",
    ...(gpus > 0 ? ["GresTypes=gpu"] : []),
    "MpiDefault=none",
    // The nodes share this machine's CPUs: trust the declared sizes.
    "SlurmdParameters=config_overrides",
    "ReturnToService=2",
    "PreemptType=preempt/partition_prio",
    "PreemptMode=REQUEUE",
    `KillWait=${options.killWait}`,
    "InactiveLimit=0",
    "MinJobAge=60",
    "SchedulerParameters=bf_interval=1",
    // A job that names no memory gets this much per CPU, not the whole node.
    "DefMemPerCPU=256",
    ...nodes.map(
      (node) =>
        `NodeName=${node.name} NodeAddr=${node.address} CPUs=${options.cpus} RealMemory=${options.memoryMb}${gpus > 0 ? ` Gres=gpu:${gpus}` : ""} State=UNKNOWN`,
    ),
    `PartitionName=${SLURM_TESTBED_PARTITION} Nodes=${nodeList} Default=YES MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF`,
    `PartitionName=${SLURM_TESTBED_PREEMPTIBLE_PARTITION} Nodes=${nodeList} MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE`,
    "",
  ].join("\n");
}

/**
 * Why the Slurm test bed cannot run here (the SSH test bed's prerequisites, then Slurm's and munge's
 * programs), or undefined when it can; under `CI=true` a missing prerequisite throws instead.
 */
export async function requireSlurmTestbed(
  options: { signal?: AbortSignal } = {},
): Promise<string | undefined> {
  const missing = await checkTestbedPrerequisites(options);
  for (const [program, packageName] of SLURM_PROGRAMS) {
    if (!findExecutable(program))
      missing.push(`\`${program}\` is not installed (apt-get install ${packageName})`);
  }
  const reason =
    missing.length === 0 ? undefined : `the Slurm test bed cannot run here: ${missing.join("; ")}`;
  return requirePrerequisite(reason, "the Slurm test bed");
}

/** Lmod's shell setup, which defines `module` in a shell that lacks it. */
const LMOD_INIT = "/usr/share/lmod/lmod/init/bash";

/**
 * Why environment modules cannot be loaded on the Slurm test bed (Lmod is not installed), or
 * undefined when they can; under `CI=true` a missing Lmod throws instead.
 */
export function requireEnvironmentModules(): string | undefined {
  const reason = existsSync(LMOD_INIT)
    ? undefined
    : `Lmod is not installed (${LMOD_INIT} is missing; apt-get install lmod)`;
  return requirePrerequisite(reason, "environment modules (Lmod) on the Slurm test bed");
}

/**
 * Starts a Slurm cluster of one login node and `computeNodes` compute nodes on this machine and waits
 * until every node is idle. Needs root and what {@link requireSlurmTestbed} checks. On failure
 * everything made so far is removed before the promise rejects, with the daemons' log tails.
 *
 * @example
 * ```ts
 * import { createSlurmTestbed } from "@skyward/testing";
 *
 * await using slurm = await createSlurmTestbed({ computeNodes: 2 });
 * const submitted = await slurm.exec(["sbatch", "--parsable", "--wrap", "hostname"]);
 * ```
 */
export async function createSlurmTestbed(options: CreateSlurmTestbedOptions = {}): Promise<SlurmTestbed> {
  const computeCount = options.computeNodes ?? 2;
  if (!Number.isInteger(computeCount) || computeCount < 1 || computeCount > 8)
    throw new RangeError(`computeNodes: expected an integer from 1 to 8, received ${String(computeCount)}`);
  const gpus = options.gpusPerNode ?? 2;
  if (!Number.isInteger(gpus) || gpus < 0 || gpus > 8)
    throw new RangeError(`gpusPerNode: expected an integer from 0 to 8, received ${String(gpus)}`);
  const cpus = options.cpusPerNode ?? 4;
  const memoryMb = options.memoryMb ?? 4000;
  const timeoutMs = options.timeoutMs ?? 90_000;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const programs = Object.fromEntries(
    SLURM_PROGRAMS.map(([program, packageName]) => {
      const found = findExecutable(program);
      if (!found)
        throw new Error(
          `the Slurm test bed needs \`${program}\`; install it (apt-get install ${packageName})`,
        );
      return [program, found];
    }),
  ) as Record<(typeof SLURM_PROGRAMS)[number][0], string>;
  const ip = findExecutable("ip") ?? "ip";
  const slurmConfOf = (directory: string) => join(directory, "slurm", "slurm.conf");
  const moduleDirectoryOf = (directory: string) => join(directory, "slurm", "modulefiles");

  const testbed = await createTestbed({
    hosts: computeCount + 1,
    signal,
    timeoutMs,
    sshdEnvironment: (directory) => ({
      SLURM_CONF: slurmConfOf(directory),
      MODULEPATH: moduleDirectoryOf(directory),
    }),
  });
  const directory = join(testbed.directory, "slurm");
  const nodeLocalDirectory = join(directory, "node-local");
  const moduleDirectory = moduleDirectoryOf(testbed.directory);
  const slurmConf = slurmConfOf(testbed.directory);
  const environment = { ...process.env, SLURM_CONF: slurmConf };
  const [login, ...computeHosts] = testbed.hosts as [TestbedHost, ...TestbedHost[]];
  const computeNodes = computeHosts.map(
    (host, index): SlurmComputeNode =>
      Object.freeze({ name: `node${index + 1}`, address: host.host, namespace: host.namespace }),
  );
  const exec: SlurmTestbed["exec"] = (command, execOptions) =>
    testbed.exec(
      0,
      typeof command === "string"
        ? ["env", "-C", directory, `SLURM_CONF=${slurmConf}`, "sh", "-c", command]
        : ["env", "-C", directory, `SLURM_CONF=${slurmConf}`, ...command],
      execOptions,
    );
  const logTail = async (lines = 15): Promise<string> => {
    const names = ["slurmctld.log", ...computeNodes.map((node) => `slurmd-${node.name}.log`), "munged.log"];
    const parts = await Promise.all(
      names.map(async (name) => {
        const text = await readFile(join(directory, "log", name), "utf8").catch(() => "(no log)");
        return `--- ${name} ---\n${text.trimEnd().split("\n").slice(-lines).join("\n")}`;
      }),
    );
    return parts.join("\n");
  };
  const daemon = (namespace: string, argv: readonly string[]) => {
    // `ip netns exec` execs in place: the namespace's process list holds the daemon, and the test
    // bed's teardown ends every process there.
    const child = spawn(ip, ["netns", "exec", namespace, ...argv], { stdio: "ignore", env: environment });
    child.unref();
    child.on("error", () => undefined);
  };

  try {
    // Compute nodes run no sshd: the client reaches the cluster through the login node only.
    for (const host of computeHosts) signalProcess(host.sshdPid, "SIGTERM");
    for (const sub of [
      "munge",
      "state",
      "log",
      "dev",
      "node-local",
      "modulefiles",
      ...computeNodes.map((node) => `spool/${node.name}`),
    ])
      await mkdir(join(directory, sub), { recursive: true, mode: 0o700 });
    // munged refuses a key or socket directory that others can write to.
    const key = join(directory, "munge", "munge.key");
    await writeFile(key, randomBytes(1024), { mode: 0o400 });
    await chmod(join(directory, "munge"), 0o700);
    const devices = Array.from({ length: gpus }, (_, index) => join(directory, "dev", `nvidia${index}`));
    // Character devices with NVIDIA's major number: Slurm checks that a GRES file is a device, and
    // nothing ever opens them.
    for (const [index, device] of devices.entries()) {
      const made = await runCommand("mknod", [device, "c", "195", String(index)], { signal });
      if (made.exitCode !== 0) throw new Error(`mknod ${device} failed: ${made.stderr.trim()}`);
    }
    await writeFile(
      slurmConf,
      slurmConfText({
        directory,
        loginAddress: login.host,
        nodes: computeNodes,
        gpus,
        cpus,
        memoryMb,
        killWait: options.killWaitSeconds ?? 5,
      }),
    );
    // GPUs as device files, so Slurm sets CUDA_VISIBLE_DEVICES for a step that asks for them.
    await writeFile(
      join(directory, "gres.conf"),
      gpus > 0
        ? computeNodes.map((node) => `NodeName=${node.name} Name=gpu File=${devices.join(",")}`).join("\n") +
            "\n"
        : "",
    );
    // Slurm 22.05's slurmd loads a cgroup plugin even when nothing uses it; v1 over an empty tmpfs
    // satisfies it without touching this machine's cgroups (the mount is private to the namespace's
    // `ip netns exec` mount namespace).
    await writeFile(join(directory, "cgroup.conf"), "CgroupPlugin=cgroup/v1\n");

    daemon(login.namespace, [
      programs.munged,
      "--foreground",
      "--force",
      `--socket=${directory}/munge/munge.socket`,
      `--key-file=${key}`,
      `--pid-file=${directory}/munge/munged.pid`,
      `--log-file=${directory}/log/munged.log`,
      `--seed-file=${directory}/munge/munge.seed`,
    ]);
    await waitFor(
      async () => (await readFile(join(directory, "munge", "munged.pid"), "utf8").catch(() => "")) !== "",
      signal,
      "munged to start",
    );
    daemon(login.namespace, [programs.slurmctld, "-D"]);
    await waitFor(
      async () => (await exec(["scontrol", "ping"])).stdout.includes("UP"),
      signal,
      "slurmctld to answer",
    );
    for (const node of computeNodes) {
      daemon(node.namespace, [
        "sh",
        "-c",
        // The node's own directory: a tmpfs in its mount namespace, which its steps inherit.
        `mount -t tmpfs cgroup /sys/fs/cgroup && mount -t tmpfs node-local ${nodeLocalDirectory} && exec ${programs.slurmd} -D -N ${node.name}`,
      ]);
    }
    await waitFor(
      async () => {
        const states = (await exec(["sinfo", "-h", "-N", "-p", SLURM_TESTBED_PARTITION, "-o", "%T"])).stdout
          .trim()
          .split("\n")
          .filter((line) => line !== "");
        return states.length === computeNodes.length && states.every((state) => state === "idle");
      },
      signal,
      "every compute node to be idle",
    );
  } catch (error) {
    const tail = await logTail();
    await testbed.teardown().catch(() => undefined);
    throw new Error(`starting the Slurm test bed failed: ${(error as Error).message}\n${tail}`, {
      cause: error,
    });
  }

  const teardown = () => testbed.teardown();
  return {
    testbed,
    login,
    loginSettings: Object.freeze({
      host: login.host,
      port: login.port,
      user: login.user,
      identityFile: login.identityFile,
      hostKeyFingerprint: login.hostKeyFingerprint,
    }),
    sharedDirectory: join(directory, "shared"),
    nodeLocalDirectory,
    moduleDirectory,
    computeNodes,
    gpusPerNode: gpus,
    cpusPerNode: cpus,
    memoryMb,
    slurmConf,
    directory,
    exec,
    logTail,
    teardown,
    [Symbol.asyncDispose]: teardown,
  };
}

async function waitFor(check: () => Promise<boolean>, signal: AbortSignal, what: string): Promise<void> {
  while (!(await check().catch(() => false))) {
    if (signal.aborted) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
