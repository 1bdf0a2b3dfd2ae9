/**
 * Test-bed hosts handed out as a cloud's machines: a fake provider API (or a whole-pool test's fake)
 * binds a free host to each instance it creates, puts the instance's SSH key on it as the cloud would,
 * and gives the host back — its `authorized_keys` as it was — when the instance is gone.
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { TestbedHost } from "./testbed.js";

/** Hosts of a test bed standing in for a cloud's machines, each bound to at most one owner (an instance). */
export interface TestbedHostPool<Owner> extends AsyncDisposable {
  readonly hosts: readonly TestbedHost[];
  /** How many hosts no owner holds. */
  free(): number;
  /**
   * Binds the next free host in turn to `owner` and returns it — after the host taken last, so a
   * replacement lands on another machine than the one it replaces — or undefined when none is free.
   */
  take(owner: Owner): TestbedHost | undefined;
  /** The host `owner` holds. */
  hostOf(owner: Owner): TestbedHost | undefined;
  /** Authorises `publicKey` on `owner`'s host (besides the test bed's own key), as a cloud does on a new machine. */
  authorize(owner: Owner, publicKey: string): Promise<void>;
  /** Takes the keys `authorize` added off `owner`'s host; the host stays bound. */
  revoke(owner: Owner): Promise<void>;
  /** {@link revoke}, then frees the host. */
  release(owner: Owner): Promise<void>;
  /** Every host freed and its `authorized_keys` as it was (also what disposing does). */
  releaseAll(): Promise<void>;
}

const authorizedKeys = (host: TestbedHost) => join(dirname(host.root), "authorized_keys");

/** A pool of `hosts`, reading each one's `authorized_keys` as it is now (what releasing restores). */
export async function testbedHostPool<Owner>(hosts: readonly TestbedHost[]): Promise<TestbedHostPool<Owner>> {
  const original = new Map<TestbedHost, string>();
  for (const host of hosts) original.set(host, await readFile(authorizedKeys(host), "utf8"));
  const bound = new Map<Owner, TestbedHost>();
  /** Hosts whose `authorized_keys` `authorize` changed: only those are written back. */
  const keyed = new Set<TestbedHost>();
  let next = 0;
  const revokeHost = async (host: TestbedHost) => {
    if (!keyed.delete(host)) return;
    await writeFile(authorizedKeys(host), original.get(host) ?? "");
  };
  const pool: TestbedHostPool<Owner> = {
    hosts,
    free: () => hosts.length - bound.size,
    take(owner) {
      const taken = new Set(bound.values());
      const index = Array.from({ length: hosts.length }, (_, step) => (next + step) % hosts.length).find(
        (candidate) => !taken.has(hosts[candidate] as TestbedHost),
      );
      if (index === undefined) return undefined;
      next = (index + 1) % hosts.length;
      const host = hosts[index] as TestbedHost;
      bound.set(owner, host);
      return host;
    },
    hostOf: (owner) => bound.get(owner),
    async authorize(owner, publicKey) {
      const host = bound.get(owner);
      if (!host) return;
      keyed.add(host);
      await writeFile(authorizedKeys(host), `${original.get(host)}${publicKey}\n`);
    },
    async revoke(owner) {
      const host = bound.get(owner);
      if (host) await revokeHost(host);
    },
    async release(owner) {
      const host = bound.get(owner);
      bound.delete(owner);
      if (host) await revokeHost(host);
    },
    async releaseAll() {
      bound.clear();
      for (const host of [...keyed]) await revokeHost(host);
    },
    [Symbol.asyncDispose]: () => pool.releaseAll(),
  };
  return pool;
}
