import { describe, expect, it } from "vitest";
import { EventHub, type SkywardEvent } from "../observe/events.js";
import { maskEventText, Redactor } from "../observe/redact.js";
import { OutputLines } from "./output-lines.js";

describe("task output lines", () => {
  it("mask the pool's secrets in whole lines, even a value split across chunks", () => {
    const secrets = new Redactor();
    // The pool's hub masks every event's text; lines reach it whole.
    const hub = new EventHub({ mask: (event) => maskEventText(event, (text) => secrets.redact(text)) });
    const lines: string[] = [];
    hub.on("log", (event: Extract<SkywardEvent, { type: "log" }>) => lines.push(event.line));
    // Declared secrets are masked whatever their length.
    secrets.add("x9q", 1);
    secrets.add("hf_SplitAcrossChunks", 1);
    const output = new OutputLines(hub, "pool-1");
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

  it("keep each task's unfinished line to itself, and end it with the task", () => {
    const hub = new EventHub();
    const lines: [string | undefined, string][] = [];
    hub.on("log", (event: Extract<SkywardEvent, { type: "log" }>) => lines.push([event.taskId, event.line]));
    const output = new OutputLines(hub, "pool-1");
    output.write(0, 0, "stdout", "loading", "t1");
    output.write(0, 0, "stdout", " done", "t1");
    output.write(0, 0, "stdout", "t2 starts\n", "t2");
    expect(lines).toEqual([["t2", "t2 starts"]]);
    output.end("t1");
    output.end("t1");
    expect(lines).toEqual([
      ["t2", "t2 starts"],
      ["t1", "loading done"],
    ]);
  });

  it("keep of a line that carriage returns redraw (a progress bar) what a terminal shows: its last drawing", () => {
    const hub = new EventHub();
    const lines: string[] = [];
    hub.on("log", (event: Extract<SkywardEvent, { type: "log" }>) => lines.push(event.line));
    const output = new OutputLines(hub, "pool-1");
    // tqdm: each update starts with a carriage return; the bar ends with a line break.
    for (let step = 0; step <= 5000; step += 1) output.write(0, 0, "stderr", `\r${step}/5000 |█`, "t1");
    output.write(0, 0, "stderr", "\n", "t1");
    // Windows line ends (one split between chunks), and a line cleared by its writer before the next one.
    output.write(0, 0, "stdout", "crlf line\r", "t1");
    output.write(0, 0, "stdout", "\nnext\r\n", "t1");
    output.write(0, 0, "stdout", "temporary\r         \rfinal\n", "t1");
    expect(lines).toEqual(["5000/5000 |█", "crlf line", "next", "final"]);
  });
});
