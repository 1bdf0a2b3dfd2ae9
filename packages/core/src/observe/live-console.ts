/**
 * The live console (`console: "rich"` on a terminal, and `"minimal"`'s one status line): a region at
 * the bottom of the terminal redrawn in place, with task output and lifecycle lines scrolling above
 * it. The view is computed from the pool's events alone ({@link LiveView}, a pure model that the
 * tests drive), plus two getters the pool supplies: its size bounds and `pool.cost()`.
 *
 * Rendering is `log-update` (sindresorhus/log-update, maintained, ~6 small dependencies): it erases
 * and rewrites the previous frame and has `persist()` for lines that must stay in the scrollback,
 * which is exactly this console's shape. Ink was the other candidate; it brings React and a
 * reconciler for a view that is a handful of text lines, so it was not worth its weight here.
 */

import { createLogUpdate } from "log-update";
import { clock, formatConsoleLine } from "./console-lines.js";
import type { EventHub, SkywardEvent } from "./events.js";

/** What the pool tells the live console besides its events. */
export interface LiveConsoleStatus {
  /** The node bounds, and the count the pool aims at now. */
  readonly nodes?: { readonly min: number; readonly max: number; readonly desired: number };
  /** `pool.cost()`'s rate and running total, when the pool has one. */
  readonly cost?: { readonly hourlyRate: number; readonly total: number };
}

/** A node as the live console shows it. */
interface NodeView {
  index: number;
  instanceId: string;
  phase: string;
  /** When the current phase started (ms since epoch). */
  phaseSince: number;
  /** Bootstrap phases finished so far. */
  phasesDone: number;
  /** The client's round trip to its worker, as the handshake measured it (ms). */
  roundTripMs?: number;
  replaced: number;
  running: number;
  bad: boolean;
  metrics: Map<string, number>;
  gpus: Map<number, { util?: number; used?: number; total?: number }>;
}

interface TaskView {
  queuedAt: number;
  node: number | null;
  state: "queued" | "running";
}

const THROUGHPUT_WINDOW_MS = 30_000;
const LATENCY_SAMPLES = 10_000;

/** The live console's model: every event folded into what the screen shows. */
export class LiveView {
  readonly poolId: string;
  startedAt: number;
  state = "init";
  provider: string | undefined;
  region: string | undefined;
  instanceType: string | undefined;
  spot: boolean | undefined;
  accelerator: string | undefined;
  /** The dashboard's link (`options.dashboard`), shown under the header. */
  dashboardUrl: string | undefined;
  readonly nodes = new Map<number, NodeView>();
  readonly #tasks = new Map<string, TaskView>();
  queued = 0;
  running = 0;
  done = 0;
  failed = 0;
  cancelled = 0;
  firstTaskAt: number | undefined;
  lastDoneAt: number | undefined;
  readonly #recentDone: number[] = [];
  readonly latencies: number[] = [];
  #latencyCursor = 0;

  constructor(poolId: string, startedAt: number = Date.now()) {
    this.poolId = poolId;
    this.startedAt = startedAt;
  }

