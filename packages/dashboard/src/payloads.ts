/**
 * What the dashboard's JSON endpoints and its event stream carry: plain JSON, documented in the
 * package's README so a notebook or another tool can read them. Nothing here holds a secret: event
 * texts and log lines pass the redactor, and errors travel as their message only.
 */
import type { AttachedFrom } from "@skyward/core";

/** A node as the page lists it. */
export interface NodeRow {
  readonly index: number;
  readonly instanceId: string;
  /** `provisioning`, a bootstrap phase's name, `starting`, `ready`, `lost`, `preempted`, `destroyed`. */
  readonly phase: string;
  readonly privateIp: string | null;
  readonly publicIp: string | null;
  /** Spot capacity; null when the dashboard started after the node did (its provisioning was not seen). */
  readonly spot: boolean | null;
  readonly provider: string | null;
  readonly instanceType: string | null;
  readonly accelerator: string | null;
  /** USD per hour (0 for free capacity such as `Local`). */
  readonly hourlyPrice: number | null;
  /** When the pool got the node's instance, ms since the epoch: its uptime's start. */
  readonly since: number | null;
}

/** The pool's task counts since the dashboard started. */
export interface TaskCounters {
  /** Waiting for a slot now. */
  readonly queued: number;
  /** Running now. */
  readonly running: number;
  readonly completed: number;
  readonly failed: number;
  readonly cancelled: number;
}

/** A task running now (the ones the page can cancel). */
export interface RunningTask {
  readonly id: string;
  readonly name: string;
  readonly node: number;
  readonly startedAt: number;
}

/** The pool's spending: now, so far, and when the budget runs out at today's rate. */
export interface CostSummary {
  readonly hourlyRate: number;
  readonly total: number;
  /** `options.budget`, USD, or null for none. */
  readonly budget: { readonly max: number; readonly warnAt: number } | null;
  /** When the total reaches `budget.max` at the current rate, ms since the epoch; null without a budget or a rate. */
  readonly budgetEndsAt: number | null;
}

/** A pool detached in this user's Skyward home (`$SKYWARD_HOME/pools/`), as `skyward pools` lists it. */
export interface DetachedPoolRow {
  readonly id: string;
  readonly provider: string;
  readonly instanceType: string;
  readonly nodes: number;
  /** Its nodes whose worker process still runs (known on `Local` only; 0 elsewhere). */
  readonly alive: number;
  /** Tasks that were on its workers when it was detached. */
  readonly tasks: number;
  /** When it was detached, ms since the epoch. */
  readonly detachedAt: number;
  /** Seconds its workers wait for a client. */
  readonly ttl: number;
  readonly hourlyRate: number | null;
}

/** The pool's attached/detached sessions, as this client knows them. */
export interface SessionsPayload {
  /** Set when `sky.attach` picked this pool up: its state file, when it was detached and attached. */
  readonly attachedFrom: AttachedFrom | null;
  /** When this pool was detached (its state file written since it was opened or attached), ms; null if not. */
  readonly detachedAt: number | null;
  /** The other detached pools, newest first (at most 50). */
  readonly detached: readonly DetachedPoolRow[];
  /** How many other pools are detached in all. */
  readonly detachedCount: number;
  /** Why the state files could not be read, or null. */
  readonly error: string | null;
}

/** `GET /api/pool`: the pool now. */
export interface PoolPayload {
  readonly id: string;
  readonly state: string;
  /** The provider's name, when a node's provisioning was seen. */
  readonly provider: string | null;
  /** When the dashboard started recording, ms since the epoch. */
  readonly startedAt: number;
  readonly now: number;
  readonly nodes: readonly NodeRow[];
  readonly tasks: TaskCounters;
  readonly running: readonly RunningTask[];
  readonly cost: CostSummary;
  readonly sessions: SessionsPayload;
  /** The id of the last stream batch this reflects: open the stream with `?lastEventId=` it. */
  readonly lastId: number;
}

/** What a metric series is: one metric of one node (one GPU's, one worker's). */
export interface SeriesKey {
  /** `node|name|gpu|worker`: stable, unique. */
  readonly key: string;
  readonly node: number;
  readonly name: string;
  readonly unit: string | null;
  readonly gpu: number | null;
  /** The worker, for values a task reported (`skyward.report_metric`). */
  readonly worker: number | null;
}

/** `GET /api/metrics?since=`: each series' points after `since` (ms), downsampled over the run. */
export interface MetricsPayload {
  readonly series: readonly (SeriesKey & {
    readonly points: readonly { readonly t: number; readonly v: number; readonly step?: number }[];
  })[];
  /** Completed tasks so far, over time (throughput is its slope). */
  readonly tasksCompleted: readonly { readonly t: number; readonly v: number }[];
  /** USD spent so far, over time. */
  readonly cost: readonly { readonly t: number; readonly v: number }[];
  readonly lastId: number;
}

/** An event or a log line as the page's log tail and event list show it. */
export interface LogEntry {
  readonly timestamp: number;
  /** The event's type (`node.lost`, `log`, …). */
  readonly type: string;
  /** `TRACE` … `CRITICAL`, as the pool's log file rates it. */
  readonly level: string;
  readonly node: number | null;
  /** What happened, or the line a task printed. */
  readonly text: string;
  /** The task it concerns, when one does. */
  readonly taskId?: string;
}

/** `GET /api/events`: the recent pool and node events, and the log tail. */
export interface EventsPayload {
  /** Pool, node, scaling, budget and error events and failed tasks (the last 500). */
  readonly events: readonly LogEntry[];
  /** Task output and events (the last 2000). */
  readonly logs: readonly LogEntry[];
  readonly lastId: number;
}

/** One metric sample in a stream batch. */
export interface SampleUpdate extends SeriesKey {
  readonly t: number;
  readonly v: number;
  readonly step?: number;
}

/** One message of the event stream (`GET /api/stream`): what changed since the previous one. */
export interface StreamBatch {
  /** Its id (the SSE `id:`), counting up from 1. */
  readonly id: number;
  readonly pool: PoolPayload;
  readonly samples: readonly SampleUpdate[];
  readonly events: readonly LogEntry[];
  readonly logs: readonly LogEntry[];
}
