/** Reading this machine for the test bed: namespaces, links, networks in use, owners, and claiming a free /24. */
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isProcessRunning, processStartTime, runChecked, runCommand } from "./process.js";

import {
  CLAIM_GRACE_MS,
  DIRECTORY_PREFIX,
  directoryFor,
  type OwnerRecord,
  SUBNET_PREFIX,
  TESTBED_DIRECTORY_PARENT,
  TESTBED_NAME_PREFIX,
  throwIfAborted,
} from "./testbed-common.js";

// ---------------------------------------------------------------------------------------------
// Inspecting the machine
// ---------------------------------------------------------------------------------------------

export function parseNamespaceList(output: string): string[] {
  return output
    .split("\n")
    .map((line) => line.trim().split(/\s+/)[0] ?? "")
    .filter((name) => name !== "");
}

export function parseLinkNames(output: string): string[] {
  const parsed: unknown = JSON.parse(output.trim() === "" ? "[]" : output);
  if (!Array.isArray(parsed)) return [];
  const names: string[] = [];
  for (const entry of parsed as unknown[]) {
    if (
      typeof entry === "object" &&
      entry !== null &&
      "ifname" in entry &&
      typeof entry.ifname === "string"
    ) {
      names.push(entry.ifname);
    }
  }
  return names;
}

export async function listNamespaces(ip: string, signal?: AbortSignal): Promise<string[]> {
  const result = await runChecked(ip, ["netns", "list"], { signal });
  return parseNamespaceList(result.stdout);
}

export async function listLinks(ip: string, signal?: AbortSignal): Promise<string[]> {
  const result = await runChecked(ip, ["-j", "link", "show"], { signal });
  return parseLinkNames(result.stdout);
}

export function ipv4ToNumber(address: string): number {
  const parts = address.split(".").map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
}

export function cidrOverlaps(a: string, aPrefix: number, b: string, bPrefix: number): boolean {
  const prefix = Math.min(aPrefix, bPrefix);
  if (prefix === 0) return true;
  const mask = (0xffffffff << (32 - prefix)) >>> 0;
  return (ipv4ToNumber(a) & mask) >>> 0 === (ipv4ToNumber(b) & mask) >>> 0;
}

/** Every IPv4 network this machine's root namespace has an address in or a (non-default) route to. */
export async function usedIpv4Networks(ip: string, signal: AbortSignal): Promise<Array<[string, number]>> {
  const networks: Array<[string, number]> = [];
  const addresses: unknown = JSON.parse(
    (await runChecked(ip, ["-j", "-4", "addr", "show"], { signal })).stdout,
  );
  if (Array.isArray(addresses)) {
    for (const link of addresses as unknown[]) {
      if (typeof link !== "object" || link === null || !("addr_info" in link)) continue;
      const infos: unknown = link.addr_info;
      if (!Array.isArray(infos)) continue;
      for (const info of infos as unknown[]) {
        if (typeof info !== "object" || info === null) continue;
        if ("local" in info && typeof info.local === "string" && "prefixlen" in info) {
          networks.push([info.local, typeof info.prefixlen === "number" ? info.prefixlen : 32]);
        }
      }
    }
  }
  const routes: unknown = JSON.parse(
    (await runChecked(ip, ["-j", "-4", "route", "show"], { signal })).stdout,
  );
  if (Array.isArray(routes)) {
    for (const route of routes as unknown[]) {
      if (typeof route !== "object" || route === null || !("dst" in route) || typeof route.dst !== "string") {
        continue;
      }
      if (route.dst === "default") continue;
      const [network, prefix] = route.dst.split("/");
      if (network) networks.push([network, prefix === undefined ? 32 : Number(prefix)]);
    }
  }
  return networks;
}

// ---------------------------------------------------------------------------------------------
// Ownership: which test bed (and which process) a resource belongs to
// ---------------------------------------------------------------------------------------------

