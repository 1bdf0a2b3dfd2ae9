/**
 * A vitest global setup module: removes test beds left by earlier, crashed runs before the run and
 * whatever this run's crashed workers left after it. Use it in a vitest config:
 *
 * ```ts
 * import { defineConfig } from "vitest/config";
 *
 * export default defineConfig({ test: { globalSetup: ["@skyward/testing/vitest-global-setup"] } });
 * ```
 */
import { cleanupStaleTestbeds } from "./testbed.js";

async function cleanup(when: string): Promise<void> {
  const report = await cleanupStaleTestbeds();
  if (report.namespaces.length + report.links.length + report.directories.length > 0) {
    console.warn(
      `[@skyward/testing] ${when}: removed stale test beds (${report.namespaces.length} namespaces, ` +
        `${report.links.length} links, ${report.directories.length} directories, ${report.processes.length} processes)`,
    );
  }
  for (const lock of report.locks)
    console.warn(`[@skyward/testing] ${when}: removed ${lock}, a stale lock a killed login left`);
  for (const failure of report.failures)
    console.warn(`[@skyward/testing] ${when}: could not remove ${failure}`);
}

/** Runs before the test run: removes stale test beds (those whose owner process is gone). */
export async function setup(): Promise<void> {
  await cleanup("before the run");
}

/** Runs after the test run: removes test beds whose worker process ended without a teardown. */
export async function teardown(): Promise<void> {
  await cleanup("after the run");
}
