import { describe, expect, it } from "vitest";
import { formatConsoleLine } from "../observe/console.js";
import { EventHub, type ProvisionProgressEvent } from "../observe/events.js";
import { describeEvent, eventLogLevel } from "../observe/log-file.js";
import { provisionProgressEvents } from "./provision.js";

describe("provision progress", () => {
  it("is a provision.progress event each time what the provider says of a step changes", () => {
    const hub = new EventHub();
    const events: ProvisionProgressEvent[] = [];
    hub.on("provision.progress", (event) => events.push(event));
    const report = provisionProgressEvents({ hub, id: "pool-1" }, "slurm");
    const pending = { phase: "queue", status: "started", detail: "job 41 pending (Priority)" } as const;
    report(pending, "41-0");
    report(pending, "41-0"); // polled again, nothing new: not said again
    report(pending, "42-0"); // another instance's wait is its own
    report({ ...pending, detail: "job 41 pending (Resources)" }, "41-0");
    report({ phase: "queue", status: "finished" }, "41-0");
    report({ phase: "submit", status: "started" });
    expect(events.map((event) => [event.instanceId, event.phase, event.status, event.detail])).toEqual([
      ["41-0", "queue", "started", "job 41 pending (Priority)"],
      ["42-0", "queue", "started", "job 41 pending (Priority)"],
      ["41-0", "queue", "started", "job 41 pending (Resources)"],
      ["41-0", "queue", "finished", undefined],
      [undefined, "submit", "started", undefined],
    ]);
    expect(events.every((event) => event.poolId === "pool-1" && event.provider === "slurm")).toBe(true);
  });

  it("is shown by the console and the log file at INFO, with the provider's words", () => {
    const event: ProvisionProgressEvent = {
      type: "provision.progress",
      timestamp: new Date(2026, 10, 22, 9, 5, 7).getTime(),
      poolId: "p",
      provider: "slurm",
      instanceId: "41-0",
      phase: "queue",
      status: "started",
      detail: "job 41 pending (Priority), position 2 in partition main's queue",
    };
    expect(formatConsoleLine(event, "minimal")).toBe(
      "09:05:07 [pool] slurm 41-0 queue: job 41 pending (Priority), position 2 in partition main's queue",
    );
    expect(
      describeEvent({ ...event, instanceId: undefined, detail: undefined } as ProvisionProgressEvent),
    ).toBe("slurm queue: started");
    expect(eventLogLevel(event)).toBe("INFO");
  });
});
