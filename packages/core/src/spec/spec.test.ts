import { describe, expect, it } from "vitest";
import { Plugin } from "../contract/plugin.js";
import type { Provider } from "../contract/provider.js";
import { parseInput } from "../errors/validation.js";
import { accelerators } from "./accelerators.js";
import { DEFAULT_IMAGE, image } from "./image.js";
import { options } from "./options.js";
import {
  ALLOCATION_STRATEGIES,
  nodeSpecSchema,
  nodes,
  resolvePoolSpec,
  SPEC_FIELDS,
  type Spec,
  type SpecInput,
  spec,
  specSchema,
} from "./spec.js";

function fakeProvider(name = "fake"): Provider {
  return {
    specificationVersion: "v1",
    name,
    capabilities: { spot: true },
    offers: async () => [],
    prepare: async () => {
      throw new Error("not used");
    },
    provision: async () => [],
    getInstance: async () => null,
    launchWorker: async () => {
      throw new Error("not used");
    },
    terminate: async () => {},
    teardown: async () => {},
    selfDestruct: () => "shutdown -h now",
  };
}

describe("nodes", () => {
  it("4 means exactly 4", () => {
    expect(spec({ nodes: 4 }).nodes).toEqual({ desired: 4, min: 4, max: 4 });
  });

  it("[2, 8] starts at 2 and autoscales to 8", () => {
    expect(spec({ nodes: [2, 8] }).nodes).toEqual({ desired: 2, min: 2, max: 8 });
  });

  it("[3, 3] is a fixed range", () => {
    expect(spec({ nodes: [3, 3] }).nodes).toEqual({ desired: 3, min: 3, max: 3 });
  });

  it("sky.nodes({ desired: 8, min: 4 }) is usable at 4 and grows to 8", () => {
    expect(nodes({ desired: 8, min: 4 })).toEqual({ desired: 8, min: 4, max: 8 });
    expect(spec({ nodes: nodes({ desired: 8, min: 4 }) }).nodes).toEqual({ desired: 8, min: 4, max: 8 });
  });

  it("{ desired: 4, min: 2, max: 16 } keeps all three", () => {
    expect(nodes({ desired: 4, min: 2, max: 16 })).toEqual({ desired: 4, min: 2, max: 16 });
    expect(spec({ nodes: { desired: 4, min: 2, max: 16 } }).nodes).toEqual({ desired: 4, min: 2, max: 16 });
  });

  it("{ desired } alone defaults min and max to desired", () => {
    expect(nodes({ desired: 5 })).toEqual({ desired: 5, min: 5, max: 5 });
  });

  it("{ desired, max } starts at desired and autoscales", () => {
    expect(nodes({ desired: 2, max: 6 })).toEqual({ desired: 2, min: 2, max: 6 });
  });

  it("min: 0 is a floor of zero (scale to zero); desired stays >= 1 and min < 0 is refused", () => {
    expect(nodes({ desired: 1, min: 0, max: 3 })).toEqual({ desired: 1, min: 0, max: 3 });
    expect(() => nodes({ desired: 0, min: 0 })).toThrow(/desired/);
    expect(() => nodes({ desired: 2, min: -1 })).toThrow(/minimum node count as a whole number >= 0/);
  });

  it("a plain object works like sky.nodes() inside a spec", () => {
    expect(spec({ nodes: { desired: 8, min: 4 } }).nodes).toEqual(nodes({ desired: 8, min: 4 }));
  });

  it("resolved topologies are frozen", () => {
    expect(Object.isFrozen(nodes({ desired: 2 }))).toBe(true);
    expect(Object.isFrozen(spec({ nodes: 3 }).nodes)).toBe(true);
    expect(Object.isFrozen(spec({ nodes: [1, 4] }).nodes)).toBe(true);
  });

  it("a resolved topology re-validates to itself", () => {
    for (const input of [4, [2, 8], { desired: 4, min: 2, max: 16 }] as const) {
      const once = parseInput(nodeSpecSchema, input);
      expect(parseInput(nodeSpecSchema, once)).toEqual(once);
    }
  });
});

