/** What the test bed's parts share: its names and constants, and small helpers (signals, executables, a bounded map). */
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";

/** The prefix of every namespace and network interface a test bed creates. */
export const TESTBED_NAME_PREFIX = "skyt-";

/** Test-bed directories are `<this>/skyward-testbed-<id>`; fixed, because namespaces are machine-wide. */
export const TESTBED_DIRECTORY_PARENT = "/tmp";

export const DIRECTORY_PREFIX = "skyward-testbed-";
export const SUBNET_PREFIX = "10.213";
export const SSHD_PATH = "/usr/sbin/sshd";
export const SSH_PORT = 22;
export const MAX_HOSTS = 200;
export const DEFAULT_CREATE_TIMEOUT_MS = 60_000;
/** A directory without owner.json younger than this is a test bed being created, not a stale one. */
export const CLAIM_GRACE_MS = 60_000;

export interface OwnerRecord {
  pid: number;
  startTime: string;
  createdAt: string;
}

export function namespaceName(octet: number, index: number): string {
  return `${TESTBED_NAME_PREFIX}${octet}-host${index}`;
}

export function vethName(octet: number, index: number): string {
  return `${TESTBED_NAME_PREFIX}${octet}-v${index}`;
}

export function bridgeName(octet: number): string {
  return `${TESTBED_NAME_PREFIX}${octet}-br`;
}

export function directoryFor(octet: number): string {
  return join(TESTBED_DIRECTORY_PARENT, `${DIRECTORY_PREFIX}${octet}`);
}

/** Finds an executable on PATH or in the usual system directories (sbin is often off a user's PATH). */
export function findExecutable(name: string): string | undefined {
  const directories = [
    ...(process.env.PATH ?? "").split(":").filter((entry) => entry !== ""),
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
  ];
  for (const directory of directories) {
    const candidate = join(directory, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here; try the next directory.
    }
  }
  return undefined;
}

export function requireExecutable(name: string, packageName: string): string {
  const found = findExecutable(name);
  if (!found) throw new Error(`the test bed needs \`${name}\`; install it (apt-get install ${packageName})`);
  return found;
}

export function combineSignals(signal: AbortSignal | undefined, timeoutMs: number): AbortSignal {
  const deadline = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, deadline]) : deadline;
}

export function throwIfAborted(signal: AbortSignal, what: string): void {
  if (!signal.aborted) return;
  const reason: unknown = signal.reason;
  if (reason instanceof DOMException && reason.name === "TimeoutError") {
    throw new Error(`${what} did not finish in time`, { cause: reason });
  }
  throw new Error(`${what} was aborted`, { cause: reason });
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * Runs `fn` over `items` with at most `limit` running at once. After a failure no new item starts,
 * and the call rejects with the first failure only once every running one has settled, so a
 * cleanup that follows never races work still in flight.
 */
export async function mapWithLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  const failures: unknown[] = [];
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length && failures.length === 0) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index);
      } catch (error) {
        failures.push(error);
      }
    }
  });
  await Promise.all(workers);
  if (failures.length > 0) throw failures[0];
  return results;
}
