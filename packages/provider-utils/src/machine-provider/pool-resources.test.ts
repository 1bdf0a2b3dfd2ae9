import { describe, expect, it } from "vitest";
import { machineErrorClass } from "./machine-api.js";
import { namedPoolResources } from "./pool-resources.js";

const AcmeError = machineErrorClass("acme", "AcmeApiError");
const signal = () => AbortSignal.timeout(5000);

function acme(live: string[]) {
  const keys = new Map([
    ["k1", "acme-0a1b2c3d_train"],
    ["k2", "acme-1a1b2c3d_serve"],
    ["k3", "someone-else"],
    ["k4", "acme-2a1b2c3d"],
  ]);
  const scripts = new Map([["s1", "acme-0a1b2c3d_train"]]);
  const store = (entries: Map<string, string>) => ({
    list: async () => [...entries].map(([id, name]) => ({ id, name })),
    remove: async ({ id }: { id: string }) => {
      if (!entries.delete(id)) throw new AcmeError({ kind: "gone", message: `no ${id}` });
    },
  });
  const resources = namedPoolResources({
    prefix: "acme",
    kinds: { key: { kind: "key", ...store(keys) }, script: { kind: "script", ...store(scripts) } },
    liveClusters: async () => new Set(live),
  });
  return { resources, keys, scripts };
}

describe("resources named after their pool", () => {
  it("cleanup removes those of pools without a live machine, leaves the others, ignores names not ours", async () => {
    const { resources, keys, scripts } = acme(["acme-1a1b2c3d"]);
    const result = await resources.cleanup({ pools: "all", signal: signal() });
    expect(result.removed).toEqual([
      { poolId: "train", kind: "key", id: "acme-0a1b2c3d_train" },
      { poolId: "acme-2a1b2c3d", kind: "key", id: "acme-2a1b2c3d" },
      { poolId: "train", kind: "script", id: "acme-0a1b2c3d_train" },
    ]);
    expect(result.left).toEqual([
      { poolId: "serve", kind: "key", id: "acme-1a1b2c3d_serve", reason: "pool serve still has instances" },
    ]);
    expect([...keys.keys()]).toEqual(["k2", "k3"]);
    expect(scripts.size).toBe(0);
  });

  it("cleanup of named pools touches only them; names are <cluster>_<pool>; a gone resource is not an error", async () => {
    const { resources, keys } = acme([]);
    const result = await resources.cleanup({ pools: ["serve"], signal: signal() });
    expect(result.removed).toEqual([{ poolId: "serve", kind: "key", id: "acme-1a1b2c3d_serve" }]);
    expect(keys.has("k1")).toBe(true);
    expect(resources.name("acme-0a1b2c3d", "train")).toBe("acme-0a1b2c3d_train");
    expect(resources.name("acme-0a1b2c3d", "")).toBe("acme-0a1b2c3d");
    await resources.remove("key", "k2", signal());
    await resources.remove("key", undefined, signal());
    await expect(resources.remove("key", "k2", signal())).resolves.toBeUndefined();
  });

  it("an error other than gone fails the removal", async () => {
    const resources = namedPoolResources({
      prefix: "acme",
      kinds: {
        key: {
          kind: "key",
          list: async () => [],
          remove: async () => {
            throw new AcmeError({ kind: "unavailable", message: "down" });
          },
        },
      },
      liveClusters: async () => new Set(),
    });
    await expect(resources.remove("key", "k1", signal())).rejects.toThrow("down");
  });
});