describe("spec defaults (the reference's Hardware spec)", () => {
  it("fills in every field", () => {
    const resolved = spec({});
    expect(resolved).toEqual({
      provider: undefined,
      accelerator: null,
      nodes: { desired: 1, min: 1, max: 1 },
      vcpus: undefined,
      memoryGb: undefined,
      diskGb: undefined,
      architecture: undefined,
      allocation: "spot-if-available",
      image: DEFAULT_IMAGE,
      region: undefined,
      maxHourlyCost: undefined,
      ttl: 600,
      volumes: [],
      plugins: [],
      secrets: {},
    });
    expect(Object.keys(resolved).sort()).toEqual([...SPEC_FIELDS].sort());
  });

  it("lists the allocation strategies, default first", () => {
    expect(ALLOCATION_STRATEGIES).toEqual(["spot-if-available", "spot", "on-demand", "cheapest"]);
    expect(Object.isFrozen(ALLOCATION_STRATEGIES)).toBe(true);
  });

  it("accepts accelerator null as CPU-only", () => {
    expect(spec({ accelerator: null }).accelerator).toBeNull();
  });

  it("accepts ttl 0 (no grace period)", () => {
    expect(spec({ ttl: 0 }).ttl).toBe(0);
  });
});

describe("spec with every field", () => {
  const provider = fakeProvider();
  const torch = Plugin.create("torch");
  const jax = Plugin.create("jax");
  const input: SpecInput = {
    provider,
    accelerator: accelerators.H100({ count: 8 }),
    nodes: [2, 4],
    vcpus: 16,
    memoryGb: 128.5,
    diskGb: 500,
    architecture: "arm64",
    allocation: "on-demand",
    image: { python: "3.12", pip: ["torch"], env: { A: "1" } },
    region: "us-east-1",
    maxHourlyCost: 2.5,
    ttl: 60,
    volumes: [
      { bucket: "data", mount: "/data/" },
      { bucket: "out", mount: "/out", readOnly: false },
    ],
    plugins: [torch, jax],
  };

  it("keeps every value, resolving the nested ones", () => {
    const resolved = spec(input);
    expect(resolved.provider).toBe(provider);
    expect(resolved.accelerator).toEqual(accelerators.H100({ count: 8 }));
    expect(resolved.nodes).toEqual({ desired: 2, min: 2, max: 4 });
    expect(resolved.vcpus).toBe(16);
    expect(resolved.memoryGb).toBe(128.5);
    expect(resolved.diskGb).toBe(500);
    expect(resolved.architecture).toBe("arm64");
    expect(resolved.allocation).toBe("on-demand");
    expect(resolved.image).toEqual(image({ python: "3.12", pip: ["torch"], env: { A: "1" } }));
    expect(resolved.region).toBe("us-east-1");
    expect(resolved.maxHourlyCost).toBe(2.5);
    expect(resolved.ttl).toBe(60);
    expect(resolved.volumes).toEqual([
      { bucket: "data", mount: "/data", prefix: "", readOnly: true, storage: undefined },
      { bucket: "out", mount: "/out", prefix: "", readOnly: false, storage: undefined },
    ]);
  });

  it("keeps plugins, the same objects, in order", () => {
    const resolved = spec(input);
    expect(resolved.plugins).toHaveLength(2);
    expect(resolved.plugins[0]).toBe(torch);
    expect(resolved.plugins[1]).toBe(jax);
    expect(spec({ plugins: [jax, torch] }).plugins.map((plugin) => plugin.name)).toEqual(["jax", "torch"]);
  });

  it("accepts an already-validated image as it is", () => {
    const built = image({ pip: ["numpy"], bootstrapTimeout: 900 });
    expect(spec({ image: built }).image).toEqual(built);
  });

  it.each(ALLOCATION_STRATEGIES)("accepts allocation %s", (allocation) => {
    expect(spec({ allocation }).allocation).toBe(allocation);
  });

  it("is frozen, lists included", () => {
    const resolved = spec(input);
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.volumes)).toBe(true);
    expect(Object.isFrozen(resolved.volumes[0])).toBe(true);
    expect(Object.isFrozen(resolved.plugins)).toBe(true);
    expect(Object.isFrozen(resolved.image)).toBe(true);
    expect(Object.isFrozen(resolved.accelerator)).toBe(true);
  });

  it("does not share its lists with the input", () => {
    const plugins = [torch];
    const resolved = spec({ plugins });
    plugins.push(jax);
    expect(resolved.plugins).toHaveLength(1);
  });

  it("is idempotent: spec(spec(x)) deep-equals spec(x)", () => {
    const inputs: SpecInput[] = [
      {},
      input,
      { nodes: nodes({ desired: 8, min: 4 }), accelerator: accelerators.A100({ memory: "40GB" }) },
      {
        image: { metrics: null },
        volumes: [{ bucket: "x1", mount: "/x", storage: { endpoint: "https://e.io" } }],
      },
    ];
    for (const each of inputs) {
      const once = spec(each);
      const twice = spec(once);
      expect(twice).toEqual(once);
      expect(parseInput(specSchema, twice)).toEqual(once);
    }
  });
});

