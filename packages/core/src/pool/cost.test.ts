import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Instance } from "../contract/types.js";
import { EventHub } from "../observe/events.js";
import type { Budget } from "../spec/options.js";
import { BudgetWatch } from "./budget.js";
import { CostMeter, instanceHourlyPrice, type PoolCost } from "./cost.js";

const HOUR = 3_600_000;
const base = { poolId: "p" };

function provisioned(
  hub: EventHub,
  node: number,
  instanceId: string,
  hourlyPrice: number | null,
  at: number,
) {
  hub.emit({
    ...base,
    type: "node.provisioned",
    timestamp: at,
    node,
    instanceId,
    provider: "fake",
    instanceType: "t",
    spot: false,
    hourlyPrice,
    publicIp: null,
    privateIp: null,
  });
}

describe("instanceHourlyPrice", () => {
  it("takes the instance's own price, else the offer's for its kind of capacity, else the other", () => {
    const offer = { spotPrice: 0.3, onDemandPrice: 1 };
    expect(instanceHourlyPrice({ hourlyPrice: 2, spot: true }, offer)).toBe(2);
    expect(instanceHourlyPrice({ hourlyPrice: null, spot: true }, offer)).toBe(0.3);
    expect(instanceHourlyPrice({ hourlyPrice: null, spot: false }, offer)).toBe(1);
    expect(
      instanceHourlyPrice({ hourlyPrice: null, spot: true }, { spotPrice: null, onDemandPrice: 1 }),
    ).toBe(1);
    expect(
      instanceHourlyPrice({ hourlyPrice: null, spot: false }, { spotPrice: null, onDemandPrice: null }),
    ).toBe(0);
  });
});

describe("CostMeter, from a pool's events", () => {
  it("accrues each instance from its provisioning until it is destroyed, replaced or the pool goes", () => {
    const hub = new EventHub();
    const meter = new CostMeter();
    meter.observe(hub);
    const t0 = 1_000_000;
    provisioned(hub, 0, "i-a", 2, t0);
    provisioned(hub, 1, "i-b", 1, t0);
    expect(meter.hourlyRate).toBe(3);
    expect(meter.total(t0 + HOUR / 2)).toBeCloseTo(1.5);
    // node 1 replaced after an hour, as the pool says it: i-b destroyed, i-c provisioned (at its
    // own price, from then on), then replaced, which changes nothing more
    hub.emit({ ...base, type: "node.destroyed", timestamp: t0 + HOUR, node: 1, instanceId: "i-b" });
    provisioned(hub, 1, "i-c", 3, t0 + HOUR);
    hub.emit({
      ...base,
      type: "node.replaced",
      timestamp: t0 + 1.5 * HOUR,
      node: 1,
      instanceId: "i-c",
      previousInstanceId: "i-b",
    });
    const snapshot = meter.snapshot(t0 + 2 * HOUR);
    expect(snapshot.hourlyRate).toBe(5);
    expect(snapshot.total).toBeCloseTo(4 + 1 + 3);
    expect(snapshot.nodes.map((node) => [node.node, node.instanceId, node.hourlyPrice, node.since])).toEqual([
      [0, "i-a", 2, t0],
      [1, "i-c", 3, t0 + HOUR],
    ]);
    expect(snapshot.nodes[1]?.total).toBeCloseTo(3);
    hub.emit({ ...base, type: "node.destroyed", timestamp: t0 + 2 * HOUR, node: 0, instanceId: "i-a" });
    expect(meter.hourlyRate).toBe(3);
    hub.emit({ ...base, type: "pool.destroyed", timestamp: t0 + 3 * HOUR });
    expect(meter.hourlyRate).toBe(0);
    // frozen from then on
    expect(meter.total(t0 + 10 * HOUR)).toBeCloseTo(4 + 1 + 6);
    expect(meter.snapshot(t0 + 10 * HOUR).nodes).toEqual([]);
  });
});

