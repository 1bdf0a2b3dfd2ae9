/**
 * The conformance suite itself: run in a child vitest against a well-behaved fake provider and against
 * fakes that each break one rule of the contract, it must pass the first and fail each of the others
 * exactly where the rule is checked.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { suiteFailures } from "../test/fixtures/suite-failures.js";
import { offerProblems, offerQueryProblems, workerEndpointProblems } from "./conformance.js";

const OBJECT = "is a v1 provider with a short lower-case name and typed capabilities";
const ONE_OPTIONS_OBJECT = "every method takes one options object, launchWorker included";
const OFFERS = "offers for the spec are well formed and satisfy the query";
const ACCELERATOR = "an accelerator query returns only offers with that accelerator";
const ALLOCATION =
  'allocation "spot" returns only offers with a spot price, "on-demand" only offers with an on-demand price';
const MAX_PRICE = "maxHourlyCost is honoured";
const OFFERS_READ_ONLY = "offers creates nothing";
const PROVISION = "provision returns up to 2 instance(s) tagged with the cluster";
const GET = "getInstance finds every provisioned instance";
const SELF_DESTRUCT = "selfDestruct returns a shell operation, synchronously";
const LIST =
  "listInstances (when the provider has it) lists them, and terminate works with the cluster rebuilt from their tags";
const TERMINATE = "terminate is idempotent: twice, with unknown ids, with no ids";
const AFTER_TERMINATE = "after terminate, getInstance returns null or a terminated instance";
const TEARDOWN = "teardown (twice) leaves nothing behind";
const CLEANUP =
  "cleanup (when the provider has it) removes what prepare made for pools without instances, one pool at a time, with no cluster object";
const POOL =
  "a pool on it answers on every node its launchWorker started, and closing it leaves nothing behind";

describe("runProviderConformance", () => {
  it("passes a well-behaved provider and fails each broken one exactly where it breaks the contract", async () => {
    const { failures, passed } = await suiteFailures(
      "test/fixtures/conformance-fakes.vitest.config.ts",
      "provider conformance: ",
      200_000,
    );
    expect(failures).toEqual({
      none: [],
      "bad-offer-fields": [OFFERS, ACCELERATOR, ALLOCATION, MAX_PRICE, PROVISION, GET, LIST],
      "ignores-max-price": [MAX_PRICE],
      "ignores-accelerator": [OFFERS, ACCELERATOR, ALLOCATION, MAX_PRICE],
      "spot-without-price": [ALLOCATION],
      "offers-create-things": [OFFERS_READ_ONLY, TEARDOWN],
      "untagged-instances": [PROVISION, GET, LIST],
      "created-at-in-seconds": [PROVISION, GET, LIST],
      "terminate-rejects-unknown": [TERMINATE],
      "get-after-terminate-running": [LIST, AFTER_TERMINATE],
      "teardown-leaks": [TEARDOWN],
      "no-self-destruct": [SELF_DESTRUCT],
      "detached-terminate-fails": [LIST],
      "cleanup-ignores-pools": [CLEANUP],
      "positional-methods": [ONE_OPTIONS_OBJECT],
      "no-launch-worker": [OBJECT, ONE_OPTIONS_OBJECT, POOL],
      "launch-worker-wrong-token": [POOL],
    });
    expect(passed).toBeGreaterThan(100);
  }, 240_000);
});

describe("workerEndpointProblems", () => {
  it("accepts what Local and an SSH tunnel return and names each bad field", () => {
    expect(workerEndpointProblems({ host: "127.0.0.1", port: 41_234, pid: 4321 })).toEqual([]);
    expect(
      workerEndpointProblems({
        host: "10.0.0.2",
        port: 41_234,
        pid: 77,
        token: "secret",
        warm: true,
        openStream: async () => undefined,
        close: () => undefined,
      }),
    ).toEqual([]);
    expect(workerEndpointProblems({ host: "", port: 0, pid: 1.5, warm: "yes", close: "now" })).toEqual([
      "worker endpoint: host must be a non-empty string",
      "worker endpoint: port must be a port number, is 0",
      "worker endpoint: pid must be the worker's process id, is 1.5",
      "worker endpoint: warm must be a boolean when present",
      "worker endpoint: close must be a function when present",
    ]);
    expect(workerEndpointProblems(undefined)).toEqual([
      "expected a worker endpoint object, received undefined",
    ]);
  });
});

describe("offerProblems and offerQueryProblems", () => {
  const offer: Offer = {
    id: "g.a100",
    provider: "fake",
    instanceType: "g.a100",
    accelerator: { name: "A100", count: 2, memoryGb: 80 },
    vcpus: 24,
    memoryGb: 192,
    architecture: "x86_64",
    region: "fake-1",
    spotPrice: 1.2,
    onDemandPrice: 4,
    pricesAsOf: "2025-06-01T00:00:00Z",
    specific: { machine: 7 },
  };

  it("accepts a well-formed offer and names each bad field", () => {
    expect(offerProblems(offer, "fake")).toEqual([]);
    const bad = {
      ...offer,
      provider: "other",
      accelerator: { name: "NVIDIA A100-SXM4-80GB", count: 0, memoryGb: 80 },
      spotPrice: -0.5,
      pricesAsOf: "yesterday",
      specific: { when: new Date(0) },
    };
    const problems = offerProblems(bad, "fake").join("\n");
    expect(problems).toContain('provider must be the provider\'s name "fake", is "other"');
    expect(problems).toContain("accelerator.name must be a canonical catalog name");
    expect(problems).toContain("accelerator.count must be a number > 0");
    expect(problems).toContain("spotPrice must be a number >= 0 or null, is -0.5");
    expect(problems).toContain('pricesAsOf must be an ISO 8601 date or date-time, is "yesterday"');
    expect(problems).toContain("does not survive JSON");
    expect(offerProblems({ ...offer, spotPrice: null, onDemandPrice: null }, "fake")).toEqual([
      'offer "g.a100": has neither a spot nor an on-demand price, so it cannot be bought',
    ]);
  });

  it("checks an offer against the query's accelerator, minimums, allocation and price cap", () => {
    const query: OfferQuery = {
      accelerator: { name: "A100", count: 2, memoryGb: 80 },
      allocation: "cheapest",
    };
    expect(offerQueryProblems(offer, query)).toEqual([]);
    expect(offerQueryProblems(offer, { ...query, maxHourlyCost: 1.2 })).toEqual([]);
    expect(offerQueryProblems(offer, { ...query, allocation: "on-demand", maxHourlyCost: 1.2 })).toEqual([
      'offer "g.a100": costs $4/h under "on-demand", above the query\'s maxHourlyCost $1.2',
    ]);
    expect(
      offerQueryProblems(offer, {
        accelerator: { name: "H100", count: 4 },
        vcpus: 32,
        architecture: "arm64",
        allocation: "spot",
      }),
    ).toEqual([
      'offer "g.a100": has A100, but the query asked for H100',
      'offer "g.a100": has 2 accelerators, the query asked for 4',
      'offer "g.a100": has 24 vCPUs, the query asked for at least 32',
      'offer "g.a100": is x86_64, the query asked for arm64',
    ]);
    expect(offerQueryProblems(offer, { accelerator: null, allocation: "cheapest" })).toEqual([
      'offer "g.a100": has A100 accelerators, but the query asked for CPU-only nodes',
    ]);
  });

  it("checks the form factor: as the catalog spells it, and not another than the query's", () => {
    const sxm: Offer = { ...offer, accelerator: { name: "A100", count: 2, memoryGb: 80, formFactor: "SXM" } };
    expect(offerProblems(sxm, "fake")).toEqual([]);
    const misspelt = { ...offer, accelerator: { name: "A100", count: 2, memoryGb: 80, formFactor: "SXM4" } };
    expect(offerProblems(misspelt, "fake").join("\n")).toContain(
      "accelerator.formFactor must be one of A100's form factors as the catalog spells them (SXM, PCIe) when present",
    );
    const asking = (formFactor: string): OfferQuery => ({
      accelerator: { name: "A100", count: 2, formFactor },
      allocation: "cheapest",
    });
    expect(offerQueryProblems(sxm, asking("SXM"))).toEqual([]);
    expect(offerQueryProblems(sxm, asking("PCIe"))).toEqual([
      'offer "g.a100": has form factor SXM, the query asked for PCIe',
    ]);
    // An offer that does not say its form factor may answer any.
    expect(offerQueryProblems(offer, asking("PCIe"))).toEqual([]);
  });
});