describe("resolvePoolSpec", () => {
  const cpu: Spec = spec({ nodes: 2, image: { bootstrapTimeout: 900 } });

  it("keeps every spec field", () => {
    const pool = resolvePoolSpec(cpu, options());
    for (const field of SPEC_FIELDS) expect(pool[field]).toEqual(cpu[field]);
  });

  it("copies the options in", () => {
    const resolved = options({
      worker: { concurrency: 4, buffer: 2 },
      provisionTimeout: 600,
      sshTimeout: 60,
      sshRetryInterval: 2,
      provisionRetryDelay: 1,
      maxProvisionAttempts: 3,
      autoscaleCooldown: 5,
      autoscaleIdleTimeout: 6,
      reconcileTickInterval: 7,
      defaultComputeTimeout: 8,
      cluster: false,
      retryOnInterruption: 9,
    });
    expect(resolvePoolSpec(cpu, resolved)).toMatchObject({
      worker: { concurrency: 4, buffer: 2, executor: "thread", reuseProcesses: true },
      provisionTimeout: 600,
      sshTimeout: 60,
      sshRetryInterval: 2,
      provisionRetryDelay: 1,
      maxProvisionAttempts: 3,
      autoscaleCooldown: 5,
      autoscaleIdleTimeout: 6,
      reconcileTickInterval: 7,
      defaultComputeTimeout: 8,
      cluster: false,
      retryOnInterruption: 9,
    });
  });

  it("has the reference's PoolSpec defaults", () => {
    expect(resolvePoolSpec(spec({}), options())).toMatchObject({
      ttl: 600,
      allocation: "spot-if-available",
      worker: { concurrency: 1, buffer: "auto", executor: "thread", reuseProcesses: true },
      provisionTimeout: 300,
      sshTimeout: 300,
      bootstrapTimeout: 300,
      sshRetryInterval: 5,
      provisionRetryDelay: 10,
      maxProvisionAttempts: 10,
      autoscaleCooldown: 30,
      autoscaleIdleTimeout: 60,
      reconcileTickInterval: 15,
      defaultComputeTimeout: 300,
      cluster: true,
      retryOnInterruption: 3,
    });
  });

  it("takes the bootstrap timeout from the image when the options give none", () => {
    expect(resolvePoolSpec(cpu, options()).bootstrapTimeout).toBe(900);
  });

  it("lets the options' bootstrap timeout override the image's", () => {
    expect(resolvePoolSpec(cpu, options({ bootstrapTimeout: 120 })).bootstrapTimeout).toBe(120);
  });

  it("derives zero accelerators for CPU-only", () => {
    expect(resolvePoolSpec(cpu, options())).toMatchObject({
      acceleratorName: undefined,
      acceleratorCount: 0,
      acceleratorMemoryGb: 0,
    });
  });

  it("derives the accelerator's name, count and memory", () => {
    const gpu = spec({ accelerator: accelerators.A100({ count: 8 }) });
    expect(resolvePoolSpec(gpu, options())).toMatchObject({
      acceleratorName: "A100",
      acceleratorCount: 8,
      acceleratorMemoryGb: 80,
    });
    const small = spec({ accelerator: accelerators.A100({ memory: "40GB" }) });
    expect(resolvePoolSpec(small, options())).toMatchObject({
      acceleratorName: "A100",
      acceleratorCount: 1,
      acceleratorMemoryGb: 40,
    });
  });

  it("uses 0 GB for a custom accelerator given no memory", () => {
    const custom = spec({ accelerator: accelerators.Custom("My-GPU", { count: 2 }) });
    expect(resolvePoolSpec(custom, options())).toMatchObject({
      acceleratorName: "My-GPU",
      acceleratorCount: 2,
      acceleratorMemoryGb: 0,
    });
  });

  it("is frozen", () => {
    expect(Object.isFrozen(resolvePoolSpec(cpu, options()))).toBe(true);
  });
});

