/**
 * What real Google Cloud projects do that the plain fake did not, taught to the fake Compute Engine
 * (`fake-gce.ts`, each behaviour naming its page), and the provider's answer to each:
 *
 * - a new project's GPU quota is 0: checked before anything is made, and a 403 `quotaExceeded` is a
 *   quota to raise, not a credential problem;
 * - `maxRunDuration`: Compute Engine deletes the VM at its deadline itself, the client and the VM's
 *   own watchdog gone;
 * - series that boot from Hyperdisk only refuse `pd-balanced`;
 * - a project with OS Login on ignores `ssh-keys` unless the instance says otherwise;
 * - machine types Google does not sell on demand.
 */
import type { protos } from "@google-cloud/compute";
import { NoCapacityError, options, type PoolSpec, ProvisionError, spec } from "@skyward/core";
import { type Cluster, type Offer, type OfferQuery, resolvePoolSpec } from "@skyward/core/contract";
import { machineErrorKind } from "@skyward/provider-utils";
import { type ScratchSkywardHome, useScratchSkywardHome } from "@skyward/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GCP, type GcpClusterData } from "../src/index.js";
import { soldOnDemand } from "../src/machine-series.js";
import {
  DEFAULT_SERVICE_ACCOUNT,
  type FakeGce,
  fakeGcpSettings,
  fakeLeftovers,
  PROJECT,
  startFakeGce,
} from "./fake-gce.js";

type InsertBody = protos.google.cloud.compute.v1.IInstance;

const call = () => ({ signal: AbortSignal.timeout(60_000) });

function poolSpec(fields: Parameters<typeof spec>[0] = {}): PoolSpec {
  return resolvePoolSpec(
    spec({ nodes: 1, ttl: 60, ...fields }),
    options({ sshTimeout: 120, bootstrapTimeout: 240 }),
  );
}

