import { clusterFromInstance, type Instance } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import {
  createClusterId,
  hourlyPriceFromTags,
  ownerTag,
  poolIdFromTags,
  SKYWARD_TAGS,
  skywardTags,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
} from "./tags.js";

describe("skywardTags", () => {
  it("tags what is given, under the keys clusterFromInstance reads", () => {
    const tags = skywardTags({ cluster: "skyward-1a2b3c4d", pool: "train", region: "eu", hourlyPrice: 1.5 });
    expect(tags).toEqual({
      "skyward:cluster": "skyward-1a2b3c4d",
      "skyward:pool": "train",
      "skyward:region": "eu",
      "skyward:hourly-price": "1.5",
    });
    const instance = { tags } as unknown as Instance;
    const cluster = clusterFromInstance("example", instance);
    expect([cluster.id, cluster.poolId, cluster.region]).toEqual(["skyward-1a2b3c4d", "train", "eu"]);
    expect(skywardTags({ cluster: "c", pool: "", spot: false, hourlyPrice: null })).toEqual({
      "skyward:cluster": "c",
      "skyward:spot": "0",
    });
  });

  it("reads the pool (else the cluster) and the price back", () => {
    expect(poolIdFromTags({ [SKYWARD_TAGS.cluster]: "c", [SKYWARD_TAGS.pool]: "p" })).toBe("p");
    expect(poolIdFromTags({ [SKYWARD_TAGS.cluster]: "c" })).toBe("c");
    expect(poolIdFromTags({})).toBe("");
    expect(hourlyPriceFromTags({ [SKYWARD_TAGS.hourlyPrice]: "0.25" })).toBe(0.25);
    expect([hourlyPriceFromTags({}), hourlyPriceFromTags({ [SKYWARD_TAGS.hourlyPrice]: "x" })]).toEqual([
      null,
      null,
    ]);
  });

  it("goes to environment variables and back, Skyward's tags only", () => {
    const env = skywardTagsToEnvironment({
      ...skywardTags({ cluster: "c", offer: "o", spot: true }),
      other: "x",
    });
    expect(env).toEqual({ SKYWARD_CLUSTER: "c", SKYWARD_OFFER: "o", SKYWARD_SPOT: "1" });
    expect(skywardTagsFromEnvironment({ ...env, PATH: "/bin", SKYWARD_POOL: "" })).toEqual({
      "skyward:cluster": "c",
      "skyward:offer": "o",
      "skyward:spot": "1",
    });
  });
});

describe("ownerTag and createClusterId", () => {
  it("name the owner user@host and make fresh ids", () => {
    expect(ownerTag()).toMatch(/^.+@.+$/);
    expect(createClusterId()).toMatch(/^skyward-[0-9a-f]{8}$/);
    expect(createClusterId("sky")).toMatch(/^sky-[0-9a-f]{8}$/);
    expect(createClusterId()).not.toBe(createClusterId());
  });
});