  #node(index: number, at: number): NodeView {
    let node = this.nodes.get(index);
    if (!node) {
      node = {
        index,
        instanceId: "",
        phase: "provisioning",
        phaseSince: at,
        phasesDone: 0,
        replaced: 0,
        running: 0,
        bad: false,
        metrics: new Map(),
        gpus: new Map(),
      };
      this.nodes.set(index, node);
    }
    return node;
  }

  #phase(node: NodeView, phase: string, at: number, bad = false): void {
    node.phase = phase;
    node.phaseSince = at;
    node.bad = bad;
  }

  /** Folds one event in. Returns true when the screen changes. */
  apply(event: SkywardEvent): boolean {
    const at = event.timestamp;
    switch (event.type) {
      case "pool.state":
        this.state = event.state;
        if (event.state === "requesting" || event.previous === null)
          this.startedAt = Math.min(this.startedAt, at);
        return true;
      case "pool.ready":
        this.state = "ready";
        return true;
      case "pool.destroyed":
        this.state = "destroyed";
        return true;
      case "dashboard.ready":
        this.dashboardUrl = event.url;
        return true;
      case "node.provisioned": {
        const node = this.#node(event.node, at);
        node.instanceId = event.instanceId;
        node.phasesDone = 0;
        this.#phase(node, "ssh", at);
        this.provider = event.provider;
        this.instanceType = event.instanceType;
        this.spot = event.spot;
        if (event.region) this.region = event.region;
        if (event.accelerator !== undefined) this.accelerator = event.accelerator ?? "none";
        return true;
      }
      case "bootstrap.phase": {
        const node = this.#node(event.node, at);
        if (event.status === "started") this.#phase(node, event.phase, at);
        else if (event.status === "finished") node.phasesDone += 1;
        else this.#phase(node, `${event.phase} failed`, at, true);
        return true;
      }
      case "node.bootstrapped": {
        const node = this.#node(event.node, at);
        node.roundTripMs = event.roundTripMs;
        this.#phase(node, "worker", at);
        return true;
      }
      case "node.ready":
        this.#phase(this.#node(event.node, at), "ready", at);
        return true;
      case "node.lost":
        this.#phase(this.#node(event.node, at), "lost", at, true);
        return true;
      case "node.preempted":
        this.#phase(this.#node(event.node, at), "preempted", at, true);
        return true;
      case "node.replaced": {
        const node = this.#node(event.node, at);
        node.replaced += 1;
        node.instanceId = event.instanceId;
        if (node.phase === "lost" || node.phase === "preempted") this.#phase(node, "replaced", at);
        return true;
      }
      case "node.destroyed": {
        const node = this.nodes.get(event.node);
        if (node && node.instanceId === event.instanceId) this.#phase(node, "stopped", at);
        return true;
      }
      case "task.queued": {
        const known = this.#tasks.get(event.taskId);
        if (known) return false;
        this.#tasks.set(event.taskId, { queuedAt: at, node: null, state: "queued" });
        this.queued += 1;
        this.firstTaskAt ??= at;
        return true;
      }
      case "task.started": {
        let task = this.#tasks.get(event.taskId);
        if (!task) {
          task = { queuedAt: at, node: null, state: "queued" };
          this.#tasks.set(event.taskId, task);
          this.queued += 1;
          this.firstTaskAt ??= at;
        }
        this.#leave(task);
        task.state = "running";
        task.node = event.node;
        this.running += 1;
        this.#node(event.node, at).running += 1;
        return true;
      }
      case "task.completed":
        this.#finish(event.taskId, at, "done");
        return true;
      case "task.failed":
        if (event.willRetry) {
          const task = this.#tasks.get(event.taskId);
          if (task) {
            this.#leave(task);
            task.state = "queued";
            task.node = null;
            this.queued += 1;
          }
        } else this.#finish(event.taskId, at, "failed");
        return true;
      case "task.cancelled":
        this.#finish(event.taskId, at, "cancelled");
        return true;
      case "metric": {
        const node = this.#node(event.node, at);
        if (event.gpu !== undefined && event.name.startsWith("gpu")) {
          const gpu = node.gpus.get(event.gpu) ?? {};
          if (event.name === "gpu") gpu.util = event.value;
          else if (event.name === "gpu_memory") gpu.used = event.value;
          else if (event.name === "gpu_memory_total") gpu.total = event.value;
          node.gpus.set(event.gpu, gpu);
        } else node.metrics.set(event.name, event.value);
        return true;
      }
      default:
        return false;
    }
  }

  #leave(task: TaskView): void {
    if (task.state === "queued") this.queued -= 1;
    else {
      this.running -= 1;
      const node = task.node === null ? undefined : this.nodes.get(task.node);
      if (node) node.running = Math.max(0, node.running - 1);
    }
  }

  #finish(taskId: string, at: number, how: "done" | "failed" | "cancelled"): void {
    const task = this.#tasks.get(taskId);
    if (!task) return;
    this.#tasks.delete(taskId);
    this.#leave(task);
    this[how] += 1;
    if (how !== "done") return;
    this.lastDoneAt = at;
    this.#recentDone.push(at);
    // End to end: from submission to the result.
    const latency = at - task.queuedAt;
    if (this.latencies.length < LATENCY_SAMPLES) this.latencies.push(latency);
    else {
      this.latencies[this.#latencyCursor] = latency;
      this.#latencyCursor = (this.#latencyCursor + 1) % LATENCY_SAMPLES;
    }
  }

  /** Tasks finished per second over the last 30 s (or since the first task, when sooner). */
  throughput(now: number): number | undefined {
    const since = now - THROUGHPUT_WINDOW_MS;
    while (this.#recentDone.length > 0 && (this.#recentDone[0] as number) < since) this.#recentDone.shift();
    if (this.firstTaskAt === undefined) return undefined;
    const window = Math.min(THROUGHPUT_WINDOW_MS, now - this.firstTaskAt);
    if (window <= 0) return undefined;
    return (this.#recentDone.length * 1000) / window;
  }

  /** Seconds until the queued and running tasks are done at the current throughput, when it is known. */
  eta(now: number): number | undefined {
    const left = this.queued + this.running;
    const rate = this.throughput(now);
    if (left === 0 || rate === undefined || rate <= 0) return undefined;
    return left / rate;
  }

  /**
   * The node's CPU, memory, GPU and VRAM utilisation in percent, each undefined until sampled; with
   * GPU memory in use sampled but not its total (the default set), `vramBytes` is the memory in use.
   */
  gauges(node: NodeView): { cpu?: number; mem?: number; gpu?: number; vram?: number; vramBytes?: number } {
    const cpu = node.metrics.get("cpu");
    let mem = node.metrics.get("memory");
    const used = node.metrics.get("memory_used");
    const total = node.metrics.get("memory_total");
    if (mem === undefined && used !== undefined && total) mem = (used / total) * 100;
    const gpus = [...node.gpus.values()];
    const utils = gpus.map((g) => g.util).filter((v): v is number => v !== undefined);
    const gpu = utils.length > 0 ? utils.reduce((a, b) => a + b, 0) / utils.length : undefined;
    let vramUsed = 0;
    let vramTotal = 0;
    let sampled = false;
    for (const g of gpus) {
      if (g.used === undefined) continue;
      sampled = true;
      vramUsed += g.used;
      if (g.total) vramTotal += g.total;
    }
    if (!sampled) return { cpu, mem, gpu };
    if (vramTotal > 0) return { cpu, mem, gpu, vram: (vramUsed / vramTotal) * 100 };
    return { cpu, mem, gpu, vramBytes: vramUsed };
  }
}

/** `1m 05s`, `2h 03m`, `12s`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

function usd(value: number): string {
  return value < 10 ? `$${value.toFixed(value < 1 ? 3 : 2)}` : `$${value.toFixed(2)}`;
}

function rate(value: number | undefined): string {
  if (value === undefined) return "—";
  return value >= 10 ? `${value.toFixed(0)}/s` : `${value.toFixed(value >= 1 ? 1 : 2)}/s`;
}

function percent(value: number | undefined): string {
  return value === undefined ? "    —" : ` ${Math.round(value).toString().padStart(3)}%`;
}

/** Bytes as the gauges show them when there is no total: `41.0G`, `512M`, padded to a percent's width. */
function gibibytes(bytes: number): string {
  const gib = bytes / 1024 ** 3;
  return (gib >= 1 ? `${gib.toFixed(gib >= 100 ? 0 : 1)}G` : `${Math.round(bytes / 1024 ** 2)}M`).padStart(6);
}

function bar(value: number | undefined, width: number): string {
  if (value === undefined) return `${" ".repeat(width)}`;
  const eighths = Math.round((Math.min(100, Math.max(0, value)) / 100) * width * 8);
  const full = Math.floor(eighths / 8);
  const partial = eighths % 8;
  const blocks = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
  return `${"█".repeat(full)}${blocks[partial]}`.padEnd(width, " ");
}

function clip(line: string, width: number): string {
  // Every character the console draws is one column wide.
  const chars = [...line];
  return chars.length <= width ? line : `${chars.slice(0, Math.max(0, width - 1)).join("")}…`;
}

/** The live region's lines for a terminal `width` columns wide. */
export function renderLive(view: LiveView, status: LiveConsoleStatus, width: number, now: number): string[] {
  const wide = width >= 120;
  const lines: string[] = [];
  const market = view.spot === undefined ? "—" : view.spot ? "spot" : "on-demand";
  const where = [view.provider ?? "—", view.region ?? "—"].join("/");
  lines.push(
    `skyward ${view.poolId} · ${view.state.replace("_", " ")} · ${where} · ${view.instanceType ?? "—"} · ${market} · ${view.accelerator ?? "—"} · ${duration(now - view.startedAt)}`,
  );
  if (view.dashboardUrl !== undefined) lines.push(`Dashboard: ${view.dashboardUrl}`);
  const ready = [...view.nodes.values()].filter((node) => node.phase === "ready").length;
  const size = status.nodes;
  const nodes = size
    ? `nodes ${ready} ready (min ${size.min}, target ${size.desired}, max ${size.max})`
    : `nodes ${ready} ready`;
  const cost = status.cost
    ? `${usd(status.cost.hourlyRate)}/h · ${usd(status.cost.total)} so far`
    : "$—/h · $— so far";
  if (wide) lines.push(`${nodes} · ${cost}`);
  else lines.push(nodes, cost);
  const eta = view.eta(now);
  lines.push(
    `tasks ${view.queued} queued · ${view.running} running · ${view.done} done · ${view.failed} failed${view.cancelled ? ` · ${view.cancelled} cancelled` : ""} · ${rate(view.throughput(now))}${eta === undefined ? "" : ` · ETA ${duration(eta * 1000)}`}`,
  );
  const rows = [...view.nodes.values()].sort((a, b) => a.index - b.index);
  const placeholders = Math.max(0, (size?.desired ?? 0) - rows.length);
  for (const node of rows) {
    let phase = node.phase;
    if (phase !== "ready" && phase !== "lost" && phase !== "preempted" && phase !== "stopped" && !node.bad) {
      const done = node.phasesDone > 0 ? ` ${node.phasesDone}✓` : "";
      phase = `${phase}${done} ${duration(now - node.phaseSince)}`;
    }
    // A far node (a laptop's client, a distant region) shows its round trip: it explains the pace.
    if (phase === "ready" && node.roundTripMs !== undefined && node.roundTripMs >= 1) {
      phase += ` rtt ${Math.round(node.roundTripMs)} ms`;
    }
    if (node.replaced > 0) phase += ` (replaced ${node.replaced}×)`;
    const g = view.gauges(node);
    const gauge = (label: string, value: number | undefined, text = percent(value)) =>
      wide ? `${label} ${bar(value, 8)}${text}` : `${label}${text}`;
    const row = [
      `${node.index.toString().padStart(3)} `,
      phase.padEnd(wide ? 28 : 18).slice(0, wide ? 28 : 18),
      ` ▶${node.running.toString().padEnd(3)}`,
      gauge("cpu", g.cpu),
      gauge(" mem", g.mem),
      gauge(" gpu", g.gpu),
      g.vramBytes === undefined ? gauge(" vram", g.vram) : gauge(" vram", undefined, gibibytes(g.vramBytes)),
      wide ? `  ${node.instanceId}` : "",
    ].join("");
    lines.push(row);
  }
  for (let i = 0; i < placeholders; i++) lines.push(`  · ${"provisioning".padEnd(wide ? 28 : 18)}`);
  return lines.map((line) => clip(line, width));
}

/** The one status line of `"minimal"`. */
export function renderMinimal(view: LiveView, status: LiveConsoleStatus, width: number, now: number): string {
  const ready = [...view.nodes.values()].filter((node) => node.phase === "ready").length;
  const target = status.nodes ? `/${status.nodes.desired}` : "";
  const eta = view.eta(now);
  const cost = status.cost ? ` · ${usd(status.cost.total)}` : "";
  return clip(
    `${view.state.replace("_", " ")} · ${ready}${target} nodes · ${view.queued}q ${view.running}r ${view.done}✓ ${view.failed}✗ · ${rate(view.throughput(now))}${eta === undefined ? "" : ` · ETA ${duration(eta * 1000)}`}${cost} · ${duration(now - view.startedAt)}`,
    width,
  );
}

function quantile(sorted: readonly number[], q: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index] as number;
}

