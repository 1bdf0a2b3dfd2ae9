/**
 * Hyperstack's API as documented, where the provider once read it wrong or the base now guards it:
 * lists of environments and key pairs are paged (every page read), a VM still being created refuses to
 * be deleted for now (retried until gone), a VM given random public ports is never reached on port 22,
 * the API allows 500 requests a minute per IP (then blocks for a minute), a create whose answer was lost
 * is found by its name, a spot flavor over the cap is never launched, and a list it does not know is an
 * error rather than "no instances".
 */
import { accelerators, NoCapacityError, options, spec as resolveSpec } from "@skyward/core";
import { type Cluster, resolvePoolSpec } from "@skyward/core/contract";
import { MachineProviderError, rateLimitFor } from "@skyward/provider-utils";
import { useFakeApi } from "@skyward/testing";
import { afterEach, describe, expect, it } from "vitest";
import { HYPERSTACK_RATE_LIMITS } from "../src/hyperstack-api.js";
import type { HyperstackClusterData } from "../src/hyperstack-environments.js";
import { Hyperstack } from "../src/hyperstack-provider.js";
import { startFakeHyperstack } from "./fake-hyperstack.js";

const signal = () => AbortSignal.timeout(20_000);
const api = useFakeApi({ start: () => startFakeHyperstack(), prefix: "skyward-hyperstack-shapes-" });

afterEach(() => {
  Object.assign(api.fake.state, {
    maxPageSize: 100,
    refuseDeleteWhileCreating: false,
    randomizePorts: false,
    loseCreateAnswers: 0,
    unknownVmList: false,
    ignorePaging: false,
  });
});

const provider = () =>
  Hyperstack({
    apiUrl: api.fake.apiUrl,
    apiKey: api.fake.apiKey,
    keysDirectory: api.keysDirectory,
    retryDelayMs: 1,
  });

async function prepared(
  hyperstack = provider(),
  poolId = "pool1",
  specOptions: Parameters<typeof resolveSpec>[0] = {},
): Promise<Cluster<HyperstackClusterData>> {
  const [offer] = await hyperstack.offers({
    query: { accelerator: { name: "A100", count: 1 }, allocation: "on-demand", region: "CANADA-1" },
    signal: signal(),
  });
  if (!offer) throw new Error("no A100 offer in CANADA-1");
  const spec = resolvePoolSpec(
    resolveSpec({
      accelerator: accelerators.A100(),
      allocation: "on-demand",
      region: "CANADA-1",
      ...specOptions,
    }),
    options({}),
  );
  return hyperstack.prepare({ spec, offer, poolId, signal: signal() });
}

describe("paging", () => {
  it("every page of environments and key pairs is read: cleanup and teardown find those past the first", async () => {
    const hyperstack = provider();
    const clusters = [
      await prepared(hyperstack, "a"),
      await prepared(hyperstack, "b"),
      await prepared(hyperstack, "c"),
    ];
    // One item a page, whatever is asked: the third environment and key pair are on page 3.
    api.fake.state.maxPageSize = 1;
    api.fake.requests.length = 0;
    const last = clusters[2] as Cluster<HyperstackClusterData>;
    // `skyward down` rebuilds a cluster from tags: no specific data, the environment found by its name.
    await hyperstack.teardown({ cluster: { ...last, specific: undefined } as never, signal: signal() });
    expect(api.fake.leftovers()).not.toContain(`environment ${last.specific.environmentName}`);
    const pages = (path: string) =>
      api.fake.requests
        .filter((request) => request.path === path)
        .map((request) => request.query.get("page"));
    expect(pages("/core/environments")).toContain("3");
    expect(pages("/core/keypairs")).toContain("3");

    const cleaned = await hyperstack.cleanup?.({ pools: "all", signal: signal() });
    expect(cleaned?.removed.map((entry) => entry.id).sort()).toEqual(
      [clusters[0], clusters[1]]
        .flatMap((cluster) => [cluster?.id, cluster?.specific.environmentName])
        .sort(),
    );
    expect(api.fake.leftovers()).toEqual([]);
  });

  it("a list that ignores the page asked for ends when a page repeats, never read 1000 times", async () => {
    const hyperstack = provider();
    await prepared(hyperstack, "d");
    await prepared(hyperstack, "e");
    api.fake.state.ignorePaging = true;
    api.fake.requests.length = 0;
    const cleaned = await hyperstack.cleanup?.({ pools: ["d", "e"], signal: signal() });
    expect(cleaned?.removed.filter((entry) => entry.kind === "environment")).toHaveLength(2);
    expect(api.fake.calls(/^\/core\/environments$/).length).toBe(2);
    expect(api.fake.leftovers()).toEqual([]);
  });
});

