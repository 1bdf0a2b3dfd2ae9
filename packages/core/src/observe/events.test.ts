import { describe, expect, it, vi } from "vitest";
import { EventHub, type EventOf, POOL_STATES, type SkywardEvent, type SkywardEventType } from "./events.js";

const base = { poolId: "pool-1", timestamp: 1_700_000_000_000 };

const state = (value: EventOf<"pool.state">["state"]): EventOf<"pool.state"> => ({
  ...base,
  type: "pool.state",
  state: value,
  previous: null,
});
const nodeReady = (node: number): EventOf<"node.ready"> => ({
  ...base,
  type: "node.ready",
  node,
  instanceId: `i-${node}`,
});
const log = (line: string): EventOf<"log"> => ({
  ...base,
  type: "log",
  node: 0,
  worker: 0,
  stream: "stdout",
  line,
});

/** Reads everything an iterator yields until it ends. */
async function drain(events: AsyncIterable<SkywardEvent>): Promise<SkywardEvent[]> {
  const out: SkywardEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

describe("event types", () => {
  it("narrow on type", () => {
    const describeEvent = (event: SkywardEvent): string => {
      switch (event.type) {
        case "node.ready":
          return `node ${event.node} (${event.instanceId}) ready`;
        case "metric":
          return `${event.name}=${event.value}${event.unit ?? ""}`;
        case "scaling":
          return `${event.from}->${event.to}: ${event.reason}`;
        default:
          return event.type;
      }
    };
    expect(describeEvent(nodeReady(2))).toBe("node 2 (i-2) ready");
    expect(describeEvent({ ...base, type: "metric", node: 0, name: "cpu", value: 12.5, unit: "%" })).toBe(
      "cpu=12.5%",
    );
    expect(describeEvent({ ...base, type: "scaling", from: 2, to: 4, reason: "pending tasks" })).toBe(
      "2->4: pending tasks",
    );
    const type: SkywardEventType = "bootstrap.phase";
    expect(describeEvent({ ...base, type, node: 0, phase: "pip", status: "started" })).toBe(
      "bootstrap.phase",
    );
  });

  it("lists pool states in lifecycle order", () => {
    expect(POOL_STATES).toEqual([
      "init",
      "requesting",
      "provisioning",
      "ready",
      "shutting_down",
      "destroyed",
    ]);
    expect(Object.isFrozen(POOL_STATES)).toBe(true);
  });
});

describe("EventHub.on", () => {
  it("delivers events of the subscribed type, and all events to '*', in emission order", () => {
    const hub = new EventHub();
    const seen: string[] = [];
    hub.on("node.ready", (event) => seen.push(`ready:${event.node}`));
    hub.on("*", (event) => seen.push(`any:${event.type}`));
    hub.on("log", (event) => seen.push(`log:${event.line}`));
    hub.emit(nodeReady(0));
    hub.emit(log("hello"));
    hub.emit(state("ready"));
    hub.emit(nodeReady(1));
    expect(seen).toEqual([
      "ready:0",
      "any:node.ready",
      "any:log",
      "log:hello",
      "any:pool.state",
      "ready:1",
      "any:node.ready",
    ]);
  });

  it("delivers an event emitted by a handler after the current event reached every handler", () => {
    const hub = new EventHub();
    const first: string[] = [];
    const second: string[] = [];
    hub.on("*", (event) => {
      first.push(event.type);
      if (event.type === "node.ready") hub.emit(log("nested"));
    });
    hub.on("*", (event) => second.push(event.type));
    hub.emit(nodeReady(0));
    expect(first).toEqual(["node.ready", "log"]);
    expect(second).toEqual(["node.ready", "log"]);
  });

  it("unsubscribes, each subscription independently", () => {
    const hub = new EventHub();
    const handler = vi.fn();
    const offOne = hub.on("log", handler);
    const offTwo = hub.on("log", handler);
    hub.emit(log("a"));
    expect(handler).toHaveBeenCalledTimes(2);
    offOne();
    offOne();
    hub.emit(log("b"));
    expect(handler).toHaveBeenCalledTimes(3);
    offTwo();
    hub.emit(log("c"));
    expect(handler).toHaveBeenCalledTimes(3);
  });

  it("keeps delivering when a handler throws, and reports the error", () => {
    const errors: unknown[] = [];
    const hub = new EventHub({ onHandlerError: (error, event) => errors.push([error, event.type]) });
    const after = vi.fn();
    const boom = new Error("observer bug");
    hub.on("*", () => {
      throw boom;
    });
    hub.on("*", after);
    hub.emit(log("x"));
    hub.emit(log("y"));
    expect(after).toHaveBeenCalledTimes(2);
    expect(errors).toEqual([
      [boom, "log"],
      [boom, "log"],
    ]);
  });

  it("reports handler errors as process warnings by default", () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    try {
      const hub = new EventHub();
      hub.on("log", () => {
        throw new Error("observer bug");
      });
      hub.emit(log("x"));
      expect(warn).toHaveBeenCalledWith('a handler of "log" events threw: observer bug', {
        type: "SkywardEventHandlerWarning",
      });
    } finally {
      warn.mockRestore();
    }
  });

  it("ignores emits, and new handlers, once closed", () => {
    const hub = new EventHub();
    const handler = vi.fn();
    hub.on("*", handler);
    hub.close();
    expect(hub.closed).toBe(true);
    hub.emit(log("late"));
    const off = hub.on("*", handler);
    hub.emit(log("later"));
    off();
    expect(handler).not.toHaveBeenCalled();
  });
});

