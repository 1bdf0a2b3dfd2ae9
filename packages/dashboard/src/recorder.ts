/**
 * What the dashboard remembers of a pool, from its events alone: the nodes' phases, task counts,
 * every metric as a downsampled series, the recent events and log lines, and the stream batches a
 * reconnecting page replays. Everything is bounded, whatever the length of the run.
 */
import type { Pool, SkywardEvent } from "@skyward/core";
import { Redactor } from "@skyward/core/contract";
import { eventLogLevel, eventLogRecord } from "@skyward/core/logs";
import type {
  EventsPayload,
  LogEntry,
  MetricsPayload,
  NodeRow,
  PoolPayload,
  RunningTask,
  SampleUpdate,
  SeriesKey,
  StreamBatch,
  TaskCounters,
} from "./payloads.js";
import { DownsampledSeries } from "./series.js";
import { SessionsView } from "./sessions.js";

/** The most entries of each kind kept; older ones are dropped. */
const EVENT_LIMIT = 500;
const LOG_LIMIT = 2000;
/** Stream batches kept for `Last-Event-ID` replay (two minutes at one batch a second). */
const BATCH_LIMIT = 120;

/** Events the page's event list shows (the rest only reach the log tail). */
const NOTABLE_TYPES = new Set([
  "pool.ready",
  "pool.destroyed",
  "scaling",
  "budget.warning",
  "budget.exceeded",
  "error",
]);

/** Events the page does not list (see `#recordEntry`). */
const UNLISTED_TYPES = new Set(["task.queued", "task.started", "task.completed", "dashboard.ready"]);

interface NodeSeen {
  phase: string;
  spot: boolean | null;
  provider: string | null;
  instanceType: string | null;
  accelerator: string | null;
  publicIp: string | null;
  privateIp: string | null;
}

function pushBounded<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit) list.splice(0, list.length - limit);
}

/** The phase a node event puts its node in, or undefined for an event that changes none. */
function phaseAfter(event: SkywardEvent): string | undefined {
  switch (event.type) {
    case "node.provisioned":
      return "provisioning";
    case "bootstrap.phase":
      return event.status === "failed" ? `${event.phase} failed` : event.phase;
    case "node.bootstrapped":
      return "starting";
    case "node.ready":
      return "ready";
    case "node.lost":
      return "lost";
    case "node.preempted":
      return "preempted";
    case "node.replaced":
      return "replacing";
    case "node.destroyed":
      return "destroyed";
    default:
      return undefined;
  }
}

/** Records a pool's events for the dashboard; {@link DashboardRecorder.flush} makes a stream batch. */
export class DashboardRecorder {
  readonly startedAt = Date.now();
  /** The pool's attached/detached sessions (read from the Skyward home by the server). */
  readonly sessions = new SessionsView();
  readonly #redactor = new Redactor();
  readonly #nodes = new Map<number, NodeSeen>();
  readonly #series = new Map<string, { key: SeriesKey; series: DownsampledSeries }>();
  readonly #running = new Map<string, RunningTask>();
  readonly #counts = { queued: 0, completed: 0, failed: 0, cancelled: 0 };
  readonly #tasksCompleted = new DownsampledSeries();
  readonly #cost = new DownsampledSeries();
  readonly #events: LogEntry[] = [];
  readonly #logs: LogEntry[] = [];
  readonly #batches: StreamBatch[] = [];
  #pendingSamples: SampleUpdate[] = [];
  #pendingEvents: LogEntry[] = [];
  #pendingLogs: LogEntry[] = [];
  #lastId = 0;
  #provider: string | null = null;
  #poolState = "init";
  #poolId = "";

  constructor() {
    // Credential-looking environment variables of this process are masked wherever they appear.
    this.#redactor.addEnvironment(process.env);
  }

