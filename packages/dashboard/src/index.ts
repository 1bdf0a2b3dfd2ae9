/**
 * `@skyward/dashboard`: a pool's live dashboard in the browser — nodes, metric charts over the whole
 * run, task counts and throughput, cost against the budget, events and the log tail — served from
 * the client process on 127.0.0.1 behind a random token. See the package's README.
 */
import type { AttachedFrom, Pool, SkywardEvent } from "@skyward/core";
import { ConfigurationError } from "@skyward/core";
import { DashboardRecorder } from "./recorder.js";
import { type DashboardServer, startServer } from "./server.js";

export type {
  CostSummary,
  DetachedPoolRow,
  EventsPayload,
  LogEntry,
  MetricsPayload,
  NodeRow,
  PoolPayload,
  RunningTask,
  SampleUpdate,
  SeriesKey,
  SessionsPayload,
  StreamBatch,
  TaskCounters,
} from "./payloads.js";
export type { DashboardServer } from "./server.js";

/** Where {@link serveDashboard} listens. */
export interface DashboardOptions {
  /** The port; default 0, any free one (the URL says which). */
  readonly port?: number;
  /**
   * The address to bind; default `127.0.0.1`. Anything else makes the dashboard reachable from other
   * machines (the token still guards it, over plain HTTP).
   */
  readonly host?: string;
}

function listenOptions(options: DashboardOptions): { port: number; host: string } {
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigurationError({
      issues: [
        { path: "dashboard.port", message: `expected a port number 0–65535, received ${String(port)}` },
      ],
    });
  }
  const host = options.host ?? "127.0.0.1";
  if (typeof host !== "string" || host.length === 0) {
    throw new ConfigurationError({
      issues: [{ path: "dashboard.host", message: `expected an address to bind, received ${String(host)}` }],
    });
  }
  return { port, host };
}

/** Starts the server, refusing a port or host it cannot listen on with an error naming the field. */
async function listen(
  currentPool: () => Pool | undefined,
  recorder: DashboardRecorder,
  options: DashboardOptions,
): Promise<DashboardServer> {
  const where = listenOptions(options);
  try {
    return await startServer(currentPool, recorder, where);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const field = code === "EADDRINUSE" || code === "EACCES" ? "dashboard.port" : "dashboard.host";
    throw new ConfigurationError({
      issues: [
        { path: field, message: `cannot listen on ${where.host}:${where.port}: ${(error as Error).message}` },
      ],
      cause: error,
    });
  }
}

/** A dashboard that records a pool's events from before the pool exists. */
export interface DashboardRecording {
  /** Takes one of the pool's events (give it every one, from `compute`'s `onEvent`). */
  record(event: SkywardEvent): void;
  /** Starts serving (what was recorded so far, then the pool once attached). */
  listen(options?: DashboardOptions): Promise<DashboardServer>;
  /**
   * The pool, once it exists: its nodes, cost and write actions; the server stops when it is
   * destroyed. `attachedFrom`: where `sky.attach` picked it up, shown among its sessions.
   */
  attach(pool: Pool, attachedFrom?: AttachedFrom): void;
}

/**
 * Records a pool's events from before it exists: what `options.dashboard` on `compute` uses, so the
 * page (and the link on the console) is there during provisioning and bootstrap too.
 */
export function recordDashboard(): DashboardRecording {
  const recorder = new DashboardRecorder();
  let pool: Pool | undefined;
  const servers: DashboardServer[] = [];
  return {
    record: (event) => recorder.record(event),
    async listen(options = {}) {
      const server = await listen(() => pool, recorder, options);
      servers.push(server);
      return server;
    },
    attach(attached, attachedFrom) {
      pool = attached;
      recorder.sessions.attachedFrom(attachedFrom);
      closeWithPool(attached, servers);
    },
  };
}

function closeWithPool(pool: Pool, servers: readonly DashboardServer[]): void {
  const stop = pool.on("pool.destroyed", () => {
    stop();
    for (const server of servers) void server.close();
  });
}

/**
 * Serves a live dashboard of `pool` from this process and returns its URL (with its token) and a way
 * to stop it; it stops by itself when the pool is destroyed. It records from now on: metrics, tasks
 * and events before this call are not shown (use `options.dashboard` on `compute` for the whole run).
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { serveDashboard } from "@skyward/dashboard";
 *
 * await using pool = await sky.compute({ nodes: 2 });
 * const dashboard = await serveDashboard(pool, { port: 8787 });
 * console.log(`Dashboard: ${dashboard.url}`);
 * ```
 *
 * @throws {ConfigurationError} for a port or host that is not one, naming the field.
 */
export async function serveDashboard(pool: Pool, options: DashboardOptions = {}): Promise<DashboardServer> {
  const recorder = new DashboardRecorder();
  const server = await listen(() => pool, recorder, options);
  closeWithPool(pool, [server]);
  const stop = pool.on("*", (event) => recorder.record(event));
  return {
    url: server.url,
    port: server.port,
    close: () => {
      stop();
      return server.close();
    },
  };
}
