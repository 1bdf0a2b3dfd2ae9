/**
 * Several specs: offers compared across providers, and the next one tried when a provider fails.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as sky from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/pool_tasks.py", import.meta.url));
const add = sky.python<[number, number], number>("pool_tasks:add");

/**
 * A provider whose offers look cheap but which never has capacity: `provision` throws its own
 * `NoCapacityError`, one attempt per reason (as AWS's does, one per market and subnet tried).
 */
function neverCapacity(name: string, price: number, reasons: readonly string[] = ["sold out"]): sky.Provider {
  const fail = async () => {
    throw new sky.NoCapacityError({ attempts: reasons.map((reason) => ({ provider: name, reason })) });
  };
  return {
    specificationVersion: "v1",
    name,
    capabilities: { spot: true },
    async offers() {
      return [
        {
          id: `${name}-offer`,
          provider: name,
          instanceType: `${name}.large`,
          accelerator: null,
          vcpus: 8,
          memoryGb: 32,
          architecture: "x86_64",
          region: "test",
          spotPrice: null,
          onDemandPrice: price,
          pricesAsOf: "2026-11-22",
          specific: {},
        },
      ];
    },
    async prepare({ spec, offer }) {
      return {
        id: `${name}-cluster`,
        provider: name,
        poolId: "",
        region: "test",
        spec,
        offer,
        ssh: null,
        specific: {},
      };
    },
    provision: fail,
    async getInstance() {
      return null;
    },
    async launchWorker() {
      throw new Error("never provisioned");
    },
    async terminate() {},
    async teardown() {},
    selfDestruct: () => "",
  };
}

describe("several specs", () => {
  it("fall back to the next provider when one has no capacity", async () => {
    const events: string[] = [];
    await using pool = await sky.compute(
      {
        specs: [
          { provider: neverCapacity("soldout", 0) },
          { provider: sky.Local(), image: { includes: [tasks] } },
        ],
        options: { console: false, selection: "first", maxProvisionAttempts: 1 },
      },
      { onEvent: (event) => event.type === "error" && events.push(event.message) },
    );
    expect(await pool.run(add(20, 22))).toBe(42);
    expect(
      events.some((message) => message.startsWith("soldout (soldout.large, test) failed: sold out")),
    ).toBe(true);
  }, 60_000);

  it("list every attempt and its reason when all fail", async () => {
    const error = await sky
      .compute({
        specs: [
          { provider: neverCapacity("first-cloud", 1) },
          { provider: neverCapacity("second-cloud", 2) },
        ],
        options: { console: false, maxProvisionAttempts: 1 },
      })
      .catch((caught: unknown) => caught);
    expect(sky.NoCapacityError.isInstance(error)).toBe(true);
    const attempts = (error as sky.NoCapacityError).attempts.map((attempt) => attempt.provider);
    expect(attempts).toEqual(["first-cloud", "second-cloud"]);
  }, 60_000);

  it("list each attempt once, flat, when the providers throw their own NoCapacityError", async () => {
    const events: string[] = [];
    const error = await sky
      .compute(
        {
          specs: [
            { provider: neverCapacity("first-cloud", 1, ["spot: sold out", "on-demand: quota 0 vCPUs"]) },
            { provider: neverCapacity("second-cloud", 2) },
          ],
          options: { console: false, maxProvisionAttempts: 2, provisionRetryDelay: 0 },
        },
        { onEvent: (event) => event.type === "error" && events.push(event.message) },
      )
      .catch((caught: unknown) => caught);
    expect(sky.NoCapacityError.isInstance(error)).toBe(true);
    const noCapacity = error as sky.NoCapacityError;
    // Two provision attempts at each provider (maxProvisionAttempts: 2), each reason read once.
    expect(noCapacity.message).toBe(
      [
        "No capacity for the requested pool; attempts:",
        "  - first-cloud (first-cloud.large, test): spot: sold out",
        "  - first-cloud (first-cloud.large, test): on-demand: quota 0 vCPUs",
        "  - first-cloud (first-cloud.large, test): spot: sold out",
        "  - first-cloud (first-cloud.large, test): on-demand: quota 0 vCPUs",
        "  - second-cloud (second-cloud.large, test): sold out",
        "  - second-cloud (second-cloud.large, test): sold out",
      ].join("\n"),
    );
    expect(noCapacity.attempts[0]).toEqual({
      provider: "first-cloud",
      offer: "first-cloud.large",
      region: "test",
      reason: "spot: sold out",
    });
    // The event of each failed offer says why in one line.
    expect(events).toEqual([
      "first-cloud (first-cloud.large, test) failed: spot: sold out; on-demand: quota 0 vCPUs; spot: sold out; on-demand: quota 0 vCPUs; trying the next offer",
      "second-cloud (second-cloud.large, test) failed: sold out; sold out; trying the next offer",
    ]);
  }, 60_000);

  it("refuse a provider's ConfigurationError from offers as it is: no fallback to the next spec, no 'no offers'", async () => {
    const local = sky.Local();
    const misconfigured: sky.Provider = {
      ...local,
      name: "misconfigured",
      async offers() {
        throw new sky.ConfigurationError({
          issues: [{ path: "region", message: 'expected a region such as "us-east-1", got "us-east-1a"' }],
        });
      },
    };
    let provisioned = 0;
    const fallback: sky.Provider = {
      ...local,
      async provision(options) {
        provisioned += 1;
        return local.provision(options as never);
      },
    } as sky.Provider;
    const error = await sky
      .compute({
        specs: [{ provider: misconfigured }, { provider: fallback, image: { includes: [tasks] } }],
        options: { console: false, selection: "first" },
      })
      .catch((caught: unknown) => caught);
    expect(sky.ConfigurationError.isInstance(error)).toBe(true);
    expect((error as sky.ConfigurationError).issues).toEqual([
      { path: "region", message: 'expected a region such as "us-east-1", got "us-east-1a"' },
    ]);
    expect(provisioned).toBe(0);
  }, 60_000);

  it("wait for pending instances to run before starting their workers", async () => {
    const local = sky.Local();
    let polls = 0;
    const slow: sky.Provider = {
      ...local,
      name: "slow-local",
      async provision(options) {
        const instances = await local.provision(options as never);
        return instances.map((instance) => ({ ...instance, status: "pending" as const }));
      },
      async getInstance(options) {
        polls += 1;
        const instance = await local.getInstance(options as never);
        return instance && polls < 3 ? { ...instance, status: "pending" as const } : instance;
      },
    } as sky.Provider;
    await using pool = await sky.compute({
      provider: slow,
      nodes: 1,
      image: { includes: [tasks] },
      options: { console: false },
    });
    expect(polls).toBeGreaterThanOrEqual(3);
    expect(await pool.run(add(1, 1))).toBe(2);
  }, 60_000);
});

