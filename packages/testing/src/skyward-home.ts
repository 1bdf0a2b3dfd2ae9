/**
 * A scratch `SKYWARD_HOME` for a test: pools started while it is set keep their state (`known_hosts`,
 * pool records, logs) in a fresh directory instead of the user's `~/.skyward`.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** What {@link useScratchSkywardHome} returns. Dispose it (`await using`) or call {@link ScratchSkywardHome.restore}. */
export interface ScratchSkywardHome extends AsyncDisposable {
  /** The fresh directory `SKYWARD_HOME` now names; a test may keep its own files there too. */
  readonly path: string;
  /**
   * Puts `SKYWARD_HOME` back as it was (unset if it was unset) and removes the directory.
   * Idempotent: later calls return the first call's promise.
   */
  restore(): Promise<void>;
}

/**
 * Points `process.env.SKYWARD_HOME` at a fresh temporary directory named `<prefix>XXXXXX`, until
 * {@link ScratchSkywardHome.restore}.
 *
 * @example
 * ```ts
 * import { type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
 * import { afterAll, beforeAll } from "vitest";
 *
 * let home: ScratchSkywardHome | undefined;
 * beforeAll(async () => {
 *   home = await useScratchSkywardHome("skyward-my-suite-");
 * });
 * afterAll(() => home?.restore());
 * ```
 */
export async function useScratchSkywardHome(prefix = "skyward-home-"): Promise<ScratchSkywardHome> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  const previous = process.env.SKYWARD_HOME;
  process.env.SKYWARD_HOME = path;
  let restored: Promise<void> | undefined;
  const restore = (): Promise<void> => {
    restored ??= (async () => {
      if (previous === undefined) delete process.env.SKYWARD_HOME;
      else process.env.SKYWARD_HOME = previous;
      await rm(path, { recursive: true, force: true });
    })();
    return restored;
  };
  return { path, restore, [Symbol.asyncDispose]: restore };
}
