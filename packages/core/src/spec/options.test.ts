import { describe, expect, it } from "vitest";
import { parseInput } from "../errors/validation.js";
import { logConfig, options, optionsSchema, worker } from "./options.js";

const DEFAULT_LOG_CONFIG = {
  level: "INFO",
  file: "~/.skyward/logs/skyward.log",
  console: true,
  rotation: "50 MB",
  retention: 10,
};

const DEFAULT_WORKER = { concurrency: 1, buffer: "auto", executor: "thread", reuseProcesses: true };

describe("options defaults (the reference's Options and PoolSpec)", () => {
  it("fills in every field", () => {
    expect(options()).toEqual({
      selection: "cheapest",
      worker: DEFAULT_WORKER,
      provisionTimeout: undefined,
      sshTimeout: 300,
      bootstrapTimeout: undefined,
      provisionRetryDelay: 10,
      maxProvisionAttempts: 10,
      sshRetryInterval: 5,
      defaultComputeTimeout: 300,
      autoscaleCooldown: 30,
      autoscaleIdleTimeout: 60,
      reconcileTickInterval: 15,
      shutdownTimeout: 120,
      console: true,
      logging: DEFAULT_LOG_CONFIG,
      dashboard: null,
      cluster: true,
      retryOnInterruption: 3,
      budget: null,
      livenessTimeout: 30,
    });
  });

  it("gives the same result for no argument and for {}", () => {
    expect(options({})).toEqual(options());
  });

  it("leaves bootstrapTimeout undefined so the image's own applies", () => {
    expect(options().bootstrapTimeout).toBeUndefined();
    expect(options({ bootstrapTimeout: 900 }).bootstrapTimeout).toBe(900);
  });

  it("is frozen, worker and logging included", () => {
    const resolved = options();
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.worker)).toBe(true);
    expect(Object.isFrozen(resolved.logging)).toBe(true);
  });
});

describe("options overrides", () => {
  it("keeps what is given and defaults the rest", () => {
    const resolved = options({
      selection: "first",
      worker: { concurrency: 4 },
      provisionTimeout: 600,
      retryOnInterruption: 5,
      console: "minimal",
      cluster: false,
    });
    expect(resolved.selection).toBe("first");
    expect(resolved.worker).toEqual({ ...DEFAULT_WORKER, concurrency: 4 });
    expect(resolved.provisionTimeout).toBe(600);
    expect(resolved.retryOnInterruption).toBe(5);
    expect(resolved.console).toBe("minimal");
    expect(resolved.cluster).toBe(false);
    expect(resolved.sshTimeout).toBe(300);
    expect(resolved.shutdownTimeout).toBe(120);
  });

  it.each(["rich", "minimal", "log", "silent", true, false] as const)("accepts console %s", (mode) => {
    expect(options({ console: mode }).console).toBe(mode);
  });

  it("accepts zero where zero makes sense", () => {
    const resolved = options({
      provisionRetryDelay: 0,
      autoscaleCooldown: 0,
      autoscaleIdleTimeout: 0,
      retryOnInterruption: 0,
    });
    expect(resolved.provisionRetryDelay).toBe(0);
    expect(resolved.autoscaleCooldown).toBe(0);
    expect(resolved.autoscaleIdleTimeout).toBe(0);
    expect(resolved.retryOnInterruption).toBe(0);
  });

  it("takes a liveness timeout of at least one second", () => {
    expect(options({ livenessTimeout: 2.5 }).livenessTimeout).toBe(2.5);
    for (const bad of [0, 0.5, -1, Number.NaN, Number.POSITIVE_INFINITY, "30"]) {
      expect(() => options({ livenessTimeout: bad as number })).toThrow(
        /livenessTimeout: expected a number of seconds/,
      );
    }
  });

  it("takes a health checker, as a function reference or with its schedule", () => {
    const check = Object.assign(() => undefined, { ref: "health:gpu_ok" });
    expect(options({ healthChecker: check }).healthChecker).toEqual({
      check: "health:gpu_ok",
      interval: 30,
      timeout: 15,
      failures: 3,
    });
    const resolved = options({
      healthChecker: { check: "health:gpu_ok", interval: 2, timeout: 1, failures: 1 },
    });
    expect(resolved.healthChecker).toEqual({ check: "health:gpu_ok", interval: 2, timeout: 1, failures: 1 });
    expect(options(resolved)).toEqual(resolved);
    expect(options().healthChecker).toBeUndefined();
    expect(() => options({ healthChecker: "not a ref" })).toThrow(
      /healthChecker: expected a Python function/,
    );
    expect(() => options({ healthChecker: { check: "health:ok", interval: 0 } })).toThrow(/healthChecker/);
    expect(() => options({ healthChecker: { check: "health:ok", failures: 1.5 } })).toThrow(/healthChecker/);
    // @ts-expect-error -- not a field
    expect(() => options({ healthChecker: { check: "health:ok", every: 3 } })).toThrow(/healthChecker/);
  });

  it("accepts fractional seconds", () => {
    expect(options({ sshRetryInterval: 0.5, defaultComputeTimeout: 12.5 })).toMatchObject({
      sshRetryInterval: 0.5,
      defaultComputeTimeout: 12.5,
    });
  });

  it("re-validates to the same options", () => {
    const once = options({ worker: { executor: "process", concurrency: 2 }, logging: { level: "DEBUG" } });
    expect(options(once)).toEqual(once);
    expect(parseInput(optionsSchema, once)).toEqual(once);
  });
});