/** The summary printed when the pool is gone: duration, cost, tasks, throughput, latency. */
export function renderSummary(
  view: LiveView,
  status: LiveConsoleStatus,
  now: number,
  width = Infinity,
): string {
  const elapsed = now - view.startedAt;
  const parts = [`skyward ${view.poolId}: ${duration(elapsed)}`];
  parts.push(status.cost ? `cost ${usd(status.cost.total)}` : "cost —");
  parts.push(
    `tasks ${view.done} done, ${view.failed} failed${view.cancelled ? `, ${view.cancelled} cancelled` : ""}`,
  );
  if (view.firstTaskAt !== undefined && view.lastDoneAt !== undefined && view.lastDoneAt > view.firstTaskAt) {
    parts.push(`${rate((view.done * 1000) / (view.lastDoneAt - view.firstTaskAt))} throughput`);
  }
  if (view.latencies.length > 0) {
    const sorted = [...view.latencies].sort((a, b) => a - b);
    const s = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
    parts.push(`latency p50 ${s(quantile(sorted, 0.5))}, p95 ${s(quantile(sorted, 0.95))}`);
  }
  const line = parts.join(" · ");
  // On a narrow terminal: the figures on a second, indented line rather than cut mid-word.
  return line.length <= width ? line : `${parts.slice(0, 2).join(" · ")}\n  ${parts.slice(2).join(" · ")}`;
}

