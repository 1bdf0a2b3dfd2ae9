/**
 * The test-bed hosts' logins run this machine's own shell start-up. Their user is root, with
 * root's home, so every SSH session sources root's `.bashrc` (bash does so when sshd starts it).
 * Where that runs `pyenv init` (as this machine image's does), every login runs `pyenv rehash`,
 * which takes a lock file (`$PYENV_ROOT/shims/.pyenv-shim`) and removes it as it ends. A login
 * killed in between (a test ending a host's sessions with SIGKILL, a run stopped by hand) leaves
 * the lock behind, and from then on every login on every host waits 60 s for it before giving up:
 * whole runs fail on timeouts that have nothing to do with what they test.
 *
 * Two guards, neither of which changes what a login runs: the hosts' sessions get a short rehash
 * wait ({@link LOGIN_ENVIRONMENT}), and a lock older than any rehash takes is removed
 * ({@link removeStaleLoginLocks}) when a test bed is made and when stale test beds are swept.
 */
import { lstat, unlink } from "node:fs/promises";
import { userInfo } from "node:os";
import { join } from "node:path";

/**
 * Variables every test-bed SSH session gets (sshd's `SetEnv`): `pyenv rehash` waits at most this
 * many seconds for its lock (pyenv's default is 60), so a lock left by a killed login costs the
 * logins after it seconds, not a minute each, until it is removed.
 */
export const LOGIN_ENVIRONMENT: Readonly<Record<string, string>> = { PYENV_REHASH_TIMEOUT: "3" };

/** A rehash lock older than this is stale: a rehash holds it for well under a second. */
export const STALE_LOGIN_LOCK_MS = 120_000;

/** Options of {@link removeStaleLoginLocks}. */
export interface StaleLoginLockOptions {
  /**
   * The pyenv roots to look in (default: `$PYENV_ROOT` if set, and `.pyenv` in the home directory
   * the password database gives this user, which is the one sshd gives its sessions).
   */
  roots?: readonly string[];
  /** The clock, ms since the epoch (default `Date.now()`). */
  now?: number;
}

/**
 * Removes the pyenv rehash locks older than {@link STALE_LOGIN_LOCK_MS}: those a killed login
 * left. A younger one (a rehash under way) is left alone; while a stale one exists no rehash can
 * take the lock, so removing it takes nothing from a running one. Resolves to the paths removed;
 * a root without pyenv, or a lock that went meanwhile, is passed over.
 */
export async function removeStaleLoginLocks(options: StaleLoginLockOptions = {}): Promise<string[]> {
  const now = options.now ?? Date.now();
  const removed: string[] = [];
  for (const root of options.roots ?? defaultPyenvRoots()) {
    const lock = join(root, "shims", ".pyenv-shim");
    try {
      const stat = await lstat(lock);
      if (!stat.isFile() || now - stat.mtimeMs < STALE_LOGIN_LOCK_MS) continue;
      await unlink(lock);
      removed.push(lock);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  return removed;
}

function defaultPyenvRoots(): string[] {
  const roots = new Set<string>();
  const fromEnvironment = process.env.PYENV_ROOT;
  if (fromEnvironment) roots.add(fromEnvironment);
  try {
    roots.add(join(userInfo().homedir, ".pyenv"));
  } catch {
    // No password entry for this user: only $PYENV_ROOT is known.
  }
  return [...roots];
}
