import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigurationError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";
import { acceleratorFromName, accelerators } from "../spec/accelerators.js";
import { options } from "../spec/options.js";
import { resolvePoolSpec, spec } from "../spec/spec.js";
import {
  type Cluster,
  clusterFromInstance,
  type Instance,
  isProvider,
  type Offer,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  type Provider,
  type ProviderV1,
  prefersSpot,
  providerSchema,
  whyNotProvider,
} from "./provider.js";

interface FakeSpecific {
  readonly vpcId: string;
}

const offer: Offer = {
  id: "fake-a100",
  provider: "fake",
  instanceType: "fake.a100",
  accelerator: { name: "A100", count: 1, memoryGb: 80 },
  vcpus: 8,
  memoryGb: 64,
  architecture: "x86_64",
  region: "local",
  spotPrice: 1.1,
  onDemandPrice: 2.2,
  pricesAsOf: "2025-01-01",
  specific: {},
};

function fakeProvider(): ProviderV1<FakeSpecific> {
  const instances = new Map<string, Instance>();
  return {
    specificationVersion: "v1",
    name: "fake",
    capabilities: { spot: true },
    async offers() {
      return [offer];
    },
    async prepare({ spec, offer: chosen }) {
      return {
        id: "c1",
        provider: "fake",
        poolId: "p1",
        region: chosen.region,
        spec,
        offer: chosen,
        ssh: null,
        specific: { vpcId: "vpc-1" },
      };
    },
    async provision({ cluster, count }) {
      const created = Array.from({ length: count }, (_, index): Instance => {
        const instance: Instance = {
          id: `i-${index}`,
          status: "pending",
          publicIp: null,
          privateIp: null,
          ssh: null,
          spot: true,
          hourlyPrice: 1.1,
          offerId: cluster.offer.id,
          createdAt: 0,
          tags: { "skyward:cluster": cluster.id, vpc: cluster.specific.vpcId },
        };
        instances.set(instance.id, instance);
        return instance;
      });
      return created;
    },
    async getInstance({ id }) {
      return instances.get(id) ?? null;
    },
    async terminate({ ids }) {
      for (const id of ids) instances.delete(id);
    },
    async launchWorker() {
      throw new Error("not used");
    },
    async teardown() {},
    selfDestruct: () => "sudo shutdown -h now",
  };
}

describe("isProvider", () => {
  it("accepts an object implementing the v1 contract, whatever its Specific type", async () => {
    const specific = fakeProvider();
    // A provider with its own Specific type is a Provider.
    const provider: Provider = specific;
    expect(isProvider(provider)).toBe(true);
    expect(whyNotProvider(provider)).toBeUndefined();
    expect(isProvider({ ...fakeProvider(), listInstances: async () => [] })).toBe(true);
    expect(
      isProvider({ ...fakeProvider(), reconnectWorker: async () => ({ host: "h", port: 1, pid: 1 }) }),
    ).toBe(true);
    expect(isProvider({ ...fakeProvider(), cleanup: async () => ({ removed: [], left: [] }) })).toBe(true);

    const signal = new AbortController().signal;
    const cluster: Cluster<FakeSpecific> = await specific.prepare({
      spec: {} as Parameters<Provider["prepare"]>[0]["spec"],
      offer,
      signal,
    });
    const [instance] = await specific.provision({ cluster, count: 1, signal });
    expect(instance?.tags.vpc).toBe("vpc-1");
    expect(specific.selfDestruct({ cluster, instance: instance! })).toBe("sudo shutdown -h now");
  });

  it("rejects non-objects, other versions, and objects missing parts", () => {
    expect(isProvider(null)).toBe(false);
    expect(isProvider("aws")).toBe(false);
    expect(isProvider(() => fakeProvider())).toBe(false);
    expect(whyNotProvider(fakeProvider)).toBe("expected a provider object, received a function");
    expect(whyNotProvider(undefined)).toBe("expected a provider object, received nothing");
    expect(isProvider({})).toBe(false);
    expect(isProvider({ ...fakeProvider(), specificationVersion: "v2" })).toBe(false);
    expect(isProvider({ ...fakeProvider(), name: "" })).toBe(false);
    expect(isProvider({ ...fakeProvider(), capabilities: undefined })).toBe(false);
    expect(isProvider({ ...fakeProvider(), terminate: undefined })).toBe(false);
    expect(whyNotProvider({ ...fakeProvider(), launchWorker: undefined })).toBe(
      'provider "fake" is missing method launchWorker',
    );
    expect(isProvider({ ...fakeProvider(), listInstances: "yes" })).toBe(false);
    expect(whyNotProvider({ ...fakeProvider(), reconnectWorker: {} })).toBe(
      'provider "fake" has a reconnectWorker that is not a function',
    );
    expect(whyNotProvider({ ...fakeProvider(), cleanup: true })).toBe(
      'provider "fake" has a cleanup that is not a function',
    );
  });

  it("explains why something is not a provider", () => {
    expect(whyNotProvider("aws")).toBe('expected a provider object, received the string "aws"');
    expect(whyNotProvider({ name: "x" })).toBe('provider "x" has no specificationVersion');
    expect(whyNotProvider({ ...fakeProvider(), specificationVersion: "v2" })).toBe(
      'provider "fake" implements specification version "v2", but this version of @skyward/core supports "v1"',
    );
    const { offers: _offers, teardown: _teardown, ...partial } = fakeProvider();
    expect(whyNotProvider(partial)).toBe('provider "fake" is missing methods offers, teardown');
    const { selfDestruct: _selfDestruct, ...noSelfDestruct } = fakeProvider();
    expect(whyNotProvider(noSelfDestruct)).toBe('provider "fake" is missing method selfDestruct');
  });
});

