import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestbedHost } from "./testbed.js";
import { testbedHostPool } from "./testbed-host-pool.js";

// Hosts laid out as the test bed lays them out: each host's `authorized_keys` beside its root.
let directory: string;
let hosts: TestbedHost[];
const keysOf = (host: TestbedHost) => readFile(join(directory, host.name, "authorized_keys"), "utf8");

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "skyward-host-pool-"));
  hosts = [];
  for (const name of ["host0", "host1", "host2"]) {
    await mkdir(join(directory, name, "root"), { recursive: true });
    await writeFile(join(directory, name, "authorized_keys"), `ssh-ed25519 BED ${name}\n`);
    hosts.push({
      name,
      host: `10.0.0.${hosts.length + 2}`,
      root: join(directory, name, "root"),
    } as TestbedHost);
  }
});
afterAll(() => rm(directory, { recursive: true, force: true }));

describe("testbedHostPool", () => {
  it("hands out free hosts in turn, authorises and revokes keys, and gives hosts back as they were", async () => {
    const pool = await testbedHostPool<string>(hosts);
    expect([pool.take("a")?.name, pool.take("b")?.name, pool.free()]).toEqual(["host0", "host1", 1]);
    await pool.authorize("a", "ssh-ed25519 AAAA instance-a");
    expect(await keysOf(hosts[0] as TestbedHost)).toBe(
      "ssh-ed25519 BED host0\nssh-ed25519 AAAA instance-a\n",
    );
    // Released, host0 is free again, but the next take goes on in turn: a replacement lands elsewhere.
    await pool.release("a");
    expect(await keysOf(hosts[0] as TestbedHost)).toBe("ssh-ed25519 BED host0\n");
    expect(pool.hostOf("a")).toBeUndefined();
    expect(pool.take("c")?.name).toBe("host2");
    expect(pool.take("d")?.name).toBe("host0");
    expect(pool.take("e")).toBeUndefined();
    // Revoking keeps the host bound; disposing restores every host's keys.
    await pool.authorize("b", "ssh-ed25519 AAAA instance-b");
    await pool.revoke("b");
    expect([await keysOf(hosts[1] as TestbedHost), pool.hostOf("b")?.name]).toEqual([
      "ssh-ed25519 BED host1\n",
      "host1",
    ]);
    await pool.authorize("c", "ssh-ed25519 AAAA instance-c");
    await pool[Symbol.asyncDispose]();
    expect(await keysOf(hosts[2] as TestbedHost)).toBe("ssh-ed25519 BED host2\n");
    expect(pool.free()).toBe(3);
  });

  it("without hosts, hands out none", async () => {
    const pool = await testbedHostPool<number>([]);
    expect([pool.take(1), pool.free()]).toEqual([undefined, 0]);
  });
});
