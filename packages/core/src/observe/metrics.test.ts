import { describe, expect, it } from "vitest";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { type MetricCollector, metricCollectorSchema, metrics } from "./metrics.js";

function issuesOf(action: () => unknown): readonly ConfigurationIssue[] {
  try {
    action();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error.issues;
    throw error;
  }
  throw new Error("expected a ConfigurationError, nothing was thrown");
}

describe("metric factories", () => {
  it("return frozen descriptors with per-collector default intervals", () => {
    const cpu = metrics.CPU();
    expect(cpu).toEqual({ kind: "metric", collector: "cpu", name: "cpu", interval: 1 });
    expect(Object.isFrozen(cpu)).toBe(true);
    expect(metrics.MemoryTotal().interval).toBe(30);
    expect(metrics.GPUTemp().interval).toBe(5);
    expect(metrics.Custom("loss", "cat /tmp/loss").interval).toBe(3);
  });

  it("tag every built-in collector with its own name", () => {
    const made = [
      metrics.CPU(),
      metrics.Memory(),
      metrics.MemoryUsed(),
      metrics.MemoryTotal(),
      metrics.GPU(),
      metrics.GPUMemory(),
      metrics.GPUMemoryTotal(),
      metrics.GPUTemp(),
      metrics.NetworkRx(),
      metrics.NetworkTx(),
    ];
    expect(made.map((collector) => collector.name)).toEqual([
      "cpu",
      "memory",
      "memory_used",
      "memory_total",
      "gpu",
      "gpu_memory",
      "gpu_memory_total",
      "gpu_temp",
      "network_rx",
      "network_tx",
    ]);
    for (const collector of made) expect(collector.collector).toBe(collector.name);
  });

  it("take an interval", () => {
    expect(metrics.CPU({ interval: 0.5 }).interval).toBe(0.5);
    expect(metrics.GPU({ interval: 2 }).interval).toBe(2);
    expect(metrics.Memory({ interval: 0.1 }).interval).toBe(0.1);
  });

  it("measure / by default with Disk, or the given path", () => {
    expect(metrics.Disk()).toEqual({
      kind: "metric",
      collector: "disk",
      name: "disk",
      path: "/",
      interval: 5,
    });
    expect(metrics.Disk("/data", { interval: 10 })).toMatchObject({ path: "/data", interval: 10 });
  });

  it("make a custom collector from a name and a command", () => {
    expect(metrics.Custom("queue_depth", "redis-cli llen jobs", { interval: 7 })).toEqual({
      kind: "metric",
      collector: "custom",
      name: "queue_depth",
      command: "redis-cli llen jobs",
      interval: 7,
    });
  });

  it("Default() is CPU, memory, GPU utilisation and GPU memory, frozen", () => {
    const set = metrics.Default();
    expect(set.map((collector) => collector.collector)).toEqual(["cpu", "memory", "gpu", "gpu_memory"]);
    expect(Object.isFrozen(set)).toBe(true);
    expect(metrics.Default({ interval: 4 }).every((collector) => collector.interval === 4)).toBe(true);
  });
});

describe("metric factory errors", () => {
  it.each([
    ["zero", 0, "expected a positive number of seconds, received 0"],
    ["negative", -1, "expected a positive number of seconds, received -1"],
    ["NaN", Number.NaN, "expected a positive number of seconds, received NaN"],
    ["Infinity", Number.POSITIVE_INFINITY, "expected a positive number of seconds, received Infinity"],
    // Shorter ones would keep the worker sampling (a shell, nvidia-smi) in a busy loop.
    ["too short", 0.001, "expected at least 0.1 seconds between samples, received 0.001"],
    ["just too short", 0.09, "expected at least 0.1 seconds between samples, received 0.09"],
  ])("rejects a %s interval, naming the factory", (_label, interval, message) => {
    expect(issuesOf(() => metrics.CPU({ interval }))).toEqual([{ path: "metrics.CPU.interval", message }]);
  });

  it("names the factory in the path", () => {
    expect(issuesOf(() => metrics.GPUMemory({ interval: -2 }))[0]?.path).toBe("metrics.GPUMemory.interval");
    expect(issuesOf(() => metrics.Disk("/", { interval: 0 }))[0]?.path).toBe("metrics.Disk.interval");
    expect(issuesOf(() => metrics.Default({ interval: 0 }))).toEqual([
      { path: "metrics.Default.interval", message: "expected a positive number of seconds, received 0" },
    ]);
  });

  it("rejects a non-number interval", () => {
    expect(issuesOf(() => metrics.CPU({ interval: "1" as unknown as number }))).toEqual([
      { path: "metrics.CPU.interval", message: 'expected number, received the string "1"' },
    ]);
  });

  it("rejects an empty custom name and command", () => {
    expect(issuesOf(() => metrics.Custom("", "  "))).toEqual([
      { path: "metrics.Custom.name", message: "expected a non-empty name" },
      { path: "metrics.Custom.command", message: "expected a non-empty command" },
    ]);
  });

  it("rejects a relative disk path", () => {
    expect(issuesOf(() => metrics.Disk("data"))).toEqual([
      { path: "metrics.Disk.path", message: 'expected an absolute path on the worker, like "/data"' },
    ]);
  });
});

describe("metricCollectorSchema", () => {
  it("accepts what the factories make and freezes a copy", () => {
    const input: MetricCollector = { kind: "metric", collector: "gpu_temp", name: "gpu_temp", interval: 2 };
    const parsed = metricCollectorSchema.parse(input);
    expect(parsed).toEqual(input);
    expect(parsed).not.toBe(input);
    expect(Object.isFrozen(parsed)).toBe(true);
  });

  it("rejects unknown collectors, mismatched names and unknown keys", () => {
    expect(
      metricCollectorSchema.safeParse({ kind: "metric", collector: "fan", name: "fan", interval: 1 }).success,
    ).toBe(false);
    expect(
      metricCollectorSchema.safeParse({ kind: "metric", collector: "cpu", name: "gpu", interval: 1 }).success,
    ).toBe(false);
    expect(
      metricCollectorSchema.safeParse({
        kind: "metric",
        collector: "cpu",
        name: "cpu",
        interval: 1,
        extra: true,
      }).success,
    ).toBe(false);
  });
});