describe("providerSchema", () => {
  const schema = z.strictObject({ provider: providerSchema });
  const issuesFor = (provider: unknown) => {
    try {
      parseInput(schema, { provider });
    } catch (error) {
      expect(ConfigurationError.isInstance(error)).toBe(true);
      return (error as ConfigurationError).issues;
    }
    throw new Error("expected a ConfigurationError");
  };

  it("passes a provider through unchanged", () => {
    const provider = fakeProvider();
    expect(parseInput(schema, { provider }).provider).toBe(provider);
  });

  it("names the field and what was expected", () => {
    expect(issuesFor("aws")).toEqual([
      {
        path: "provider",
        message:
          'expected a provider (e.g. sky.Local(), AWS(...)) with specificationVersion "v1", received the string "aws"',
      },
    ]);
    expect(issuesFor({ region: "us-east-1" })[0]?.message).toBe(
      'expected a provider (e.g. sky.Local(), AWS(...)) with specificationVersion "v1", received an object',
    );
  });

  it("names the version found and the one supported", () => {
    const [issue] = issuesFor({ ...fakeProvider(), specificationVersion: "v2" });
    expect(issue?.path).toBe("provider");
    expect(issue?.message).toContain('"v2"');
    expect(issue?.message).toContain('supports "v1"');
  });

  it("names missing methods of a v1-looking object", () => {
    const { provision: _provision, ...partial } = fakeProvider();
    expect(issuesFor(partial)[0]?.message).toContain("missing method provision");
  });
});

