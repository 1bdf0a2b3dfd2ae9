import { describe, expect, it } from "vitest";
import { EventHub, type SkywardEvent } from "../observe/events.js";
import { Redactor } from "../observe/redact.js";
import { OutputLines } from "./output-lines.js";

describe("task output lines", () => {
  it("mask the pool's secrets in whole lines, even a value split across chunks", () => {
    const hub = new EventHub();
    const lines: string[] = [];
    hub.on("log", (event: Extract<SkywardEvent, { type: "log" }>) => lines.push(event.line));
    const secrets = new Redactor();
    // Declared secrets are masked whatever their length.
    secrets.add("x9q", 1);
    secrets.add("hf_SplitAcrossChunks", 1);
    const output = new OutputLines(hub, "pool-1", (text) => secrets.redact(text));
    output.write(0, 0, "stdout", "the token is hf_Split", "t1");
    output.write(0, 0, "stdout", "AcrossChunks\nshort x9q here\n", "t1");
    expect(lines).toEqual(["the token is [redacted]", "short [redacted] here"]);
  });

  it("pass lines as they are without a mask", () => {
    const hub = new EventHub();
    const lines: string[] = [];
    hub.on("log", (event: Extract<SkywardEvent, { type: "log" }>) => lines.push(event.line));
    new OutputLines(hub, "pool-1").write(0, null, "stderr", "plain line\n", undefined);
    expect(lines).toEqual(["plain line"]);
  });
});
