import { describe, expect, it } from "vitest";
import type * as errors from "./errors.js";
import {
  attemptsOf,
  BootstrapError,
  CancelledError,
  ConfigurationError,
  ConnectionError,
  NoCapacityError,
  NoOffersError,
  ProtocolError,
  ProvisionError,
  RemoteTaskError,
  SkywardError,
  TaskTimeoutError,
} from "./errors.js";

const samples = {
  SkywardError: new SkywardError({ message: "base" }),
  ConfigurationError: new ConfigurationError({
    issues: [{ path: "nodes.min", message: "must be <= max (5)" }],
  }),
  NoCapacityError: new NoCapacityError({
    attempts: [{ provider: "aws", offer: "p4d.24xlarge", reason: "no spot capacity" }],
  }),
  NoOffersError: new NoOffersError({ attempts: [{ provider: "runpod", reason: "no A100 under $1/h" }] }),
  ProvisionError: new ProvisionError({ provider: "aws", message: "RunInstances failed", isRetryable: true }),
  ConnectionError: new ConnectionError({ host: "10.0.0.2:22", node: 1, message: "connection refused" }),
  BootstrapError: new BootstrapError({
    node: 2,
    phase: "pip",
    logTail: "ERROR: No matching distribution",
    message: "bootstrap failed",
  }),
  RemoteTaskError: new RemoteTaskError({
    taskId: "t-1",
    exceptionType: "ValueError",
    exceptionMessage: "bad value",
    remoteTraceback: "Traceback …",
    node: 3,
  }),
  TaskTimeoutError: new TaskTimeoutError({ taskId: "t-2", timeoutSeconds: 5 }),
  CancelledError: new CancelledError({ taskId: "t-3" }),
  ProtocolError: new ProtocolError({ message: "bad frame" }),
} as const;

const classes = {
  SkywardError,
  ConfigurationError,
  NoCapacityError,
  NoOffersError,
  ProvisionError,
  ConnectionError,
  BootstrapError,
  RemoteTaskError,
  TaskTimeoutError,
  CancelledError,
  ProtocolError,
} as const;

describe("error classes", () => {
  it("recognise their own instances and their subclasses' only", () => {
    for (const [name, error] of Object.entries(samples)) {
      expect(SkywardError.isInstance(error), name).toBe(true);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(name);
      for (const [otherName, otherClass] of Object.entries(classes)) {
        const related =
          otherName === name ||
          otherName === "SkywardError" ||
          (name === "NoOffersError" && otherName === "NoCapacityError");
        expect(otherClass.isInstance(error), `${otherName}.isInstance(${name})`).toBe(related);
      }
    }
    expect(SkywardError.isInstance(new Error("plain"))).toBe(false);
    expect(SkywardError.isInstance(null)).toBe(false);
    expect(SkywardError.isInstance("ConfigurationError")).toBe(false);
  });

  it("recognise instances from another copy of the package, where instanceof cannot", async () => {
    // A second module instance stands for a duplicate install of @skyward/core.
    const specifier = "./errors.js?duplicate-install";
    const copy = (await import(specifier)) as typeof errors;
    expect(copy.ConfigurationError).not.toBe(ConfigurationError);
    const foreign = new copy.ConfigurationError({ issues: [{ path: "ttl", message: "expected seconds" }] });
    expect(foreign instanceof ConfigurationError).toBe(false);
    expect(ConfigurationError.isInstance(foreign)).toBe(true);
    expect(SkywardError.isInstance(foreign)).toBe(true);
    expect(RemoteTaskError.isInstance(foreign)).toBe(false);
    expect(copy.RemoteTaskError.isInstance(samples.RemoteTaskError)).toBe(true);
  });

  it("carry their typed fields, cause and a message that says what happened", () => {
    const cause = new Error("socket hang up");
    const connection = new ConnectionError({ host: "h:22", message: "lost", cause });
    expect(connection.cause).toBe(cause);
    expect(samples.ConfigurationError.message).toContain("nodes.min: must be <= max (5)");
    expect(samples.NoCapacityError.message).toContain("aws (p4d.24xlarge): no spot capacity");
    expect(samples.NoOffersError.attempts).toHaveLength(1);
    expect(samples.ProvisionError.isRetryable).toBe(true);
    expect(samples.BootstrapError.message).toContain("ERROR: No matching distribution");
    expect(samples.BootstrapError.phase).toBe("pip");
    expect(samples.RemoteTaskError.message).toBe("ValueError: bad value (on node 3)");
    expect(samples.RemoteTaskError.remoteTraceback).toBe("Traceback …");
    expect(samples.TaskTimeoutError.message).toBe("Task t-2 timed out after 5 s");
    expect(samples.CancelledError.taskId).toBe("t-3");
  });
});

describe("NoCapacityError's attempts", () => {
  it("name the provider, then the offer and region where known, then the reason", () => {
    const error = new NoCapacityError({
      attempts: [
        {
          provider: "aws",
          offer: "g5.xlarge",
          region: "us-east-1",
          reason: "spot: InsufficientInstanceCapacity",
        },
        { provider: "runpod", offer: "A100", reason: "sold out" },
        { provider: "verda", reason: "no offer" },
      ],
    });
    expect(error.message).toBe(
      [
        "No capacity for the requested pool; attempts:",
        "  - aws (g5.xlarge, us-east-1): spot: InsufficientInstanceCapacity",
        "  - runpod (A100): sold out",
        "  - verda: no offer",
      ].join("\n"),
    );
  });

  it("are taken over from a NoCapacityError being wrapped, never nested in a reason", () => {
    const inner = new NoCapacityError({
      attempts: [
        { provider: "aws", reason: "spot in subnet-a: InsufficientInstanceCapacity" },
        { provider: "aws", offer: "g5.2xlarge", reason: "on-demand: VcpuLimitExceeded" },
      ],
    });
    const tried = { provider: "aws", offer: "g5.xlarge", region: "us-east-1" };
    expect(attemptsOf(inner, tried)).toEqual([
      { ...tried, reason: "spot in subnet-a: InsufficientInstanceCapacity" },
      { ...tried, offer: "g5.2xlarge", reason: "on-demand: VcpuLimitExceeded" },
    ]);
    const outer = new NoCapacityError({ attempts: attemptsOf(inner, tried) });
    expect(outer.message.match(/No capacity/g)).toHaveLength(1);
    // Any other error is one attempt, its message the reason; so is a NoCapacityError with no attempts.
    expect(
      attemptsOf(new ProvisionError({ provider: "aws", message: "boom", isRetryable: true }), tried),
    ).toEqual([{ ...tried, reason: "boom" }]);
    const bare = new NoCapacityError({ attempts: [], message: "the market is closed" });
    expect(attemptsOf(bare, tried)).toEqual([{ ...tried, reason: "the market is closed" }]);
  });
});
