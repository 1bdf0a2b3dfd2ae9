/**
 * The console's lines: one append-only line per event a person follows a run by, shared by the
 * `"log"` console, the live console's scrolling output and the log file's echo.
 */

import type { BudgetEvent, ProvisionProgressEvent, SkywardEvent } from "./events.js";

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

/** What a provision progress event says: `slurm 41.0 queue: pending (Priority), 2nd in line`. */
export function provisionProgressLine(event: ProvisionProgressEvent): string {
  const subject = [event.provider, event.instanceId, event.phase]
    .filter((part) => part !== undefined)
    .join(" ");
  return `${subject}: ${event.detail ?? event.status}`;
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
      return `${at} [node ${event.node}] provisioned ${event.instanceType} at ${event.provider}${event.spot ? " (spot)" : ""}${event.unverifiedFormFactor === undefined ? "" : `; form factor not known for this offer (${event.unverifiedFormFactor} asked for)`}`;
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
    case "dashboard.ready":
      return `${at} [pool] Dashboard: ${event.url}`;
    case "provision.progress":
      return `${at} [pool] ${provisionProgressLine(event)}`;
    default:
      return undefined;
  }
}