  /** Takes one event of the pool. */
  record(event: SkywardEvent): void {
    this.#poolId = event.poolId;
    if (event.type === "metric") {
      this.#recordMetric(event);
      return;
    }
    this.#recordTask(event);
    if (event.type === "pool.state") this.#poolState = event.state;
    if (event.type === "node.provisioned") {
      this.#provider = event.provider;
      this.#nodes.set(event.node, {
        phase: "provisioning",
        spot: event.spot,
        provider: event.provider,
        instanceType: event.instanceType,
        accelerator: event.accelerator ?? null,
        publicIp: event.publicIp,
        privateIp: event.privateIp,
      });
    }
    const phase = phaseAfter(event);
    if (phase !== undefined && "node" in event && typeof event.node === "number") {
      const seen = this.#nodes.get(event.node);
      if (seen) seen.phase = phase;
      else this.#nodes.set(event.node, { ...unknownNode(), phase });
    }
    this.#recordEntry(event);
  }

  #recordMetric(event: Extract<SkywardEvent, { type: "metric" }>): void {
    const gpu = event.gpu ?? null;
    const worker = event.worker ?? null;
    const id = `${event.node}|${event.name}|${gpu ?? ""}|${worker ?? ""}`;
    let entry = this.#series.get(id);
    if (entry === undefined) {
      const key = { key: id, node: event.node, name: event.name, unit: event.unit ?? null, gpu, worker };
      entry = { key, series: new DownsampledSeries() };
      this.#series.set(id, entry);
    }
    entry.series.add(event.timestamp, event.value, event.step);
    const sample = { ...entry.key, t: event.timestamp, v: event.value };
    this.#pendingSamples.push(event.step === undefined ? sample : { ...sample, step: event.step });
  }

  #recordTask(event: SkywardEvent): void {
    switch (event.type) {
      case "task.queued":
        this.#counts.queued += 1;
        return;
      case "task.started":
        // A retry starts again without being queued again.
        if (event.attempt === 1) this.#counts.queued = Math.max(0, this.#counts.queued - 1);
        this.#running.set(event.taskId, {
          id: event.taskId,
          name: event.name,
          node: event.node,
          startedAt: event.timestamp,
        });
        return;
      case "task.completed":
        this.#counts.completed += 1;
        this.#running.delete(event.taskId);
        return;
      case "task.failed":
        if (event.willRetry) return;
        this.#counts.failed += 1;
        if (!this.#running.delete(event.taskId)) this.#counts.queued = Math.max(0, this.#counts.queued - 1);
        return;
      case "task.cancelled":
        this.#counts.cancelled += 1;
        if (!this.#running.delete(event.taskId)) this.#counts.queued = Math.max(0, this.#counts.queued - 1);
        return;
    }
  }

  #recordEntry(event: SkywardEvent): void {
    // Task starts, completions and queueing are counted, not listed: a long run has millions. The
    // dashboard's own link carries its token: a page (or a screenshot of one) never shows it.
    if (UNLISTED_TYPES.has(event.type)) return;
    const record = eventLogRecord(event, this.#redactor);
    const node = "node" in event && typeof event.node === "number" ? event.node : null;
    const text = event.type === "log" ? this.#redactor.redact(event.line) : String(record.msg);
    const taskId = "taskId" in event && typeof event.taskId === "string" ? event.taskId : undefined;
    const entry: LogEntry = {
      timestamp: event.timestamp,
      type: event.type,
      level: eventLogLevel(event),
      node,
      text,
      ...(taskId === undefined ? {} : { taskId }),
    };
    pushBounded(this.#logs, entry, LOG_LIMIT);
    this.#pendingLogs.push(entry);
    if (NOTABLE_TYPES.has(event.type) || event.type.startsWith("node.") || event.type === "task.failed") {
      pushBounded(this.#events, entry, EVENT_LIMIT);
      this.#pendingEvents.push(entry);
    }
  }

  /** The pool now, as `/api/pool` gives it (`pool` is undefined while it is being provisioned). */
  pool(pool: Pool | undefined): PoolPayload {
    const cost = pool?.cost() ?? { hourlyRate: 0, total: 0, nodes: [] };
    const costByNode = new Map(cost.nodes.map((node) => [node.node, node]));
    const poolNodes = pool?.nodes() ?? [];
    const indexes = new Set([...this.#nodes.keys(), ...poolNodes.map((node) => node.index)]);
    const live = new Map(poolNodes.map((node) => [node.index, node]));
    const nodes: NodeRow[] = [...indexes]
      .sort((a, b) => a - b)
      .map((index) => {
        const seen = this.#nodes.get(index) ?? { ...unknownNode(), phase: "ready" };
        const running = live.get(index);
        const priced = costByNode.get(index);
        return {
          index,
          instanceId: running?.instanceId ?? priced?.instanceId ?? "",
          phase: running?.ready === false && seen.phase === "ready" ? "disconnected" : seen.phase,
          privateIp: running?.privateIp || seen.privateIp,
          publicIp: seen.publicIp,
          spot: seen.spot,
          provider: seen.provider,
          instanceType: seen.instanceType,
          accelerator: seen.accelerator,
          hourlyPrice: priced?.hourlyPrice ?? null,
          since: priced?.since ?? null,
        };
      });
    const budget = pool?.options.budget ?? null;
    const left = budget === null ? 0 : budget.max - cost.total;
    const budgetEndsAt =
      budget !== null && cost.hourlyRate > 0
        ? Date.now() + (Math.max(0, left) / cost.hourlyRate) * 3_600_000
        : null;
    const id = pool?.id ?? this.#poolId;
    return {
      id,
      state: pool?.state ?? this.#poolState,
      provider: this.#provider,
      startedAt: this.startedAt,
      now: Date.now(),
      nodes,
      tasks: this.#taskCounters(),
      running: [...this.#running.values()].slice(0, 200),
      cost: {
        hourlyRate: cost.hourlyRate,
        total: cost.total,
        budget: budget === null ? null : { max: budget.max, warnAt: budget.warnAt },
        budgetEndsAt,
      },
      sessions: this.sessions.payload(id),
      lastId: this.#lastId,
    };
  }

  #taskCounters(): TaskCounters {
    return { ...this.#counts, running: this.#running.size };
  }

  /** Every series' points after `since` (ms), as `/api/metrics` gives them. */
  metrics(since = Number.NEGATIVE_INFINITY): MetricsPayload {
    return {
      series: [...this.#series.values()].map(({ key, series }) => ({ ...key, points: series.points(since) })),
      tasksCompleted: this.#tasksCompleted.points(since),
      cost: this.#cost.points(since),
      lastId: this.#lastId,
    };
  }

  /**
   * The recent events and log lines, as `/api/events` gives them: those the batches up to `lastId`
   * carried. Newer ones go out in the next batch, which a page that loaded this follows from: given
   * here too, a reload showed them twice.
   */
  events(): EventsPayload {
    const flushed = <T>(all: readonly T[], pending: readonly T[]) =>
      all.slice(0, Math.max(0, all.length - pending.length));
    return {
      events: flushed(this.#events, this.#pendingEvents),
      logs: flushed(this.#logs, this.#pendingLogs),
      lastId: this.#lastId,
    };
  }

  /** The batches after `lastId`, for a page that reconnects; undefined when they are no longer kept. */
  batchesAfter(lastId: number): StreamBatch[] | undefined {
    if (lastId >= this.#lastId) return [];
    const first = this.#batches[0];
    if (first === undefined || first.id > lastId + 1) return undefined;
    return this.#batches.filter((batch) => batch.id > lastId);
  }

  /** Samples the pool's counters and cost and makes the next stream batch of what changed. */
  flush(pool: Pool | undefined): StreamBatch {
    const now = Date.now();
    const payload = this.pool(pool);
    this.#tasksCompleted.add(now, this.#counts.completed);
    this.#cost.add(now, payload.cost.total);
    this.#lastId += 1;
    const batch: StreamBatch = {
      id: this.#lastId,
      pool: { ...payload, lastId: this.#lastId },
      samples: this.#pendingSamples,
      events: this.#pendingEvents,
      logs: this.#pendingLogs,
    };
    this.#pendingSamples = [];
    this.#pendingEvents = [];
    this.#pendingLogs = [];
    pushBounded(this.#batches, batch, BATCH_LIMIT);
    return batch;
  }
}

function unknownNode(): NodeSeen {
  return {
    phase: "ready",
    spot: null,
    provider: null,
    instanceType: null,
    accelerator: null,
    publicIp: null,
    privateIp: null,
  };
}
