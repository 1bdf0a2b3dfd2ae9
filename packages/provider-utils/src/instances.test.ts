import { NoCapacityError } from "@skyward/core";
import type { Cluster, Instance } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { instanceSsh, provisionByMarket, sshReachableStatus } from "./instances.js";

describe("sshReachableStatus", () => {
  it("is running only with SSH coordinates", () => {
    const ssh = { host: "203.0.113.7", port: 22, user: "root" };
    expect(sshReachableStatus("running", ssh)).toBe("running");
    expect(sshReachableStatus("running", null)).toBe("pending");
    expect(sshReachableStatus("terminated", null)).toBe("terminated");
    expect(sshReachableStatus("stopping", null)).toBe("stopping");
  });
});

describe("instanceSsh", () => {
  const own = { host: "203.0.113.7", port: 2222, user: "ubuntu" };
  it("is the instance's own address with the provider's key", () => {
    expect(instanceSsh(own, "/keys/id", undefined)).toEqual({ ...own, identityFile: "/keys/id" });
    expect(instanceSsh(own, undefined, undefined)).toEqual(own);
  });
  it("takes each field a stand-in gives: its key instead of the provider's", () => {
    expect(
      instanceSsh(own, "/keys/id", {
        host: "10.0.0.2",
        port: 22,
        user: "root",
        privateKey: "KEY",
        root: "/bed/host0",
        hostKeyFingerprint: "SHA256:abc",
        selfDestruct: "true",
      }),
    ).toEqual({
      host: "10.0.0.2",
      port: 22,
      user: "root",
      privateKey: "KEY",
      root: "/bed/host0",
      hostKeyFingerprint: "SHA256:abc",
    });
    expect(instanceSsh(own, "/keys/id", { host: "10.0.0.2", port: 22 })).toEqual({
      host: "10.0.0.2",
      port: 22,
      user: "ubuntu",
      identityFile: "/keys/id",
    });
  });
});

describe("provisionByMarket", () => {
  const cluster = (allocation: string) =>
    ({
      id: "skyward-c1",
      poolId: "p1",
      spec: { allocation },
      offer: { id: "x:offer", instanceType: "big", spotPrice: 0.5, onDemandPrice: 1.5 },
    }) as unknown as Cluster<unknown>;
  const signal = AbortSignal.timeout(5_000);

  it("moves to the next market when one has no capacity; an instance the API does not show yet is pending", async () => {
    const asked: boolean[] = [];
    const made = await provisionByMarket({
      cluster: cluster("spot-if-available"),
      count: 2,
      provider: "x",
      signal,
      create: async (spot) => {
        asked.push(spot);
        return spot ? { noCapacity: "sold out" } : `i-${asked.length}`;
      },
      describe: async (id) => (id === "i-2" ? ({ id, status: "running" } as Instance) : null),
    });
    expect(asked).toEqual([true, false, false]);
    expect(made[0]).toMatchObject({ id: "i-2", status: "running" });
    expect(made[1]).toMatchObject({
      id: "i-3",
      status: "pending",
      spot: false,
      hourlyPrice: 1.5,
      offerId: "x:offer",
      ssh: null,
      tags: { "skyward:cluster": "skyward-c1", "skyward:pool": "p1" },
    });
  });

  it("keeps what it made when a later create fails, throws when none was made, and names every market out of capacity", async () => {
    let calls = 0;
    const partial = await provisionByMarket({
      cluster: cluster("on-demand"),
      count: 3,
      provider: "x",
      signal,
      create: async () => {
        calls += 1;
        if (calls > 1) throw new Error("API down");
        return "i-1";
      },
      describe: async () => null,
    });
    expect(partial.map((instance) => instance.id)).toEqual(["i-1"]);
    await expect(
      provisionByMarket({
        cluster: cluster("on-demand"),
        count: 1,
        provider: "x",
        signal,
        create: async () => {
          throw new Error("API down");
        },
        describe: async () => null,
      }),
    ).rejects.toThrow("API down");
    const error = await provisionByMarket({
      cluster: cluster("spot-if-available"),
      count: 1,
      provider: "x",
      signal,
      create: async (spot) => ({ noCapacity: spot ? "no spot" : "no on-demand" }),
      describe: async () => null,
    }).catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).attempts).toEqual([
      { provider: "x", offer: "big", reason: "spot: no spot" },
      { provider: "x", offer: "big", reason: "on-demand: no on-demand" },
    ]);
  });
});