describe("GCP as real projects behave (the fake Compute Engine)", () => {
  let fake: FakeGce;
  let home: ScratchSkywardHome;

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-gcp-real-");
    fake = await startFakeGce();
  });
  afterEach(() => fake.reset());
  afterAll(async () => {
    await fake?.close();
    await home?.restore();
  });

  const provider = (settings: Parameters<typeof GCP>[0] = {}) =>
    GCP({
      ...fakeGcpSettings(fake),
      ...settings,
    });
  const inserts = () =>
    fake.requests.filter((request) => request.method === "POST" && request.path.endsWith("/instances"));
  const offerOf = async (gcp: ReturnType<typeof GCP>, query: OfferQuery, instanceType: string) => {
    const offers = await gcp.offers({ query, ...call() });
    const offer = offers.find((candidate) => candidate.instanceType === instanceType);
    if (!offer) throw new Error(`no ${instanceType} among ${offers.map((o) => o.instanceType).join(", ")}`);
    return offer;
  };
  const t4: OfferQuery = { accelerator: { name: "T4", count: 1 }, allocation: "spot-if-available", vcpus: 4 };

  describe("GPU quotas", () => {
    it("a project whose GPUS_ALL_REGIONS is 0 fails in prepare, naming the quota, before anything is made", async () => {
      fake.quotaLimits.set("GPUS_ALL_REGIONS", 0);
      const gcp = provider();
      const offer = await offerOf(gcp, t4, "n1-standard-4 + 1x nvidia-tesla-t4");
      const failure = await gcp
        .prepare({ spec: poolSpec({ allocation: "spot-if-available" }), offer, ...call() })
        .catch((error: unknown) => error);
      expect(ProvisionError.isInstance(failure) && !failure.isRetryable).toBe(true);
      expect(machineErrorKind(failure)).toBe("quota");
      expect((failure as Error).message).toMatch(
        /^Compute Engine quota reached: nvidia-tesla-t4 in us-central1: GPUS_ALL_REGIONS is 0 in all regions \(0 in use\), and a node needs 1; request an increase at https:\/\/console\.cloud\.google\.com\/iam-admin\/quotas\?project=skyward-test-project \(/,
      );
      expect((failure as Error).message).not.toContain("IAM");
      expect(fakeLeftovers(fake)).toEqual([]);
      expect(fake.requests.some((request) => request.path.endsWith("/global/firewalls"))).toBe(false);
    });

    it("a market whose regional quota is 0 is skipped; a 403 quotaExceeded at insert names the quota", async () => {
      // Spot's own quota is 0: prepare admits on demand, and the spot insert's 403 gives way to it.
      fake.quotaLimits.set("us-central1 PREEMPTIBLE_NVIDIA_T4_GPUS", 0);
      const gcp = provider();
      const offer = await offerOf(gcp, t4, "n1-standard-4 + 1x nvidia-tesla-t4");
      const cluster = (await gcp.prepare({
        spec: poolSpec({ allocation: "spot-if-available" }),
        offer,
        ...call(),
      })) as Cluster<GcpClusterData>;
      const [instance] = await gcp.provision({ cluster, count: 1, ...call() });
      expect(instance?.spot).toBe(false);
      await gcp.teardown({ cluster, ...call() });

      // The quota lowered between prepare and insert (another pool took it): the insert's 403 is the quota's.
      fake.quotaLimits.delete("us-central1 PREEMPTIBLE_NVIDIA_T4_GPUS");
      const spotOnly = (await gcp.prepare({
        spec: poolSpec({ allocation: "spot" }),
        offer,
        ...call(),
      })) as Cluster<GcpClusterData>;
      fake.quotaLimits.set("GPUS_ALL_REGIONS", 0);
      const failure = await gcp
        .provision({ cluster: spotOnly, count: 1, ...call() })
        .catch((error: unknown) => error);
      expect(ProvisionError.isInstance(failure)).toBe(true);
      expect(machineErrorKind(failure)).toBe("quota");
      expect((failure as Error).message).toContain("Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.");
      expect((failure as Error).message).toContain(
        "request an increase at https://console.cloud.google.com/iam-admin/quotas",
      );
      expect((failure as Error).message).not.toContain("check the credentials");
      await gcp.teardown({ cluster: spotOnly, ...call() });
      expect(fakeLeftovers(fake)).toEqual([]);
    });
  });

  it("the price cap holds on the market launched: spot full, on demand over maxHourlyCost is never inserted", async () => {
    const gcp = provider();
    const offer = await offerOf(gcp, t4, "n1-standard-4 + 1x nvidia-tesla-t4");
    const spotPrice = offer.spotPrice as number;
    const onDemandPrice = offer.onDemandPrice as number;
    expect(onDemandPrice).toBeGreaterThan(spotPrice);
    fake.exhausted.add("spot");
    const cluster = (await gcp.prepare({
      spec: poolSpec({ allocation: "spot-if-available", maxHourlyCost: (spotPrice + onDemandPrice) / 2 }),
      offer,
      ...call(),
    })) as Cluster<GcpClusterData>;
    const failure = await gcp.provision({ cluster, count: 1, ...call() }).catch((error: unknown) => error);
    expect(NoCapacityError.isInstance(failure)).toBe(true);
    expect((failure as Error).message).toContain(`on-demand: $${onDemandPrice}/h is over maxHourlyCost`);
    expect((failure as Error).message).toContain("ZONE_RESOURCE_POOL_EXHAUSTED");
    const models = inserts().map((request) => (request.body as InsertBody).scheduling?.provisioningModel);
    expect(models).toEqual(["SPOT"]);
    await gcp.teardown({ cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  describe("checked in prepare, before anything is created", () => {
    const cpu: OfferQuery = { accelerator: null, vcpus: 2, allocation: "on-demand" };
    const refusal = async (gcp: ReturnType<typeof GCP>) => {
      const offer = await offerOf(gcp, cpu, "e2-standard-2");
      const failure = await gcp
        .prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() })
        .catch((error: unknown) => error);
      expect(fakeLeftovers(fake)).toEqual([]);
      expect(fake.requests.some((request) => request.path.endsWith("/global/firewalls"))).toBe(false);
      return failure as Error;
    };

    it("an organisation policy that forces OS Login (our key would be ignored) is refused, naming it", async () => {
      fake.requireOsLoginPolicy = true;
      const failure = await refusal(provider());
      expect(machineErrorKind(failure)).toBe("account");
      expect(failure.message).toContain(
        "the organisation policy constraints/compute.requireOsLogin is enforced on project skyward-test-project",
      );
      expect(failure.message).toContain("nothing was created");
    });

    it("a service account that does not exist, or that the caller may not act as, is refused, naming it", async () => {
      const runner = `runner@${PROJECT}.iam.gserviceaccount.com`;
      fake.missingServiceAccounts.add(runner);
      const missing = await refusal(provider({ serviceAccount: runner }));
      expect(missing.message).toContain(`the service account ${runner} the VMs would run as`);
      expect(missing.message).toContain("does not exist in project skyward-test-project");

      // The project's default account, found through projects.get, without actAs for these credentials.
      fake.actAsDenied.add(DEFAULT_SERVICE_ACCOUNT);
      const denied = await refusal(provider());
      expect(machineErrorKind(denied)).toBe("auth");
      expect(denied.message).toContain(
        `these credentials may not run VMs as the service account ${DEFAULT_SERVICE_ACCOUNT} (the project's default): they lack iam.serviceAccounts.actAs on it`,
      );
      expect(denied.message).toContain(`roles/iam.serviceAccountUser on ${DEFAULT_SERVICE_ACCOUNT}`);
      const tested = fake.requests.filter((request) => request.path.endsWith(":testIamPermissions"));
      expect(tested.at(-1)?.body).toEqual({ permissions: ["iam.serviceAccounts.actAs"] });

      // Allowed again: prepare goes on and makes the pool's firewall rules.
      fake.actAsDenied.clear();
      const offer = await offerOf(provider(), cpu, "e2-standard-2");
      const cluster = await provider().prepare({
        spec: poolSpec({ allocation: "on-demand" }),
        offer,
        ...call(),
      });
      await provider().teardown({ cluster, ...call() });
      expect(fakeLeftovers(fake)).toEqual([]);
    });
  });

  it("maxRunDuration: Compute Engine deletes the VM at its deadline, with no client and no watchdog", async () => {
    const gcp = provider({ maxRunDuration: 30 });
    const offer = await offerOf(
      gcp,
      { accelerator: null, vcpus: 2, allocation: "on-demand" },
      "e2-standard-2",
    );
    const cluster = (await gcp.prepare({
      spec: poolSpec({ allocation: "on-demand" }),
      offer,
      ...call(),
    })) as Cluster<GcpClusterData>;
    await gcp.provision({ cluster, count: 1, ...call() });
    const body = inserts()[0]?.body as InsertBody;
    expect(body.scheduling).toMatchObject({
      provisioningModel: "STANDARD",
      maxRunDuration: { seconds: "30" },
      instanceTerminationAction: "DELETE",
    });
    // The client is gone (no call of its deletes anything): 30 s later the VM is gone all the same.
    const [key, instance] = [...fake.instances.entries()][0] ?? [];
    if (!key || !instance) throw new Error("no VM");
    instance.creationTimestamp = new Date(Date.now() - 31_000).toISOString();
    const deletes = () => fake.requests.filter((request) => request.method === "DELETE").length;
    const before = deletes();
    expect(await gcp.listInstances?.(call())).toEqual([]);
    expect(deletes()).toBe(before);
    await gcp.teardown({ cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
    expect(() => GCP({ maxRunDuration: 10 })).toThrow(/maxRunDuration/);
  });

  it("a Hyperdisk-only series boots from hyperdisk-balanced; a Persistent Disk type set for it is refused first", async () => {
    const gcp = provider();
    const offer = await offerOf(
      gcp,
      { accelerator: null, vcpus: 4, allocation: "on-demand" },
      "c4-standard-4",
    );
    const cluster = await gcp.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
    await gcp.provision({ cluster, count: 1, ...call() });
    expect((inserts()[0]?.body as InsertBody | undefined)?.disks?.[0]?.initializeParams?.diskType).toBe(
      "zones/us-central1-a/diskTypes/hyperdisk-balanced",
    );
    await gcp.teardown({ cluster, ...call() });

    const pd = provider({ diskType: "pd-ssd" });
    await expect(
      pd.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() }),
    ).rejects.toThrow(/c4-standard-4 boots from Hyperdisk only, and the diskType setting is "pd-ssd"/);
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("a project with OS Login on still takes the pool's key: the instance turns it off for itself", async () => {
    fake.osLoginProject = true;
    const gcp = provider();
    const offer = await offerOf(
      gcp,
      { accelerator: null, vcpus: 2, allocation: "on-demand" },
      "e2-standard-2",
    );
    const cluster = await gcp.prepare({ spec: poolSpec({ allocation: "on-demand" }), offer, ...call() });
    await gcp.provision({ cluster, count: 1, ...call() });
    const [instance] = [...fake.instances.values()];
    if (!instance) throw new Error("no VM");
    expect(fake.acceptsSshKeys(instance)).toBe(true);
    await gcp.teardown({ cluster, ...call() });
  });

  it("offers nothing on demand that Google does not sell on demand", () => {
    // Consumption options per machine type (https://cloud.google.com/compute/docs/instances/consumption-options).
    for (const machineType of [
      "a3-highgpu-1g",
      "a3-highgpu-2g",
      "a3-highgpu-4g",
      "a3-ultragpu-8g",
      "a4-highgpu-8g",
    ])
      expect(soldOnDemand(machineType)).toBe(false);
    for (const machineType of [
      "a3-highgpu-8g",
      "a3-megagpu-8g",
      "a2-highgpu-1g",
      "g2-standard-4",
      "n1-standard-4",
    ])
      expect(soldOnDemand(machineType)).toBe(true);
  });

  it("lets a T4 have up to 48 vCPUs per GPU on N1", async () => {
    // https://cloud.google.com/compute/docs/gpus#t4-gpus: 1 T4 with up to 48 vCPUs.
    const gcp = provider();
    const offers = await gcp.offers({
      query: { accelerator: { name: "T4", count: 1 }, allocation: "on-demand" },
      ...call(),
    });
    expect(offers.map((offer: Offer) => offer.instanceType)).toContain("n1-standard-32 + 1x nvidia-tesla-t4");
  });

  it("with user credentials, reads the Catalog with the project as quota project when the API asks for one", async () => {
    fake.billingNeedsQuotaProject = true;
    const offers = await provider().offers({
      query: { accelerator: null, vcpus: 2, allocation: "on-demand" },
      ...call(),
    });
    expect(offers.length).toBeGreaterThan(0);
    expect(fake.billingQuotaProjects).toEqual([undefined, PROJECT, PROJECT]);
  });
});