describe("peer network", () => {
  const rendezvous = Plugin.create("ddp").withPeerNetwork();
  const plain = Plugin.create("helper");
  const withNetwork = (peerNetwork: "private" | "accelerated" | "none" | undefined): Provider => ({
    ...fakeProvider("market"),
    capabilities: { spot: true, ...(peerNetwork ? { peerNetwork } : {}) },
  });

  it("refuses a plugin needing one on more than one node of a provider without one, naming the plugin", () => {
    const attempt = () =>
      spec({ provider: withNetwork("none"), nodes: 2, plugins: [plain, rendezvous] }, "compute");
    expect(attempt).toThrow(
      /compute\.plugins\[1\].*plugin "ddp" connects its workers.*market's instances share no network.*nodes: 1/s,
    );
    // Elastic pools that may grow past one node are refused too.
    expect(() => spec({ provider: withNetwork("none"), nodes: [1, 4], plugins: [rendezvous] })).toThrow(
      /ddp/,
    );
  });

  it("lets the same spec through on one node, without such a plugin, or on a provider with a private network", () => {
    expect(spec({ provider: withNetwork("none"), nodes: 1, plugins: [rendezvous] }).plugins).toHaveLength(1);
    expect(spec({ provider: withNetwork("none"), nodes: 3, plugins: [plain] }).nodes.max).toBe(3);
    expect(spec({ provider: withNetwork("private"), nodes: 3, plugins: [rendezvous] }).nodes.max).toBe(3);
    expect(spec({ provider: withNetwork(undefined), nodes: 3, plugins: [rendezvous] }).nodes.max).toBe(3);
  });

  it('"accelerated": only nodes with an accelerator reach one another', () => {
    const provider = withNetwork("accelerated");
    expect(
      spec({ provider, nodes: 2, accelerator: accelerators.H100(), plugins: [rendezvous] }).nodes.max,
    ).toBe(2);
    expect(() => spec({ provider, nodes: 2, plugins: [rendezvous] })).toThrow(
      /reach one another only with an accelerator, and this spec has none/,
    );
  });

  it("is kept by a plugin written as a literal, and a bad value is refused by name", () => {
    const literal = { specificationVersion: "v1" as const, name: "lit", peerNetwork: true };
    expect(() => spec({ provider: withNetwork("none"), nodes: 2, plugins: [literal] })).toThrow(
      /plugin "lit"/,
    );
    expect(() =>
      spec({ provider: withNetwork("none"), plugins: [{ ...literal, peerNetwork: "yes" as never }] }),
    ).toThrow(/peerNetwork that is not true or false/);
    expect(() =>
      spec({
        provider: {
          ...fakeProvider(),
          capabilities: { spot: false, peerNetwork: "vpn" as never },
        },
      }),
    ).toThrow(/capabilities\.peerNetwork the string "vpn"/);
  });
});

describe("provisionTimeout", () => {
  const slow: Provider = {
    ...fakeProvider("pulls-images"),
    capabilities: { spot: false, provisionTimeout: 1500 },
  };

  it("is the provider's own default when the options leave it unset, else 300; a set value wins", () => {
    expect(resolvePoolSpec(spec({ provider: slow }), options()).provisionTimeout).toBe(1500);
    expect(resolvePoolSpec(spec({ provider: fakeProvider() }), options()).provisionTimeout).toBe(300);
    expect(resolvePoolSpec(spec({}), options()).provisionTimeout).toBe(300);
    expect(
      resolvePoolSpec(spec({ provider: slow }), options({ provisionTimeout: 60 })).provisionTimeout,
    ).toBe(60);
  });

  it("a bad capability is refused by name", () => {
    const bad = { ...slow, capabilities: { ...slow.capabilities, provisionTimeout: -1 } };
    expect(() => spec({ provider: bad })).toThrow(
      /capabilities\.provisionTimeout number -1, expected seconds > 0/,
    );
  });
});
