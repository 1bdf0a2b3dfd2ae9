/**
 * The pool's console: append-only lines on stderr (`HH:MM:SS [node 1] …`), built on the event hub.
 * `"log"` prints everything a person follows a run by (lifecycle, bootstrap phases, task output and
 * failures); `"minimal"` leaves out bootstrap phases; `"silent"` prints nothing. On a terminal,
 * `"rich"` (what `true` picks there) is the live console of `live-console.ts` and `"minimal"` its one
 * status line; off a terminal both fall back to these lines.
 */

import type { ConsoleMode } from "../spec/options.js";
import { clock, formatConsoleLine } from "./console-lines.js";
import type { EventHub, SkywardEvent, SkywardEventType } from "./events.js";
import { attachLiveConsole, type LiveConsoleStatus, LiveView, renderSummary } from "./live-console.js";

/** Where console lines go: anything with a `write(text)`; a terminal (`isTTY`) gets the live console. */
export interface ConsoleSink {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
  readonly rows?: number;
}

export { budgetLine, clock, formatConsoleLine, provisionProgressLine, seconds } from "./console-lines.js";

const CONSOLE_EVENT_TYPES = [
  "pool.state",
  "pool.ready",
  "pool.destroyed",
  "node.provisioned",
  "node.ready",
  "node.lost",
  "node.replaced",
  "node.preempted",
  "bootstrap.phase",
  "log",
  "task.failed",
  "error",
  "scaling",
  "budget.warning",
  "budget.exceeded",
  "dashboard.ready",
  "provision.progress",
] as const satisfies readonly SkywardEventType[];

/** The console mode used: the option, with `true` → `"rich"` and `false` → `"silent"`. */
export type ResolvedConsoleMode = "rich" | "live-minimal" | "log" | "minimal" | "silent";

/**
 * Resolves the `console` option to the mode used: `true` and `"rich"` → the live console on a
 * terminal (`"rich"`), `"log"` lines elsewhere; `"minimal"` → its live status line on a terminal
 * (`"live-minimal"`), lines without bootstrap phases elsewhere; `false` → `"silent"`.
 */
export function resolveConsoleMode(option: boolean | ConsoleMode, isTTY = false): ResolvedConsoleMode {
  if (option === false || option === "silent") return "silent";
  if (option === "minimal") return isTTY && !dumbTerminal() ? "live-minimal" : "minimal";
  if (option === "log") return "log";
  return isTTY && !dumbTerminal() ? "rich" : "log";
}

function dumbTerminal(): boolean {
  return process.env.TERM === "dumb";
}

/** What the live console needs from the pool besides events. */
export interface LiveConsoleSource {
  readonly poolId: string;
  /** The pool's size bounds and cost, read at each frame. */
  readonly status?: () => LiveConsoleStatus;
}

/**
 * Prints the hub's events on the console until the returned function is called: live on a terminal
 * (`"rich"`, `"minimal"`), as lines otherwise.
 */
export function attachConsole(
  hub: EventHub,
  option: boolean | ConsoleMode,
  sink: ConsoleSink = process.stderr,
  live?: LiveConsoleSource,
): () => void {
  const mode = resolveConsoleMode(option, sink.isTTY === true && live !== undefined);
  if (mode === "silent") return () => {};
  if ((mode === "rich" || mode === "live-minimal") && live) {
    return attachLiveConsole(hub, {
      poolId: live.poolId,
      mode: mode === "rich" ? "rich" : "minimal",
      sink,
      ...(live.status ? { status: live.status } : {}),
    });
  }
  const lineMode = mode === "minimal" || mode === "live-minimal" ? "minimal" : "log";
  const print = (event: SkywardEvent) => {
    const line = formatConsoleLine(event, lineMode);
    if (line !== undefined) sink.write(`${line}\n`);
  };
  // Only the types it prints, so per-task events are not built for the console's sake; with a pool
  // to sum up, its tasks' lifecycle too (the live console follows every event).
  const unsubscribe = CONSOLE_EVENT_TYPES.map((type) => hub.on(type, print));
  const view = live ? new LiveView(live.poolId) : undefined;
  if (view) {
    for (const type of SUMMARY_EVENT_TYPES) unsubscribe.push(hub.on(type, (event) => view.apply(event)));
  }
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    for (const off of unsubscribe) off();
    // As the live console does: the run summed up (duration, cost, tasks), cost being money.
    if (view) sink.write(`${clock(Date.now())} ${renderSummary(view, live?.status?.() ?? {}, Date.now())}\n`);
  };
}

/** What the line console's summary counts, besides what it prints. */
const SUMMARY_EVENT_TYPES = [
  "pool.state",
  "task.queued",
  "task.started",
  "task.completed",
  "task.failed",
  "task.cancelled",
] as const satisfies readonly SkywardEventType[];
