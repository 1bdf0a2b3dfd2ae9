import { createRequire } from "node:module";
import { NDArray } from "@skyward/core";
import type { Instance } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import {
  formatAccelerator,
  formatAge,
  formatGb,
  formatPrice,
  instanceForOutput,
  poolOf,
  valueJson,
} from "./format.js";

describe("formatting", () => {
  it("writes prices, ages, sizes and accelerators for a table", () => {
    expect([formatPrice(null), formatPrice(0.035), formatPrice(2.19), formatPrice(32.7733)]).toEqual([
      "-",
      "0.0350",
      "2.190",
      "32.773",
    ]);
    expect([45_000, 12 * 60_000, 192 * 60_000, 52 * 3_600_000, 48 * 3_600_000, -5].map(formatAge)).toEqual([
      "45s",
      "12m",
      "3h12m",
      "2d4h",
      "2d",
      "0s",
    ]);
    expect([formatGb(16), formatGb(0.5)]).toEqual(["16 GB", "0.5 GB"]);
    expect(formatAccelerator(null)).toBe("-");
    expect(formatAccelerator({ name: "A100", count: 8, memoryGb: 80 })).toBe("8x A100 80GB");
    expect(formatAccelerator({ name: "T4", count: 1, memoryGb: 0 })).toBe("T4");
    expect(formatAccelerator({ name: "H100", count: 8, memoryGb: 80, formFactor: "SXM" })).toBe(
      "8x H100 SXM 80GB",
    );
    // A form factor asked for that the offer does not say is marked, not claimed.
    expect(formatAccelerator({ name: "H100", count: 8, memoryGb: 80 }, "SXM")).toBe("8x H100 SXM? 80GB");
    expect(formatAccelerator({ name: "H100", count: 1, memoryGb: 80, formFactor: "PCIe" }, "SXM")).toBe(
      "H100 PCIe 80GB",
    );
  });

  it("names an instance's pool by its pool tag, else its cluster; never prints a private key", () => {
    const instance: Instance = {
      id: "i-1",
      status: "running",
      publicIp: null,
      privateIp: null,
      ssh: { host: "h", port: 22, user: "root", privateKey: "PRIVATE" },
      spot: false,
      hourlyPrice: null,
      offerId: "o",
      createdAt: 0,
      tags: { "skyward:cluster": "c1" },
    };
    expect(poolOf(instance)).toBe("c1");
    expect(poolOf({ ...instance, tags: { "skyward:cluster": "c1", "skyward:pool": "p1" } })).toBe("p1");
    expect(instanceForOutput("aws", instance)).toEqual({
      provider: "aws",
      id: "i-1",
      status: "running",
      publicIp: null,
      privateIp: null,
      ssh: { host: "h", port: 22, user: "root" },
      spot: false,
      hourlyPrice: null,
      offerId: "o",
      createdAt: 0,
      tags: { "skyward:cluster": "c1" },
      costSoFar: null,
    });
    // With a price: what it has cost from its creation until now.
    expect(instanceForOutput("aws", { ...instance, hourlyPrice: 2 }, 5_400_000).costSoFar).toBe(3);
  });

  it("writes an Arrow table (a DataFrame a task returned) as its rows, not the table's internals", () => {
    // apache-arrow as @skyward/core has it (an optional peer of core's; the CLI does not depend on it).
    const arrow = createRequire(import.meta.resolve("@skyward/core"))("apache-arrow") as {
      tableFromArrays(columns: Record<string, unknown>): object;
    };
    const table = arrow.tableFromArrays({
      n: new BigInt64Array([1n, 2n ** 62n]),
      x: new Float64Array([0.5, 1.5]),
      s: ["a", "b"],
    });
    expect(valueJson(table)).toBe('[{"n":1,"x":0.5,"s":"a"},{"n":4611686018427387904,"x":1.5,"s":"b"}]');
    expect(valueJson({ ok: true, value: table })).toBe(
      '{"ok":true,"value":[{"n":1,"x":0.5,"s":"a"},{"n":4611686018427387904,"x":1.5,"s":"b"}]}',
    );
  });

  it("writes task values JSON has no plain form for: exact big integers, typed arrays as arrays", () => {
    expect(valueJson(2n ** 70n)).toBe("1180591620717411303424");
    expect(valueJson({ value: new Uint8Array([0, 1, 255]) })).toBe('{"value":[0,1,255]}');
    expect(valueJson(NDArray.of(new BigInt64Array([1n, 2n ** 62n]), [2]))).toBe(
      '{"dtype":"int64","shape":[2],"data":[1,4611686018427387904]}',
    );
    expect(valueJson(NDArray.of(new Float32Array([0.5]), []))).toBe(
      '{"dtype":"float32","shape":[],"data":[0.5]}',
    );
    expect(valueJson(undefined)).toBeUndefined();
  });
});