describe("helpers for providers and the pool", () => {
  it("ranks an offer by the price of its allocation", () => {
    const offer = { spotPrice: 0.9, onDemandPrice: 2.5 } as Offer;
    expect(
      ["spot", "on-demand", "cheapest", "spot-if-available"].map((allocation) =>
        offerPrice(offer, allocation as never),
      ),
    ).toEqual([0.9, 2.5, 0.9, 0.9]);
    expect(offerPrice({ spotPrice: null, onDemandPrice: 2.5 } as Offer, "spot")).toBeNull();
    expect(offerPrice({ spotPrice: null, onDemandPrice: 2.5 }, "cheapest")).toBe(2.5);
    expect(offerPrice({ spotPrice: null, onDemandPrice: null }, "spot-if-available")).toBeNull();
  });

  it("tries spot first when the allocation wants it and the offer has it", () => {
    const both = { spotPrice: 0.9, onDemandPrice: 2.5 };
    const dearSpot = { spotPrice: 3, onDemandPrice: 2.5 };
    const noSpot = { spotPrice: null, onDemandPrice: 2.5 };
    const allocations = ["spot", "spot-if-available", "cheapest", "on-demand"] as const;
    expect(allocations.map((allocation) => prefersSpot(allocation, both))).toEqual([true, true, true, false]);
    expect(allocations.map((allocation) => prefersSpot(allocation, dearSpot))).toEqual([
      true,
      true,
      false,
      false,
    ]);
    expect(allocations.map((allocation) => prefersSpot(allocation, noSpot))).toEqual([
      false,
      false,
      false,
      false,
    ]);
    expect(prefersSpot("cheapest", { spotPrice: 1, onDemandPrice: null })).toBe(true);
  });

  it("turns a resolved pool spec into the query providers get, leaving out what it does not set", () => {
    expect(offerQuery(resolvePoolSpec(spec({}), options()))).toEqual({
      accelerator: null,
      allocation: "spot-if-available",
    });
    const query = offerQuery(
      resolvePoolSpec(
        spec({
          accelerator: accelerators.A100({ count: 2, memory: "80GB" }),
          vcpus: 8,
          memoryGb: 64,
          diskGb: 200,
          architecture: "x86_64",
          allocation: "spot",
          region: "us-east-1",
          maxHourlyCost: 9.5,
        }),
        options(),
      ),
    );
    expect(query).toEqual({
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
      vcpus: 8,
      memoryGb: 64,
      diskGb: 200,
      architecture: "x86_64",
      allocation: "spot",
      region: "us-east-1",
      maxHourlyCost: 9.5,
    });
  });

  it("carries the accelerator's form factor in the query, from the factories and from skyward.toml strings", () => {
    const sxm = offerQuery(
      resolvePoolSpec(spec({ accelerator: accelerators.H100({ count: 8, formFactor: "SXM" }) }), options()),
    );
    expect(sxm.accelerator).toEqual({ name: "H100", count: 8, memoryGb: 80, formFactor: "SXM" });
    const fromToml = offerQuery(
      resolvePoolSpec(spec({ accelerator: acceleratorFromName("H100-PCIe:2", "accelerator") }), options()),
    );
    expect(fromToml.accelerator).toEqual({ name: "H100", count: 2, memoryGb: 80, formFactor: "PCIe" });
    const custom = offerQuery(
      resolvePoolSpec(spec({ accelerator: accelerators.Custom("Half", { formFactor: "M.2" }) }), options()),
    );
    expect(custom.accelerator).toEqual({ name: "Half", count: 1, formFactor: "M.2" });
    // No form factor asked for: none sent (any will do).
    const any = offerQuery(resolvePoolSpec(spec({ accelerator: accelerators.H100() }), options()));
    expect(any.accelerator).toEqual({ name: "H100", count: 1, memoryGb: 80 });
  });

  it("tells whether an offer's form factor fits the query: fits, differs, or unknown", () => {
    const labelled = (formFactor: string | undefined) => ({
      accelerator: { name: "H100", count: 1, memoryGb: 80, ...(formFactor ? { formFactor } : {}) },
    });
    const asking = (formFactor: string | undefined) => ({
      accelerator: { name: "H100", count: 1, ...(formFactor ? { formFactor } : {}) },
    });
    expect(offerFormFactorFit(labelled("SXM"), asking("SXM"))).toBe("fits");
    expect(offerFormFactorFit(labelled("SXM5"), asking("SXM"))).toBe("fits");
    expect(offerFormFactorFit(labelled("PCIE"), asking("PCIe"))).toBe("fits");
    expect(offerFormFactorFit(labelled("PCIe"), asking("SXM"))).toBe("differs");
    expect(offerFormFactorFit(labelled("NVL"), asking("PCIe"))).toBe("differs");
    expect(offerFormFactorFit(labelled(undefined), asking("SXM"))).toBe("unknown");
    // Nothing asked: every offer fits, labelled or not; a CPU-only offer for a form factor is unknown.
    expect(offerFormFactorFit(labelled("PCIe"), asking(undefined))).toBe("fits");
    expect(offerFormFactorFit(labelled(undefined), asking(undefined))).toBe("fits");
    expect(offerFormFactorFit({ accelerator: null }, asking("SXM"))).toBe("unknown");
    expect(offerFormFactorFit(labelled("SXM"), { accelerator: null })).toBe("fits");
  });

  it("rebuilds a detached cluster from an instance's tags", () => {
    const instance = {
      id: "i-1",
      tags: { "skyward:cluster": "c1", "skyward:pool": "p1", "skyward:region": "eu-west-1", Name: "x" },
    } as unknown as Instance;
    const cluster = clusterFromInstance("aws", instance);
    expect({ ...cluster }).toEqual({
      id: "c1",
      provider: "aws",
      poolId: "p1",
      region: "eu-west-1",
      spec: undefined,
      offer: undefined,
      ssh: null,
      specific: undefined,
    });
    expect(Object.isFrozen(cluster)).toBe(true);
    expect(clusterFromInstance("runpod", { ...instance, tags: {} })).toMatchObject({
      id: "",
      poolId: "",
      region: "",
    });
  });
});