describe("CostMeter, from the instances' creation", () => {
  const offer = { spotPrice: 1, onDemandPrice: 2 };
  const instance = (id: string, hourlyPrice: number | null = null) =>
    ({ id, hourlyPrice, spot: false }) as Instance;

  it("bills an instance from its creation, though its node comes later, and lists it once it has one", () => {
    const hub = new EventHub();
    const meter = new CostMeter();
    meter.observe(hub);
    const t0 = 1_000_000;
    // Created at the provider (an interruption notice's replacement, or one still starting) at t0.
    meter.billing().created([instance("i-r")], offer, t0);
    expect(meter.hourlyRate).toBe(2);
    expect(meter.snapshot(t0 + HOUR).nodes).toEqual([]);
    expect(meter.total(t0 + HOUR)).toBeCloseTo(2);
    // Its node takes it an hour later (the old node drained): counted from t0 all the same.
    provisioned(hub, 1, "i-r", 2, t0 + HOUR);
    const snapshot = meter.snapshot(t0 + 2 * HOUR);
    expect(snapshot.total).toBeCloseTo(4);
    expect(snapshot.nodes.map((node) => [node.node, node.instanceId, node.since])).toEqual([[1, "i-r", t0]]);
    expect(snapshot.nodes[0]?.total).toBeCloseTo(4);
  });

  it("bills an instance that never became a node until it was terminated", () => {
    const meter = new CostMeter();
    const t0 = 1_000_000;
    const billing = meter.billing();
    // Created, then given up before it ran (a timeout, a failed start): its own price, from creation.
    billing.created([instance("i-x", 3), instance("i-y")], offer, t0);
    expect(meter.hourlyRate).toBe(5);
    billing.terminated(["i-x", "i-y"], t0 + HOUR / 2);
    expect(meter.hourlyRate).toBe(0);
    expect(meter.total(t0 + 10 * HOUR)).toBeCloseTo(2.5);
    // Told again (a node.destroyed after a terminate the meter heard of), nothing changes.
    billing.terminated(["i-x"], t0 + HOUR);
    expect(meter.total(t0 + 10 * HOUR)).toBeCloseTo(2.5);
  });
});

describe("BudgetWatch", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function watch(budget: Budget) {
    const meter = new CostMeter();
    const calls: [string, PoolCost][] = [];
    const watcher = new BudgetWatch(meter, budget, {
      warning: (cost) => calls.push(["warning", cost]),
      exceeded: (cost) => calls.push(["exceeded", cost]),
    });
    return { meter, calls, watcher };
  }

  it("warns at warnAt and stops at max, each once, at the moment the total gets there", () => {
    const { meter, calls } = watch({ max: 10, warnAt: 8 });
    meter.start(0, "i-a", 3600, 0); // $1 per second
    vi.advanceTimersByTime(7_990);
    expect(calls).toEqual([]);
    vi.advanceTimersByTime(20);
    expect(calls.map(([what]) => what)).toEqual(["warning"]);
    expect(calls[0]?.[1].total).toBeGreaterThanOrEqual(8);
    vi.advanceTimersByTime(1_970);
    expect(calls).toHaveLength(1);
    vi.advanceTimersByTime(40);
    expect(calls.map(([what]) => what)).toEqual(["warning", "exceeded"]);
    expect(calls[1]?.[1].total).toBeGreaterThanOrEqual(10);
    expect(calls[1]?.[1].total).toBeLessThan(10.05);
    vi.advanceTimersByTime(60_000);
    expect(calls).toHaveLength(2);
  });

  it("plans again when the rate changes, and waits while nothing accrues", () => {
    const { meter, calls } = watch({ max: 10, warnAt: 8 });
    vi.advanceTimersByTime(600_000);
    expect(calls).toEqual([]);
    meter.start(0, "i-a", 3600, Date.now());
    vi.advanceTimersByTime(2_000); // $2
    meter.start(1, "i-b", 3 * 3600, Date.now()); // now $4 per second
    vi.advanceTimersByTime(1_490); // $7.96
    expect(calls).toEqual([]);
    vi.advanceTimersByTime(30);
    expect(calls.map(([what]) => what)).toEqual(["warning"]);
    meter.stopAll(Date.now());
    vi.advanceTimersByTime(3_600_000);
    expect(calls.map(([what]) => what)).toEqual(["warning"]);
  });

  it("stop() ends the watch", () => {
    const { meter, calls, watcher } = watch({ max: 1, warnAt: 0.5 });
    meter.start(0, "i-a", 3600, 0);
    watcher.stop();
    vi.advanceTimersByTime(10_000);
    expect(calls).toEqual([]);
  });
});