/** Where the live console draws: a terminal stream. */
export interface LiveSink {
  write(text: string): unknown;
  readonly columns?: number;
  readonly rows?: number;
}

/** Options for {@link attachLiveConsole}. */
export interface LiveConsoleOptions {
  readonly poolId: string;
  readonly mode: "rich" | "minimal";
  readonly sink: LiveSink;
  /** The pool's size bounds and cost, read at each frame. */
  readonly status?: () => LiveConsoleStatus;
  /** Milliseconds between frames at most. Default 200. */
  readonly frameMs?: number;
}

/** Lines that scroll above the live region (task output, failures, lifecycle). */
const PERSISTED = new Set([
  "log",
  "task.failed",
  "error",
  "node.lost",
  "node.replaced",
  "node.preempted",
  "scaling",
  "pool.ready",
  "provision.progress",
  // What the pool costs against its budget: money, so in the scrollback, not only in a frame.
  "budget.warning",
  "budget.exceeded",
]);

/**
 * The live console drawing now, if any: one terminal has room for one live region, so a second
 * pool's console (a session's) prints its lines above the first one's region instead.
 */
let active:
  | {
      readonly sink: LiveSink;
      /** Puts a line above the region, with others of the same moment. */
      persist(line: string): void;
      /** Puts a line above the region now (with those waiting). */
      persistNow(line: string): void;
    }
  | undefined;