describe("capabilities.spot", () => {
  it("keeps a provider without spot instances out of a spot-only spec, saying so, and asks it for nothing", async () => {
    let asked = 0;
    const local = sky.Local();
    const counting: sky.Provider = {
      ...local,
      async offers(options) {
        asked += 1;
        return local.offers(options);
      },
    };
    const error = await sky
      .compute({ provider: counting, allocation: "spot", options: { console: false } })
      .catch((caught: unknown) => caught);
    expect(sky.NoOffersError.isInstance(error)).toBe(true);
    expect((error as sky.NoOffersError).attempts).toEqual([
      {
        provider: "local",
        reason:
          'allocation "spot" asks for spot instances, which local does not have (capabilities.spot is false)',
      },
    ]);
    expect(asked).toBe(0);
  });
});

describe("local inputs", () => {
  it("are checked before any provider is called", async () => {
    const calls: string[] = [];
    const recorded = (hook: string) => async () => {
      calls.push(hook);
      throw new Error(`${hook} should not have been called`);
    };
    const recording = {
      ...neverCapacity("recording", 1),
      offers: recorded("offers"),
      prepare: recorded("prepare"),
      provision: recorded("provision"),
    } as sky.Provider;
    const error = await sky
      .compute({
        specs: [{ provider: recording, image: { includes: [tasks, "./no/such/dir"] } }],
        options: { console: false },
      })
      .catch((caught: unknown) => caught);
    expect(sky.ConfigurationError.isInstance(error)).toBe(true);
    expect((error as sky.ConfigurationError).issues).toEqual([
      {
        path: "specs[0].image.includes[1]",
        message: `expected a directory or a .py file that exists, but ./no/such/dir does not exist; relative paths resolve against the working directory ${process.cwd()}, which makes it ${join(process.cwd(), "no/such/dir")}`,
      },
    ]);
    expect(calls).toEqual([]);
  });
});