describe("EventHub.events", () => {
  it("yields events emitted after the call, in order, buffering while the consumer is away", async () => {
    const hub = new EventHub();
    hub.emit(log("before"));
    const events = hub.events();
    hub.emit(log("one"));
    hub.emit(nodeReady(3));
    const collected = drain(events);
    hub.emit(log("two"));
    await Promise.resolve();
    hub.emit(log("three"));
    hub.close();
    expect(await collected).toEqual([log("one"), nodeReady(3), log("two"), log("three")]);
  });

  it("gives every iterator every event", async () => {
    const hub = new EventHub();
    const a = hub.events();
    const b = hub.events();
    hub.emit(log("x"));
    hub.emit(log("y"));
    hub.close();
    expect(await drain(a)).toEqual([log("x"), log("y")]);
    expect(await drain(b)).toEqual([log("x"), log("y")]);
  });

  it("resolves waiting next() calls in order", async () => {
    const hub = new EventHub();
    const events = hub.events();
    const first = events.next();
    const second = events.next();
    const third = events.next();
    hub.emit(log("1"));
    hub.emit(log("2"));
    hub.close();
    expect(await first).toEqual({ done: false, value: log("1") });
    expect(await second).toEqual({ done: false, value: log("2") });
    expect(await third).toEqual({ done: true, value: undefined });
  });

  it("ends a waiting consumer when the hub closes", async () => {
    const hub = new EventHub();
    const collected = drain(hub.events());
    await Promise.resolve();
    hub.close();
    expect(await collected).toEqual([]);
  });

  it("ends at once for a closed hub", async () => {
    const hub = new EventHub();
    hub.close();
    expect(await drain(hub.events())).toEqual([]);
  });

  it("ends when the signal aborts, dropping what was not read, and stops listening", async () => {
    const hub = new EventHub();
    const controller = new AbortController();
    const events = hub.events(controller.signal);
    hub.emit(log("read"));
    expect(await events.next()).toEqual({ done: false, value: log("read") });
    const waiting = events.next();
    controller.abort();
    expect(await waiting).toEqual({ done: true, value: undefined });

    const buffered = hub.events(controller.signal);
    hub.emit(log("never read"));
    expect(await buffered.next()).toEqual({ done: true, value: undefined });

    const other = new AbortController();
    const unread = hub.events(other.signal);
    hub.emit(log("dropped"));
    other.abort();
    expect(await drain(unread)).toEqual([]);
    expect(hub.closed).toBe(false);
  });

  it("ends when the consumer breaks out of the loop", async () => {
    const hub = new EventHub();
    const events = hub.events();
    hub.emit(log("1"));
    hub.emit(log("2"));
    for await (const event of events) {
      expect(event).toEqual(log("1"));
      break;
    }
    hub.emit(log("3"));
    expect(await events.next()).toEqual({ done: true, value: undefined });
  });
});