describe("a VM still being created", () => {
  it("refuses to be deleted for now (busy): the delete is tried again until it is gone", async () => {
    const hyperstack = provider();
    const cluster = await prepared(hyperstack);
    const [instance] = await hyperstack.provision({ cluster, count: 1, signal: signal() });
    api.fake.state.refuseDeleteWhileCreating = true;
    api.fake.requests.length = 0;
    await hyperstack.terminate({ cluster, ids: [String(instance?.id)], signal: signal() });
    const deletes = api.fake
      .calls(/^\/core\/virtual-machines\/\d+$/)
      .filter((call) => call.startsWith("DELETE"));
    expect(deletes.length).toBeGreaterThan(1);
    expect(api.fake.vms.get(Number(instance?.id))?.status).toBe("DELETING");
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(api.fake.leftovers()).toEqual([]);
  });
});

describe("port randomization", () => {
  it("a VM given random public ports though none were asked is an error naming it, never SSH on port 22", async () => {
    const hyperstack = provider();
    const cluster = await prepared(hyperstack);
    api.fake.state.randomizePorts = true;
    const [instance] = await hyperstack.provision({ cluster, count: 1, signal: signal() });
    const id = String(instance?.id);
    // Still being created, its ports' status pending: not reachable yet.
    expect(await hyperstack.getInstance({ cluster, id, signal: signal() })).toMatchObject({
      status: "pending",
      ssh: null,
    });
    const failure = await hyperstack
      .getInstance({ cluster, id, signal: signal() })
      .catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure)).toBe(true);
    expect(String((failure as Error).message)).toMatch(/random public ports .*SSH is not on port 22/);
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(api.fake.leftovers()).toEqual([]);
  });
});

describe("the base's safeguards on Hyperstack", () => {
  it("paces by the documented 500 requests a minute per IP, blocked a minute past it", () => {
    expect(rateLimitFor(HYPERSTACK_RATE_LIMITS, "create")).toEqual({
      key: "account",
      minIntervalMs: 120,
      penaltyMs: 60_000,
      burst: 500,
    });
  });

  it("a create accepted whose answer was lost is found by its name, never made twice", async () => {
    const hyperstack = provider();
    const cluster = await prepared(hyperstack);
    api.fake.state.loseCreateAnswers = 1;
    const [instance] = await hyperstack.provision({ cluster, count: 1, signal: signal() });
    const vms = [...api.fake.vms.values()].filter((vm) => vm.name.startsWith(`${cluster.id}-`));
    expect(vms.map((vm) => String(vm.id))).toEqual([instance?.id]);
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(api.fake.leftovers()).toEqual([]);
  });

  it("an on-demand flavor above maxHourlyCost is never launched", async () => {
    const hyperstack = provider();
    // n3-A100x1 costs $1.35/h on demand.
    const cluster = await prepared(hyperstack, "capped", { maxHourlyCost: 1 });
    api.fake.requests.length = 0;
    const failure = await hyperstack
      .provision({ cluster, count: 1, signal: signal() })
      .catch((error: unknown) => error);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect(String((failure as Error).message)).toMatch(/over maxHourlyCost/);
    expect(api.fake.calls(/^\/core\/virtual-machines$/).filter((call) => call.startsWith("POST"))).toEqual(
      [],
    );
    await hyperstack.teardown({ cluster, signal: signal() });
    expect(api.fake.leftovers()).toEqual([]);
  });

  it("a list of VMs in a shape it does not know is an error, not 'no instances'", async () => {
    api.fake.state.unknownVmList = true;
    const failure = await provider()
      .listInstances?.({ signal: signal() })
      .catch((error: unknown) => error);
    expect(MachineProviderError.isInstance(failure)).toBe(true);
    expect((failure as MachineProviderError).kind).toBe("unknown-answer");
  });
});
