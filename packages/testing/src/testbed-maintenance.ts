/** Test beds left by crashed runs, removed; and what this machine needs for a test bed. */
import { accessSync, constants, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { isCi } from "./prerequisites.js";
import { processCommandLine, runCommand, terminateProcesses } from "./process.js";
import { combineSignals, findExecutable, SSHD_PATH, TESTBED_NAME_PREFIX } from "./testbed-common.js";
import { removeStaleLoginLocks } from "./testbed-login.js";
import {
  directoryIsLive,
  listLinks,
  listNamespaces,
  listTestbedDirectories,
  liveOctets,
  nameIsLive,
  namespacePids,
} from "./testbed-machine.js";

/** What {@link cleanupStaleTestbeds} removed. */
export interface StaleTestbedCleanup {
  /** Namespaces deleted. */
  namespaces: string[];
  /** Network interfaces (bridges, veths) deleted in the root namespace. */
  links: string[];
  /** Test-bed directories deleted. */
  directories: string[];
  /** Pids of processes ended (those inside stale namespaces, and stale sshd listeners). */
  processes: number[];
  /** Lock files a killed login left (testbed-login.ts: a pyenv rehash lock), removed. */
  locks: string[];
  /** What could not be removed, and why; the cleanup carries on past each. */
  failures: string[];
}

// ---------------------------------------------------------------------------------------------
// Stale test beds
// ---------------------------------------------------------------------------------------------

/**
 * Removes what earlier, crashed runs left behind: every `skyt-` namespace (and the processes in it)
 * and `skyt-` link whose owning test bed's process is gone, stale sshd listeners, and their
 * `/tmp/skyward-testbed-*` directories; and a lock file a killed login left (testbed-login.ts).
 * Test beds of processes still running — this one's or a parallel run's — are left alone. Safe to
 * call at any time; does nothing in a non-root process (test beds need root). Carries on past
 * failures and lists them in the result.
 */
export async function cleanupStaleTestbeds(
  options: { signal?: AbortSignal } = {},
): Promise<StaleTestbedCleanup> {
  const report: StaleTestbedCleanup = {
    namespaces: [],
    links: [],
    directories: [],
    processes: [],
    locks: [],
    failures: [],
  };
  const ip = findExecutable("ip");
  // Test beds need root, so a non-root process has none to clean (and could not remove root's).
  if (!ip || process.getuid?.() !== 0) return report;
  const signal = combineSignals(options.signal, 60_000);
  const live = liveOctets();
  const attempt = async (what: string, step: () => Promise<void>): Promise<void> => {
    try {
      await step();
    } catch (error) {
      report.failures.push(`${what}: ${(error as Error).message}`);
    }
  };

  for (const namespace of await listNamespaces(ip, signal)) {
    if (!namespace.startsWith(TESTBED_NAME_PREFIX) || nameIsLive(namespace, live)) continue;
    await attempt(`namespace ${namespace}`, async () => {
      const pids = await namespacePids(ip, namespace);
      await terminateProcesses(pids);
      report.processes.push(...pids);
      const result = await runCommand(ip, ["netns", "delete", namespace], { signal });
      // Another process's sweep (a parallel suite's global setup) may have deleted it meanwhile: gone.
      if (result.exitCode !== 0 && !/No such file or directory/i.test(result.stderr))
        throw new Error(`ip netns delete ${namespace} failed: ${result.stderr.trim()}`);
      report.namespaces.push(namespace);
    });
  }
  for (const link of await listLinks(ip, signal)) {
    if (!link.startsWith(TESTBED_NAME_PREFIX) || nameIsLive(link, live)) continue;
    await attempt(`link ${link}`, async () => {
      const result = await runCommand(ip, ["link", "delete", link], { signal });
      // A veth vanishes with its peer's namespace: "cannot find device" means it is gone already.
      if (result.exitCode === 0) report.links.push(link);
      else if (!/Cannot find device/i.test(result.stderr)) throw new Error(result.stderr.trim());
    });
  }
  for (const directory of listTestbedDirectories()) {
    if (directoryIsLive(directory)) continue;
    await attempt(`directory ${directory}`, async () => {
      // A listener whose namespace is already deleted still runs; its pid file and command line say it is ours.
      for (const entry of safeReaddir(directory)) {
        const pid = Number(safeReadFile(join(directory, entry, "sshd.pid")).trim());
        if (!Number.isInteger(pid) || pid <= 0) continue;
        if (processCommandLine(pid)?.includes(directory)) {
          await terminateProcesses([pid]);
          report.processes.push(pid);
        }
      }
      await rm(directory, { recursive: true, force: true });
      report.directories.push(directory);
    });
  }
  await attempt("stale login locks", async () => {
    report.locks.push(...(await removeStaleLoginLocks()));
  });
  return report;
}

export function safeReaddir(directory: string): string[] {
  try {
    return readdirSync(directory);
  } catch {
    return [];
  }
}

export function safeReadFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

// ---------------------------------------------------------------------------------------------
// Prerequisites
// ---------------------------------------------------------------------------------------------

/**
 * What this machine lacks for a test bed, as readable sentences; an empty array when everything is
 * there. Checks: Linux, root, `ip`, `/usr/sbin/sshd`, `ssh-keygen`, and that network namespaces,
 * bridges and veth pairs can really be made (by making and deleting a probe namespace).
 */
export async function checkTestbedPrerequisites(options: { signal?: AbortSignal } = {}): Promise<string[]> {
  if (process.platform !== "linux") return [`Linux is required (this is ${process.platform})`];
  const missing: string[] = [];
  const root = process.getuid?.() === 0;
  if (!root) missing.push("root is required (network namespaces, bridges, sshd on port 22)");
  const ip = findExecutable("ip");
  if (!ip) missing.push("`ip` is not installed (apt-get install iproute2)");
  try {
    accessSync(SSHD_PATH, constants.X_OK);
  } catch {
    missing.push(`${SSHD_PATH} is not installed (apt-get install openssh-server)`);
  }
  if (!findExecutable("ssh-keygen"))
    missing.push("`ssh-keygen` is not installed (apt-get install openssh-client)");
  if (root && ip) {
    const problem = await probeNamespaces(ip, combineSignals(options.signal, 15_000));
    if (problem) missing.push(problem);
  }
  return missing;
}

export async function probeNamespaces(ip: string, signal: AbortSignal): Promise<string | undefined> {
  const namespace = `${TESTBED_NAME_PREFIX}probe-${process.pid}`;
  try {
    const added = await runCommand(ip, ["netns", "add", namespace], { signal });
    if (added.exitCode !== 0) return `network namespaces are not permitted here: ${added.stderr.trim()}`;
    const bridge = await runCommand(ip, ["-n", namespace, "link", "add", "probe-br", "type", "bridge"], {
      signal,
    });
    if (bridge.exitCode !== 0) return `bridges cannot be created here: ${bridge.stderr.trim()}`;
    const veth = await runCommand(
      ip,
      ["-n", namespace, "link", "add", "probe-a", "type", "veth", "peer", "name", "probe-b"],
      {
        signal,
      },
    );
    if (veth.exitCode !== 0) return `veth pairs cannot be created here: ${veth.stderr.trim()}`;
    return undefined;
  } catch (error) {
    return `network namespaces could not be checked: ${(error as Error).message}`;
  } finally {
    await runCommand(ip, ["netns", "delete", namespace]).catch(() => undefined);
  }
}

/**
 * Why test-bed suites cannot run here, or undefined when they can. For
 * `describe.skipIf(reason)`; prefer {@link requireTestbed}, which refuses to skip in CI.
 */
export async function testbedSkipReason(options: { signal?: AbortSignal } = {}): Promise<string | undefined> {
  const missing = await checkTestbedPrerequisites(options);
  return missing.length === 0 ? undefined : `the SSH test bed cannot run here: ${missing.join("; ")}`;
}

/**
 * Like {@link testbedSkipReason}, but under `CI=true` a missing prerequisite throws instead of
 * returning a skip reason: CI must run the test-bed suites, not skip them quietly.
 *
 * @example
 * ```ts
 * import { requireTestbed } from "@skyward/testing";
 * import { describe } from "vitest";
 *
 * const skipReason = await requireTestbed();
 * describe.skipIf(skipReason !== undefined)("over SSH", () => {
 *   // …
 * });
 * ```
 */
export async function requireTestbed(options: { signal?: AbortSignal } = {}): Promise<string | undefined> {
  const reason = await testbedSkipReason(options);
  if (reason !== undefined && isCi()) {
    throw new Error(
      `${reason} (CI is set: test-bed suites must run in CI, so this fails instead of skipping)`,
    );
  }
  return reason;
}
