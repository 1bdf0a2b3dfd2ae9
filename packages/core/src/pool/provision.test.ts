import { afterEach, describe, expect, it, vi } from "vitest";
import type { Cluster, Instance, Provider } from "../contract/provider.js";
import { CancelledError, NoCapacityError } from "../errors/errors.js";
import { provisionInstances } from "./provision.js";

function instance(id: string, status = "running"): Instance {
  return {
    id,
    status,
    privateIp: "10.0.0.1",
    publicIp: null,
    ssh: null,
    spot: false,
    hourlyPrice: 1,
    createdAt: Date.now(),
    specific: {},
  } as unknown as Instance;
}

/** A provider that gives one instance, then has no capacity; terminating fails (a throttled API). */
function halfFull(terminated: string[][]): Provider {
  let calls = 0;
  return {
    name: "fake",
    async provision() {
      calls += 1;
      if (calls === 1) return [instance("i-1")];
      throw new NoCapacityError({ attempts: [{ provider: "fake", reason: "no capacity left" }] });
    },
    async terminate({ ids }: { ids: readonly string[] }) {
      terminated.push([...ids]);
      throw new Error("RequestLimitExceeded: slow down");
    },
  } as unknown as Provider;
}

const cluster = { offer: { instanceType: "big", region: "r1" } } as unknown as Cluster;
const settings = { maxProvisionAttempts: 2, provisionRetryDelay: 0, provisionTimeout: 5 };

describe("provisioning that runs out of attempts with instances made", () => {
  it("fails with the capacity error (the next offer is tried on it), naming the instance it could not terminate", async () => {
    const terminated: string[][] = [];
    const error = await provisionInstances(
      halfFull(terminated),
      cluster,
      settings,
      2,
      new AbortController().signal,
    ).catch((caught: unknown) => caught);
    expect(terminated).toEqual([["i-1"]]);
    // Not the terminate's error: a start would take it for something no other offer helps with.
    expect(NoCapacityError.isInstance(error), String(error)).toBe(true);
    const reasons = (error as NoCapacityError).attempts.map((attempt) => attempt.reason);
    expect(reasons[0]).toBe("no capacity left");
    expect(reasons.at(-1)).toMatch(
      /terminating i-1 failed: RequestLimitExceeded: slow down; it may still run/,
    );
  });
});

describe("provisioning given up while its instances boot", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("stops waiting at once, not at its next poll, and terminates them", async () => {
    vi.useFakeTimers();
    const terminated: string[][] = [];
    const provider = {
      name: "fake",
      provision: async () => [instance("i-1", "pending")],
      getInstance: async () => instance("i-1", "pending"),
      terminate: async ({ ids }: { ids: readonly string[] }) => {
        terminated.push([...ids]);
      },
    } as unknown as Provider;
    const controller = new AbortController();
    let outcome: unknown;
    void provisionInstances(provider, cluster, settings, 1, controller.signal).then(
      () => (outcome = "provisioned"),
      (error: unknown) => (outcome = error),
    );
    await vi.advanceTimersByTimeAsync(2_600); // two polls: booting
    expect(outcome).toBeUndefined();
    controller.abort();
    // No time passes: the close of a pool does not wait out the poll interval (up to 5 s).
    await vi.advanceTimersByTimeAsync(0);
    expect(CancelledError.isInstance(outcome), String(outcome)).toBe(true);
    expect(terminated).toEqual([["i-1"]]);
  });
});