export function readOwner(directory: string): OwnerRecord | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(directory, "owner.json"), "utf8"));
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      "pid" in parsed &&
      typeof parsed.pid === "number" &&
      "startTime" in parsed &&
      typeof parsed.startTime === "string"
    ) {
      const createdAt = "createdAt" in parsed && typeof parsed.createdAt === "string" ? parsed.createdAt : "";
      return { pid: parsed.pid, startTime: parsed.startTime, createdAt };
    }
  } catch {
    // Missing or unreadable: the caller decides by the directory's age.
  }
  return undefined;
}

/** Whether the test-bed directory belongs to a process that is still running (or is being created). */
export function directoryIsLive(directory: string): boolean {
  const owner = readOwner(directory);
  if (owner) return processStartTime(owner.pid) === owner.startTime;
  try {
    return Date.now() - statSync(directory).mtimeMs < CLAIM_GRACE_MS;
  } catch {
    return false;
  }
}

export function listTestbedDirectories(): string[] {
  let entries: string[];
  try {
    entries = readdirSync(TESTBED_DIRECTORY_PARENT);
  } catch {
    return [];
  }
  return entries
    .filter((entry) => entry.startsWith(DIRECTORY_PREFIX))
    .map((entry) => join(TESTBED_DIRECTORY_PARENT, entry));
}

/** Octets of the test beds whose owner is alive, from their directories. */
export function liveOctets(): Set<number> {
  const live = new Set<number>();
  for (const directory of listTestbedDirectories()) {
    const match = /^skyward-testbed-(\d+)$/.exec(directory.slice(TESTBED_DIRECTORY_PARENT.length + 1));
    if (match && directoryIsLive(directory)) live.add(Number(match[1]));
  }
  return live;
}

/** Whether a `skyt-` resource name belongs to a live owner (a live test bed or a running probe). */
export function nameIsLive(name: string, live: Set<number>): boolean {
  const probe = /^skyt-probe-(\d+)$/.exec(name);
  if (probe) return isProcessRunning(Number(probe[1]));
  const testbed = /^skyt-(\d+)-/.exec(name);
  return testbed !== null && live.has(Number(testbed[1]));
}

// ---------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------

/**
 * Claims a free /24 for a new test bed: creates its directory (the atomic claim), records this
 * process as its owner, and gives the claim back when the subnet or its names are in use.
 */
export async function claimSubnet(
  ip: string,
  signal: AbortSignal,
): Promise<{ octet: number; directory: string }> {
  const candidates = 254;
  const start = Math.floor(Math.random() * candidates);
  const startTime = processStartTime(process.pid) ?? "";
  for (let step = 0; step < candidates; step++) {
    throwIfAborted(signal, "claiming a test-bed subnet");
    const octet = 1 + ((start + step) % candidates);
    const directory = directoryFor(octet);
    try {
      mkdirSync(directory, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw error;
    }
    let taken = true;
    try {
      const owner: OwnerRecord = { pid: process.pid, startTime, createdAt: new Date().toISOString() };
      writeFileSync(join(directory, "owner.json"), `${JSON.stringify(owner)}\n`, { mode: 0o600 });
      const prefix = `${TESTBED_NAME_PREFIX}${octet}-`;
      const [namespaces, links, networks] = await Promise.all([
        listNamespaces(ip, signal),
        listLinks(ip, signal),
        usedIpv4Networks(ip, signal),
      ]);
      taken =
        namespaces.some((name) => name.startsWith(prefix)) ||
        links.some((name) => name.startsWith(prefix)) ||
        networks.some(([network, length]) =>
          cidrOverlaps(network, length, `${SUBNET_PREFIX}.${octet}.0`, 24),
        );
    } finally {
      if (taken) rmSync(directory, { recursive: true, force: true });
    }
    if (!taken) return { octet, directory };
  }
  throw new Error(`no free subnet in ${SUBNET_PREFIX}.0.0/16 for a test bed: run cleanupStaleTestbeds()`);
}

/** The pids of the processes inside `namespace`. */
export async function namespacePids(ip: string, namespace: string): Promise<number[]> {
  const result = await runCommand(ip, ["netns", "pids", namespace]);
  if (result.exitCode !== 0) return [];
  return result.stdout
    .split(/\s+/)
    .filter((token) => token !== "")
    .map(Number);
}
