/**
 * Tags carried in a machine's name (`nameTagCodec`): the name written for a cluster, node and pool
 * reads back as the same cluster, node and pool; a name of someone else's machine carries no tags.
 */
import { describe, expect, it } from "vitest";
import { nameTagCodec, poolNamePart } from "./name-tags.js";

const codec = nameTagCodec<{ name: string; gpu?: string }>({
  nameOf: (machine) => machine.name,
  extra: (machine, parsed): Record<string, string> =>
    machine.gpu ? { "example:gpu": `${machine.gpu}#${parsed.index}` } : {},
});

describe("nameTagCodec", () => {
  it("writes the cluster, node and pool into the name and reads them back", () => {
    const name = codec.name({ id: "skyward-1a2b3c4d", poolId: "train job/1" }, 3);
    expect(name).toBe("skyward-1a2b3c4d-3--trainjob1");
    expect(codec.parse(name)).toEqual({ cluster: "skyward-1a2b3c4d", index: 3, pool: "trainjob1" });
    expect(codec.read({ name, gpu: "a100" })).toEqual({
      "skyward:cluster": "skyward-1a2b3c4d",
      "skyward:pool": "trainjob1",
      "example:gpu": "a100#3",
    });
    expect(codec.nameOf({ name })).toBe(name);
  });

  it("a name without a pool has none; a pool id is cut to 24 name characters", () => {
    expect(codec.name({ id: "skyward-1a2b3c4d", poolId: "" }, 0)).toBe("skyward-1a2b3c4d-0");
    expect(codec.read({ name: "skyward-1a2b3c4d-0" })).toEqual({ "skyward:cluster": "skyward-1a2b3c4d" });
    expect(poolNamePart("x".repeat(30))).toHaveLength(24);
  });

  it("someone else's machine carries no tags, and an empty name is no name", () => {
    expect(codec.read({ name: "my-gpu-box", gpu: "a100" })).toEqual({});
    expect(codec.read({ name: "skyward-1a2b3c4d" })).toEqual({});
    expect(codec.nameOf({ name: "" })).toBeUndefined();
    const other = nameTagCodec<{ name: string }>({ prefix: "verda", nameOf: (machine) => machine.name });
    expect(other.parse("verda-0badcafe-1")?.cluster).toBe("verda-0badcafe");
    expect(other.parse("skyward-0badcafe-1")).toBeUndefined();
  });
});
