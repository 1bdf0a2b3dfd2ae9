import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCommand } from "./process.js";
import {
  cleanupStaleTestbeds,
  createTestbed,
  findExecutable,
  requireTestbed,
  type TestbedHost,
} from "./testbed.js";
import { LOGIN_ENVIRONMENT, removeStaleLoginLocks, STALE_LOGIN_LOCK_MS } from "./testbed-login.js";

const skipReason = await requireTestbed();
const SSH = findExecutable("ssh") ?? "/usr/bin/ssh";
const scratch = mkdtempSync(join(tmpdir(), "skyward-login-locks-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let roots = 0;
/** A pyenv root of its own; with a rehash lock made `ageMs` ago when given. */
function pyenvRoot(ageMs?: number): { root: string; lock: string } {
  const root = join(scratch, `pyenv${roots++}`);
  const lock = join(root, "shims", ".pyenv-shim");
  mkdirSync(join(root, "shims"), { recursive: true });
  if (ageMs !== undefined) {
    writeFileSync(lock, "");
    const when = (Date.now() - ageMs) / 1000;
    utimesSync(lock, when, when);
  }
  return { root, lock };
}

/** A command on a test-bed host through its sshd, as a pool's sessions run (the real OpenSSH client). */
function ssh(host: TestbedHost, command: string) {
  return runCommand(
    SSH,
    [
      ...["-F", "/dev/null", "-i", host.identityFile, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"],
      ...["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-p", String(host.port)],
      `${host.user}@${host.host}`,
      command,
    ],
    { timeoutMs: 90_000 },
  );
}

describe("removeStaleLoginLocks", () => {
  it("removes a rehash lock older than any rehash takes, and leaves one under way", async () => {
    const stale = pyenvRoot(10 * 60_000);
    const young = pyenvRoot(5_000);
    const none = pyenvRoot();
    const notFile = pyenvRoot();
    mkdirSync(notFile.lock);
    const removed = await removeStaleLoginLocks({
      roots: [stale.root, young.root, none.root, notFile.root, join(scratch, "no-such-root")],
    });
    expect(removed).toEqual([stale.lock]);
    expect(existsSync(stale.lock)).toBe(false);
    expect(existsSync(young.lock)).toBe(true);
    expect(existsSync(notFile.lock)).toBe(true);
    // The same young lock, once the clock has gone past a rehash's longest: stale.
    const later = await removeStaleLoginLocks({ roots: [young.root], now: Date.now() + STALE_LOGIN_LOCK_MS });
    expect(later).toEqual([young.lock]);
    expect(existsSync(young.lock)).toBe(false);
  });
});

describe.skipIf(skipReason !== undefined)("test-bed logins", () => {
  it("give every session a short rehash wait, beside (and overridable by) the test bed's own variables", async () => {
    await using plain = await createTestbed({
      hosts: 1,
      sshdEnvironment: () => ({ SKYWARD_LOGIN_MARK: "marked" }),
    });
    const seen = await ssh(
      plain.hosts[0] as TestbedHost,
      'printf "%s %s" "$PYENV_REHASH_TIMEOUT" "$SKYWARD_LOGIN_MARK"',
    );
    expect(seen.exitCode, seen.stderr).toBe(0);
    expect(seen.stdout).toBe(`${LOGIN_ENVIRONMENT.PYENV_REHASH_TIMEOUT} marked`);

    await using overridden = await createTestbed({
      hosts: 1,
      sshdEnvironment: () => ({ PYENV_REHASH_TIMEOUT: "9" }),
    });
    const own = await ssh(overridden.hosts[0] as TestbedHost, 'printf "%s" "$PYENV_REHASH_TIMEOUT"');
    expect(own.exitCode, own.stderr).toBe(0);
    expect(own.stdout).toBe("9");
  });

  it("lose a lock a killed login left: when a test bed is made, and in the sweep of stale test beds", async () => {
    const before = process.env.PYENV_ROOT;
    const stale = pyenvRoot(10 * 60_000);
    process.env.PYENV_ROOT = stale.root;
    try {
      await using bed = await createTestbed({ hosts: 1 });
      expect(bed.hosts).toHaveLength(1);
      expect(existsSync(stale.lock)).toBe(false);

      const again = pyenvRoot(10 * 60_000);
      process.env.PYENV_ROOT = again.root;
      const report = await cleanupStaleTestbeds();
      expect(report.locks).toContain(again.lock);
      expect(existsSync(again.lock)).toBe(false);

      // A pyenv root whose shims path is a file (ENOTDIR): no bed fails over it, the sweep says so.
      const odd = join(scratch, "odd-pyenv");
      mkdirSync(odd);
      writeFileSync(join(odd, "shims"), "");
      process.env.PYENV_ROOT = odd;
      await using second = await createTestbed({ hosts: 1 });
      expect(second.hosts).toHaveLength(1);
      const swept = await cleanupStaleTestbeds();
      expect(swept.failures.some((failure) => failure.startsWith("stale login locks:"))).toBe(true);
    } finally {
      if (before === undefined) delete process.env.PYENV_ROOT;
      else process.env.PYENV_ROOT = before;
    }
  });
});
