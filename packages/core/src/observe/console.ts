/**
 * The pool's console: append-only lines on stderr (`HH:MM:SS [node 1] …`), built on the event hub.
 * `"log"` prints everything a person follows a run by (lifecycle, bootstrap phases, task output and
 * failures); `"minimal"` leaves out bootstrap phases; `"silent"` prints nothing. `true` picks `"log"`
 * (a live-redrawing console for terminals is not built yet, so terminals get the log lines too).
 */

import type { ConsoleMode } from "../spec/options.js";
import type { BudgetEvent, EventHub, SkywardEvent, SkywardEventType } from "./events.js";

/** Where console lines go: anything with a `write(text)`. */
export interface ConsoleSink {
  write(text: string): unknown;
}

/** `HH:MM:SS` in local time: the console's time stamp (the log file's echo uses it too). */
export function clock(timestamp: number): string {
  const date = new Date(timestamp);
  const pad = (value: number) => String(value).padStart(2, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** A duration suffix, `" (1.23 s)"`, or `""` when there is none. */
export function seconds(ms: number | undefined): string {
  return ms === undefined ? "" : ` (${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s)`;
}

/** What a budget event says: `budget warning: $8.00 of $10.00 spent ($2.40/h)`. */
export function budgetLine(event: BudgetEvent): string {
  const spent = `$${event.total.toFixed(2)} of $${event.budget.toFixed(2)} spent ($${event.hourlyRate.toFixed(2)}/h)`;
  return event.type === "budget.warning"
    ? `budget warning: ${spent}`
    : `budget exceeded: ${spent}; no more tasks, shutting down`;
}

/** The console line for an event, or undefined when the mode does not show it. */
export function formatConsoleLine(event: SkywardEvent, mode: "log" | "minimal"): string | undefined {
  const at = clock(event.timestamp);
  switch (event.type) {
    case "pool.state":
      // Ready and destroyed have their own events, with more to say.
      return event.state === "ready" || event.state === "destroyed"
        ? undefined
        : `${at} [pool] ${event.state.replace("_", " ")}`;
    case "pool.ready":
      return `${at} [pool] ready: ${event.nodes} node${event.nodes === 1 ? "" : "s"}${seconds(event.durationMs)}`;
    case "pool.destroyed":
      return `${at} [pool] destroyed`;
    case "node.provisioned":
      return `${at} [node ${event.node}] provisioned ${event.instanceType} at ${event.provider}${event.spot ? " (spot)" : ""}`;
    case "node.ready":
      return `${at} [node ${event.node}] ready`;
    case "node.lost":
      return `${at} [node ${event.node}] lost: ${event.reason}`;
    case "node.replaced":
      return `${at} [node ${event.node}] replaced (was ${event.previousInstanceId})`;
    case "node.preempted":
      return `${at} [node ${event.node}] preempted${event.reason ? `: ${event.reason}` : ""}`;
    case "bootstrap.phase":
      if (mode === "minimal" || event.status === "started") return undefined;
      return `${at} [node ${event.node}] ${event.phase} ${event.status}${seconds(event.durationMs)}`;
    case "log":
      return `${at} [node ${event.node}] ${event.line}`;
    case "task.failed":
      return `${at} [${event.node === null ? "pool" : `node ${event.node}`}] ${event.name} failed: ${event.error.type}: ${event.error.message}${event.willRetry ? " (retrying)" : ""}`;
    case "error":
      return `${at} [${event.node === undefined ? "pool" : `node ${event.node}`}] error: ${event.message}`;
    case "scaling":
      return `${at} [pool] scaling ${event.from} → ${event.to}: ${event.reason}`;
    case "budget.warning":
    case "budget.exceeded":
      return `${at} [pool] ${budgetLine(event)}`;
    default:
      return undefined;
  }
}

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
] as const satisfies readonly SkywardEventType[];

/** Resolves the `console` option to the mode used: `true` → `"log"`, `false` → `"silent"`. */
export function resolveConsoleMode(option: boolean | ConsoleMode): "log" | "minimal" | "silent" {
  if (option === false || option === "silent") return "silent";
  if (option === "minimal") return "minimal";
  return "log";
}

/** Prints the hub's events as console lines until the returned function is called. */
export function attachConsole(
  hub: EventHub,
  option: boolean | ConsoleMode,
  sink: ConsoleSink = process.stderr,
): () => void {
  const mode = resolveConsoleMode(option);
  if (mode === "silent") return () => {};
  const print = (event: SkywardEvent) => {
    const line = formatConsoleLine(event, mode);
    if (line !== undefined) sink.write(`${line}\n`);
  };
  // Only the types it prints, so per-task events are not built for the console's sake.
  const unsubscribe = CONSOLE_EVENT_TYPES.map((type) => hub.on(type, print));
  return () => {
    for (const off of unsubscribe) off();
  };
}