/** Draws the live console until the returned function is called (which prints the summary). */
export function attachLiveConsole(hub: EventHub, options: LiveConsoleOptions): () => void {
  const { sink, mode } = options;
  if (active && active.sink === sink) {
    const host = active;
    // Its own model too, for its summary (duration, cost, tasks) when it ends.
    const guestView = new LiveView(options.poolId);
    // Once the first pool's console is gone, plain lines.
    const print = (line: string) => (active === host ? host.persist(line) : sink.write(`${line}\n`));
    let guestEnded = false;
    const off = hub.on("*", (event) => {
      if (guestEnded) return;
      guestView.apply(event);
      if (!PERSISTED.has(event.type) && event.type !== "pool.destroyed") return;
      const line = formatConsoleLine(event, "log");
      if (line === undefined) return;
      print(line.replace(/ \[/, ` [${options.poolId}] [`));
    });
    return () => {
      if (guestEnded) return;
      guestEnded = true;
      off();
      const width = (sink.columns ?? 80) - 10;
      const summary = renderSummary(guestView, options.status?.() ?? {}, Date.now(), width);
      const line = `${clock(Date.now())} ${summary}`;
      if (active === host) host.persistNow(line);
      else sink.write(`${line}\n`);
    };
  }
  // On the process's own terminal, what else writes to stdout or stderr (the app's own prints) goes
  // above the region too: those writes are wrapped to erase the region first and redraw it after,
  // while the console draws through the streams' original `write`.
  const patched = sink === process.stderr ? [process.stdout, process.stderr] : [];
  const originals = new Map(patched.map((target) => [target, target.write] as const));
  const rawWrite = (originals.get(process.stderr) ?? sink.write).bind(sink) as (text: string) => boolean;
  const stream = {
    write: (text: string) => rawWrite(text),
    get columns() {
      return sink.columns;
    },
    get rows() {
      return sink.rows;
    },
    isTTY: true,
  } as unknown as NodeJS.WriteStream;
  const logUpdate = createLogUpdate(stream, { defaultWidth: 80, defaultHeight: 40 });
  const view = new LiveView(options.poolId);
  const status = () => options.status?.() ?? {};
  let ended = false;

  const frame = () => {
    if (ended) return;
    const now = Date.now();
    const width = Math.max(20, sink.columns ?? 80);
    const height = Math.max(4, sink.rows ?? 40);
    const current = status();
    if (mode === "minimal") logUpdate(renderMinimal(view, current, width - 1, now));
    else {
      // Keep the region inside the screen, or the terminal scrolls and the redraw tears.
      const lines = renderLive(view, current, width - 1, now);
      const room = height - 2;
      const shown =
        lines.length > room ? [...lines.slice(0, room - 1), `  … ${lines.length - room + 1} more`] : lines;
      logUpdate(shown.join("\n"));
    }
  };
  const timer = setInterval(() => {
    // Every tick: the clocks, rates and cost move even without events.
    frame();
  }, options.frameMs ?? 200);
  timer.unref();

  // Lines for above the region are batched: one erase, the lines, one redraw (persist() alone
  // leaves the region erased until the next frame).
  const pending: string[] = [];
  let flushing: NodeJS.Immediate | undefined;
  const flush = () => {
    flushing = undefined;
    if (pending.length === 0 || ended) return;
    logUpdate.persist(pending.splice(0).join("\n"));
    frame();
  };
  const persist = (line: string) => {
    if (ended) return;
    pending.push(line);
    flushing ??= setImmediate(flush);
  };
  const off = hub.on("*", (event) => {
    if (ended) return;
    if (PERSISTED.has(event.type)) {
      const line = formatConsoleLine(event, "log");
      if (line !== undefined) persist(line);
    }
    view.apply(event);
  });
  const persistNow = (line: string) => {
    if (ended) return;
    pending.push(line);
    if (flushing) clearImmediate(flushing);
    flush();
  };
  const self = { sink, persist, persistNow };
  active = self;
  let redraw: NodeJS.Immediate | undefined;
  for (const [target, original] of originals) {
    target.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (ended) return (original as (...args: unknown[]) => boolean).call(target, chunk, ...rest);
      if (flushing) {
        clearImmediate(flushing);
        flushing = undefined;
        if (pending.length > 0) logUpdate.persist(pending.splice(0).join("\n"));
      }
      logUpdate.clear();
      const written = (original as (...args: unknown[]) => boolean).call(target, chunk, ...rest);
      redraw ??= setImmediate(() => {
        redraw = undefined;
        frame();
      });
      return written;
    }) as typeof target.write;
  }
  frame();

  return () => {
    if (ended) return;
    if (flushing) clearImmediate(flushing);
    flush();
    frame();
    ended = true;
    if (active === self) active = undefined;
    if (redraw) clearImmediate(redraw);
    for (const [target, original] of originals) target.write = original;
    clearInterval(timer);
    off();
    logUpdate.clear();
    logUpdate.done();
    const width = (sink.columns ?? 80) - 10;
    sink.write(`${clock(Date.now())} ${renderSummary(view, status(), Date.now(), width)}\n`);
  };
}
