/**
 * `options.dashboard`: the `@skyward/dashboard` package, loaded when the option asks for it (core
 * ships no web assets), records the pool's events from the start and serves its page; its link goes
 * to the console and the log file as a `dashboard.ready` event.
 */
import { installHint, resolveFromProject } from "./config/config-file.js";
import { ConfigurationError } from "./errors/errors.js";
import type { SkywardEvent } from "./observe/events.js";
import type { Pool } from "./pool/pool.js";
import type { Dashboard } from "./spec/options.js";

const DASHBOARD_PACKAGE = "@skyward/dashboard";

/** What `@skyward/dashboard`'s `recordDashboard()` returns (checked by shape: it is loaded at run time). */
export interface DashboardRecording {
  record(event: SkywardEvent): void;
  listen(options: Dashboard): Promise<{ readonly url: string; close(): Promise<void> }>;
  attach(pool: Pool): void;
}

function refuse(message: string, cause?: unknown): never {
  throw new ConfigurationError({ issues: [{ path: "options.dashboard", message }], cause });
}

/**
 * Loads `@skyward/dashboard` (`packageName`: another name, for tests) for the project in `cwd` and
 * starts recording; refuses with the install hint, naming the option, when it is not installed.
 */
export async function startDashboardRecording(
  cwd: string = process.cwd(),
  packageName: string = DASHBOARD_PACKAGE,
): Promise<DashboardRecording> {
  let module: Record<string, unknown>;
  try {
    module = (await import(resolveFromProject(packageName, cwd) ?? packageName)) as Record<string, unknown>;
  } catch (error) {
    refuse(
      `needs the ${packageName} package, which could not be loaded (is it installed? ${installHint(packageName)}): ${(error as Error).message}`,
      error,
    );
  }
  const record = module.recordDashboard;
  if (typeof record !== "function") refuse(`${packageName} does not export recordDashboard()`);
  return record() as DashboardRecording;
}
