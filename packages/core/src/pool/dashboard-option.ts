/**
 * `options.dashboard`: the `@skyward/dashboard` package, loaded when the option asks for it (core
 * ships no web assets), records the pool's events from the start and serves its page; its link goes
 * to the console and the log file as a `dashboard.ready` event.
 */
import { installHint, resolveFromProject } from "../config/config-file.js";
import { ConfigurationError } from "../errors/errors.js";
import type { SkywardEvent } from "../observe/events.js";
import type { Dashboard } from "../spec/options.js";
import type { Pool } from "./pool.js";
import type { PoolAnnouncement } from "./pool-runtime.js";

const DASHBOARD_PACKAGE = "@skyward/dashboard";

/** What `@skyward/dashboard`'s `recordDashboard()` returns (checked by shape: it is loaded at run time). */
export interface DashboardRecording {
  record(event: SkywardEvent): void;
  listen(options: Dashboard): Promise<{ readonly url: string; close(): Promise<void> }>;
  attach(pool: Pool, attachedFrom?: AttachedFrom): void;
}

/** Where a pool `sky.attach` picked up came from, as its dashboard shows it (no secret: no token). */
export interface AttachedFrom {
  /** The detached pool's id (the attached pool keeps it). */
  readonly poolId: string;
  /** Its state file, `$SKYWARD_HOME/pools/<id>.json`. */
  readonly stateFile: string;
  /** When it was detached, milliseconds since the epoch, and by which process. */
  readonly detachedAt: number;
  readonly detachedBy: number;
  /** When this process attached it, milliseconds since the epoch. */
  readonly attachedAt: number;
}

/** What a pool is opened with so that its dashboard sees it from the first event. */
export interface DashboardWiring {
  readonly onEvent: ((event: SkywardEvent) => void) | undefined;
  readonly announcement?: PoolAnnouncement;
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

/**
 * Opens a pool (`open`, given the wiring to open it with) with its dashboard when `dashboard` asks
 * for one: recording every event from the first, serving before provisioning, its link announced
 * as `dashboard.ready`; the server stops if the pool cannot be opened. `compute` and `attach` both
 * open theirs so; `recording`: one already started (`attach` loads the package before it reaches
 * any worker, so a refusal takes nothing from them).
 */
export async function openWithDashboard<P extends Pool>(
  dashboard: Dashboard | null,
  onEvent: ((event: SkywardEvent) => void) | undefined,
  open: (wiring: DashboardWiring) => Promise<P>,
  session: { readonly recording?: DashboardRecording; readonly attachedFrom?: AttachedFrom } = {},
): Promise<P> {
  if (dashboard === null) return open({ onEvent });
  const recording = session.recording ?? (await startDashboardRecording());
  const server = await recording.listen(dashboard);
  try {
    const pool = await open({
      onEvent: (event) => {
        recording.record(event);
        onEvent?.(event);
      },
      announcement: { type: "dashboard.ready", url: server.url },
    });
    recording.attach(pool, session.attachedFrom);
    return pool;
  } catch (error) {
    await server.close();
    throw error;
  }
}