/** Expects `options(input)` to throw with an issue at `path` whose message includes `message`. */
function expectRefusal(input: Parameters<typeof options>[0], path: string, message: string): void {
  let caught: unknown;
  try {
    options(input);
  } catch (error) {
    caught = error;
  }
  const issues = (caught as { issues?: { path: string; message: string }[] }).issues ?? [];
  expect(
    issues.some((issue) => issue.path === path && issue.message.includes(message)),
    JSON.stringify(issues),
  ).toBe(true);
}

describe("budget", () => {
  it("takes a maximum (warning at 80 %) or { max, warnAt }, and null for none", () => {
    expect(options({ budget: 10 }).budget).toEqual({ max: 10, warnAt: 8 });
    expect(options({ budget: { max: 5, warnAt: 1 } }).budget).toEqual({ max: 5, warnAt: 1 });
    expect(options({ budget: null }).budget).toBeNull();
    const once = options({ budget: 2.5 });
    expect(options(once)).toEqual(once);
  });

  it.each([
    [0, "options.budget", "expected an amount in USD > 0"],
    [Number.NaN, "options.budget", "expected an amount in USD > 0"],
    [{ max: -1 }, "options.budget.max", "expected an amount in USD > 0"],
    [{ max: 5, warnAt: 5 }, "options.budget.warnAt", "expected an amount below max (5), received 5"],
    [{ max: 5, warn: 1 }, "options.budget.warn", "unknown field"],
    ["10", "options.budget", "expected an amount in USD > 0 or { max, warnAt }"],
  ])("refuses %j naming the field", (budget, path, message) => {
    expectRefusal({ budget: budget as never }, path, message);
  });
});

describe("dashboard", () => {
  it("takes true (any free port on 127.0.0.1) or { port, host }, and false or null for none", () => {
    expect(options({ dashboard: true }).dashboard).toEqual({ port: 0, host: "127.0.0.1" });
    expect(options({ dashboard: { port: 8787 } }).dashboard).toEqual({ port: 8787, host: "127.0.0.1" });
    expect(options({ dashboard: { port: 1, host: "0.0.0.0" } }).dashboard).toEqual({
      port: 1,
      host: "0.0.0.0",
    });
    expect(options({ dashboard: false }).dashboard).toBeNull();
    expect(options({ dashboard: null }).dashboard).toBeNull();
    const once = options({ dashboard: { port: 9000 } });
    expect(options(once)).toEqual(once);
  });

  it.each([
    [{ port: 70_000 }, "options.dashboard.port", "expected a port number 0–65535"],
    [{ port: 1.5 }, "options.dashboard.port", "expected a whole port number"],
    [{ host: "" }, "options.dashboard.host", "expected an address to bind"],
    [{ prot: 1 }, "options.dashboard.prot", "unknown field"],
    ["yes", "options.dashboard", "expected true, false or { port, host }"],
  ])("refuses %j naming the field", (dashboard, path, message) => {
    expectRefusal({ dashboard: dashboard as never }, path, message);
  });
});

describe("logging", () => {
  it("true gives the default log configuration", () => {
    expect(options({ logging: true }).logging).toEqual(DEFAULT_LOG_CONFIG);
  });

  it("false stays false", () => {
    expect(options({ logging: false }).logging).toBe(false);
  });

  it("a partial configuration is completed with the defaults", () => {
    expect(options({ logging: { level: "DEBUG", retention: 3 } }).logging).toEqual({
      ...DEFAULT_LOG_CONFIG,
      level: "DEBUG",
      retention: 3,
    });
  });

  it("logConfig() gives the defaults and keeps overrides", () => {
    expect(logConfig()).toEqual(DEFAULT_LOG_CONFIG);
    expect(Object.isFrozen(logConfig())).toBe(true);
    expect(logConfig({ file: "/var/log/sky.log", console: false, rotation: "1 day" })).toEqual({
      ...DEFAULT_LOG_CONFIG,
      file: "/var/log/sky.log",
      console: false,
      rotation: "1 day",
    });
  });

  it.each(["50 MB", "1 GB", "500KB", "1.5 GB", "1 day", "2 weeks", "12 hours", "30 minutes"])(
    "accepts the rotation %s",
    (rotation) => {
      expect(logConfig({ rotation }).rotation).toBe(rotation);
    },
  );

  it.each(["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"] as const)("accepts the level %s", (level) => {
    expect(logConfig({ level }).level).toBe(level);
  });
});

describe("worker", () => {
  it("defaults to one thread slot, an adaptive buffer, reused processes", () => {
    expect(worker()).toEqual(DEFAULT_WORKER);
    expect(Object.isFrozen(worker())).toBe(true);
  });

  it('resolves executor "auto" to "thread"', () => {
    expect(worker({ executor: "auto" }).executor).toBe("thread");
  });

  it("keeps an explicit executor", () => {
    expect(worker({ executor: "thread" }).executor).toBe("thread");
    expect(worker({ executor: "process", reuseProcesses: false })).toEqual({
      concurrency: 1,
      buffer: "auto",
      executor: "process",
      reuseProcesses: false,
    });
  });

  it("keeps concurrency and buffer", () => {
    expect(worker({ concurrency: 8, buffer: 4 })).toEqual({ ...DEFAULT_WORKER, concurrency: 8, buffer: 4 });
    expect(worker({ buffer: 0 }).buffer).toBe(0);
    expect(worker({ buffer: "auto" }).buffer).toBe("auto");
    expect(() => worker({ buffer: "deep" as never })).toThrow(
      /worker\.buffer.*expected an integer >= 0 or "auto"/s,
    );
  });

  it("is what options() puts under worker", () => {
    expect(options({ worker: { concurrency: 3, executor: "process" } }).worker).toEqual(
      worker({ concurrency: 3, executor: "process" }),
    );
  });
});
