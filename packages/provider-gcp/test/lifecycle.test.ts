/**
 * The GCP provider against the fake Compute Engine, beyond the conformance suite: what it asks
 * Compute Engine for (the insert's scheduling, accelerators, metadata, labels, disk; the firewall
 * rules), spot falling back to on-demand on ZONE_RESOURCE_POOL_EXHAUSTED, cleanup keeping the rules of
 * a pool with a live VM, offers across a region's zones, paging, and settings errors.
 */

import { generateKeyPairSync } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { protos } from "@google-cloud/compute";
import { ConfigurationError, NoCapacityError, options, type PoolSpec, spec } from "@skyward/core";
// The core's offer cache itself (not exported): what pools put every offers() answer through.
import {
  type Cluster,
  cachedOffers,
  type Offer,
  type OfferQuery,
  resolvePoolSpec,
} from "@skyward/core/contract";
import { type ScratchSkywardHome, useScratchSkywardHome, whenRunning } from "@skyward/testing";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { GCP, type GcpClusterData } from "../src/index.js";
import {
  type FakeGce,
  fakeEndpoints,
  fakeGcpSettings,
  fakeLeftovers,
  PROJECT,
  startFakeGce,
  TEST_ACCESS_TOKEN,
} from "./fake-gce.js";

type InsertBody = protos.google.cloud.compute.v1.IInstance;

const call = () => ({ signal: AbortSignal.timeout(60_000) });

function poolSpec(fields: Parameters<typeof spec>[0] = {}): PoolSpec {
  return resolvePoolSpec(
    spec({ nodes: 1, ttl: 60, ...fields }),
    options({ sshTimeout: 120, bootstrapTimeout: 240 }),
  );
}

const query = (fields: Partial<OfferQuery> = {}): OfferQuery => ({
  accelerator: null,
  allocation: "spot-if-available",
  ...fields,
});

describe("the GCP provider against the fake Compute Engine", () => {
  let fake: FakeGce;
  let home: ScratchSkywardHome;

  beforeAll(async () => {
    home = await useScratchSkywardHome("skyward-gcp-lifecycle-");
    fake = await startFakeGce();
  });
  afterEach(() => fake.reset());
  afterAll(async () => {
    await fake?.close();
    await home?.restore();
  });

  const provider = () =>
    GCP({
      ...fakeGcpSettings(fake),
    });

  const inserts = () =>
    fake.requests.filter((request) => request.method === "POST" && request.path.endsWith("/instances"));

  async function start(gcp: ReturnType<typeof GCP>, wanted: OfferQuery, fields: Parameters<typeof spec>[0]) {
    const offers = await gcp.offers({ query: wanted, ...call() });
    const offer = offers[0] as Offer;
    const cluster = (await gcp.prepare({
      spec: poolSpec(fields),
      offer,
      poolId: "train",
      ...call(),
    })) as Cluster<GcpClusterData>;
    return { offer, cluster };
  }

  it("creates a spot T4 VM as Compute Engine documents it, and teardown removes it and its firewall rules", async () => {
    const gcp = provider();
    const wanted = query({ accelerator: { name: "T4", count: 1 }, allocation: "spot", vcpus: 4 });
    const { offer, cluster } = await start(gcp, wanted, { allocation: "spot", diskGb: 250 });
    expect(offer.instanceType).toBe("n1-standard-4 + 1x nvidia-tesla-t4");
    expect(offer.spotPrice).toBe(0.182);

    // prepare: two rules aimed at the pool's network tag.
    const rules = fake.requests.filter(
      (request) => request.method === "POST" && request.path.endsWith("/global/firewalls"),
    );
    expect(rules.map((request) => request.body)).toEqual([
      expect.objectContaining({
        name: `${cluster.id}-ssh`,
        direction: "INGRESS",
        sourceRanges: ["0.0.0.0/0"],
        targetTags: [cluster.id],
        allowed: [{ IPProtocol: "tcp", ports: ["22"] }],
      }),
      expect.objectContaining({
        name: `${cluster.id}-internal`,
        sourceTags: [cluster.id],
        targetTags: [cluster.id],
        allowed: [{ IPProtocol: "all" }],
      }),
    ]);

    // Handed back as Compute Engine first shows it (STAGING), with no SSH yet: the pool waits for RUNNING.
    const [launched] = await gcp.provision({ cluster, count: 1, ...call() });
    expect(launched).toMatchObject({ status: "pending", ssh: null, spot: true, hourlyPrice: 0.182 });
    const instance = await whenRunning(gcp, cluster, launched?.id ?? "");
    expect(instance).toMatchObject({ status: "running", spot: true, hourlyPrice: 0.182, offerId: offer.id });
    expect(instance?.ssh).toMatchObject({ user: "skyward", port: 22, root: "/opt/skyward" });
    expect(instance?.tags).toMatchObject({
      "skyward:cluster": cluster.id,
      "skyward:pool": "train",
      "skyward:region": "us-central1-a",
    });

    const body = inserts()[0]?.body as InsertBody;
    expect(inserts()[0]?.path).toBe(`/compute/v1/projects/${PROJECT}/zones/us-central1-a/instances`);
    expect(body.machineType).toBe("zones/us-central1-a/machineTypes/n1-standard-4");
    expect(body.guestAccelerators).toEqual([
      { acceleratorType: "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", acceleratorCount: 1 },
    ]);
    expect(body.scheduling).toEqual({
      provisioningModel: "SPOT",
      instanceTerminationAction: "DELETE",
      onHostMaintenance: "TERMINATE",
      automaticRestart: false,
    });
    expect(body.labels).toEqual({
      "skyward-cluster": cluster.id,
      "skyward-pool": "train",
      "skyward-owner": expect.stringMatching(/^[a-z0-9_-]+$/),
    });
    expect(body.tags).toEqual({ items: [cluster.id] });
    const metadata = Object.fromEntries((body.metadata?.items ?? []).map((item) => [item.key, item.value]));
    expect(metadata["ssh-keys"]).toMatch(/^skyward:ssh-ed25519 \S+ skyward$/);
    expect(metadata["startup-script"]).toContain("no worker started within 420 s of boot");
    expect(metadata["install-nvidia-driver"]).toBe("True");
    expect(JSON.parse(metadata["skyward-tags"] as string)).toMatchObject({
      "skyward:offer": offer.id,
      "skyward:spot": "1",
    });
    expect(body.disks?.[0]).toMatchObject({
      boot: true,
      autoDelete: true,
      initializeParams: {
        diskSizeGb: "250",
        diskType: "zones/us-central1-a/diskTypes/pd-balanced",
        sourceImage:
          "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570",
      },
    });
    expect(body.networkInterfaces).toEqual([
      {
        network: "global/networks/default",
        accessConfigs: [{ name: "External NAT", type: "ONE_TO_ONE_NAT" }],
      },
    ]);
    expect(body.serviceAccounts).toEqual([
      { email: "default", scopes: ["https://www.googleapis.com/auth/cloud-platform"] },
    ]);

    await gcp.teardown({ cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("every setting reaches Compute Engine: network, subnetwork, image, disk, service account, login and root", async () => {
    const gcp = GCP({
      ...fakeGcpSettings(fake),
      network: "ml-vpc",
      subnetwork: "ml-subnet",
      image: "projects/my-images/global/images/family/skyward-base",
      diskGb: 60,
      diskType: "pd-ssd",
      serviceAccount: `runner@${PROJECT}.iam.gserviceaccount.com`,
      sshUser: "ml",
      root: "/srv/skyward/",
    });
    const { cluster } = await start(gcp, query({ vcpus: 2, allocation: "on-demand" }), {
      allocation: "on-demand",
    });
    expect(cluster.ssh).toEqual({ user: "ml", identityFile: cluster.specific.identityFile, sudo: true });
    const [launched] = await gcp.provision({ cluster, count: 1, ...call() });
    const instance = await whenRunning(gcp, cluster, launched?.id ?? "");
    expect(instance?.ssh).toMatchObject({ user: "ml", root: "/srv/skyward" });
    const body = inserts()[0]?.body as InsertBody;
    expect(body.networkInterfaces?.[0]).toMatchObject({
      network: "global/networks/ml-vpc",
      subnetwork: "regions/us-central1/subnetworks/ml-subnet",
    });
    expect(body.disks?.[0]?.initializeParams).toMatchObject({
      sourceImage: "projects/my-images/global/images/family/skyward-base",
      diskSizeGb: "60",
      diskType: "zones/us-central1-a/diskTypes/pd-ssd",
    });
    expect(body.serviceAccounts?.[0]?.email).toBe(`runner@${PROJECT}.iam.gserviceaccount.com`);
    const metadata = Object.fromEntries((body.metadata?.items ?? []).map((item) => [item.key, item.value]));
    expect(metadata["ssh-keys"]).toMatch(/^ml:ssh-ed25519 \S+ ml$/);
    expect(metadata["startup-script"]).toContain(
      "for marker in /srv/skyward/worker.pid /srv/skyward/worker.log;",
    );
    const rules = fake.requests.filter(
      (request) => request.method === "POST" && request.path.endsWith("/firewalls"),
    );
    expect(rules.map((request) => request.body?.network)).toEqual([
      "global/networks/ml-vpc",
      "global/networks/ml-vpc",
    ]);
    expect(gcp.selfDestruct({ cluster, instance: instance as NonNullable<typeof instance> })).toContain(
      "sudo shutdown -h now",
    );
    // Its node reads Compute Engine's preemption and host-maintenance notices from the metadata server.
    expect(gcp.interruptionNotice?.({ cluster, instance: instance as NonNullable<typeof instance> })).toEqual(
      {
        kind: "gcp-metadata",
        endpoint: "http://metadata.google.internal",
      },
    );
    await gcp.teardown({ cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("an on-demand CPU VM live-migrates; an on-demand GPU VM stops for host maintenance", async () => {
    const gcp = provider();
    const cpu = await start(gcp, query({ allocation: "on-demand", vcpus: 2 }), { allocation: "on-demand" });
    await gcp.provision({ cluster: cpu.cluster, count: 1, ...call() });
    const l4 = await start(gcp, query({ accelerator: { name: "L4", count: 1 }, allocation: "on-demand" }), {
      allocation: "on-demand",
    });
    expect(l4.offer.instanceType).toBe("g2-standard-4");
    await gcp.provision({ cluster: l4.cluster, count: 1, ...call() });
    const [first, second] = inserts().map((request) => request.body as InsertBody);
    expect(first?.scheduling).toEqual({
      provisioningModel: "STANDARD",
      onHostMaintenance: "MIGRATE",
      automaticRestart: true,
    });
    expect(first?.disks?.[0]?.initializeParams?.sourceImage).toBe(
      "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
    );
    expect(second?.scheduling).toEqual({
      provisioningModel: "STANDARD",
      onHostMaintenance: "TERMINATE",
      automaticRestart: true,
    });
    // L4s are built into g2 machine types: nothing is attached.
    expect(second?.guestAccelerators).toBeUndefined();
    await gcp.teardown({ cluster: cpu.cluster, ...call() });
    await gcp.teardown({ cluster: l4.cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("spot without capacity falls back to on-demand; spot only fails with the zone's reason and leaves no VM", async () => {
    const gcp = provider();
    fake.exhausted.add("spot");
    const { cluster } = await start(gcp, query({ vcpus: 2 }), { allocation: "spot-if-available", nodes: 2 });
    const created = await gcp.provision({ cluster, count: 2, ...call() });
    expect(created.map((instance) => instance.spot)).toEqual([false, false]);
    expect(inserts().map((request) => (request.body as InsertBody).scheduling?.provisioningModel)).toEqual([
      "SPOT",
      "SPOT",
      "STANDARD",
      "STANDARD",
    ]);
    await gcp.teardown({ cluster, ...call() });

    const spotOnly = await start(gcp, query({ vcpus: 2, allocation: "spot" }), { allocation: "spot" });
    const error = await gcp
      .provision({ cluster: spotOnly.cluster, count: 1, ...call() })
      .catch((caught: unknown) => caught);
    expect(NoCapacityError.isInstance(error)).toBe(true);
    expect((error as NoCapacityError).message).toContain("ZONE_RESOURCE_POOL_EXHAUSTED");
    expect([...fake.instances.keys()]).toEqual([]);
    await gcp.teardown({ cluster: spotOnly.cluster, ...call() });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("cleanup keeps the firewall rules of a pool with a live VM, and removes them once it is gone", async () => {
    const gcp = provider();
    const { cluster } = await start(gcp, query({ vcpus: 2 }), {});
    const [launched] = await gcp.provision({ cluster, count: 1, ...call() });
    const instance = await whenRunning(gcp, cluster, launched?.id ?? "");
    const kept = await gcp.cleanup?.({ pools: ["train"], ...call() });
    expect(kept?.removed).toEqual([]);
    expect(kept?.left.map((entry) => [entry.kind, entry.id])).toEqual([
      ["firewall rule", `${cluster.id}-internal`],
      ["firewall rule", `${cluster.id}-ssh`],
    ]);
    expect(kept?.left[0]?.reason).toContain(`pool train still has an instance: ${instance?.id} (RUNNING)`);
    await gcp.terminate({ cluster, ids: [instance?.id ?? ""], ...call() });
    const cleaned = await gcp.cleanup?.({ pools: "all", waitSeconds: 30, ...call() });
    expect(cleaned).toEqual({
      removed: [
        { poolId: "train", kind: "firewall rule", id: `${cluster.id}-internal` },
        { poolId: "train", kind: "firewall rule", id: `${cluster.id}-ssh` },
      ],
      left: [],
    });
    expect(fakeLeftovers(fake)).toEqual([]);
  });

  it("the A2 series' A100s are SXM: a form factor asked for is honoured, other GPUs say none", async () => {
    const gcp = provider();
    const a100 = (formFactor?: string) =>
      gcp.offers({
        query: query({
          region: "us-central1-a",
          accelerator: { name: "A100", count: 1, ...(formFactor ? { formFactor } : {}) },
        }),
        ...call(),
      });
    const sxm = await a100("SXM");
    expect(sxm.map((offer) => [offer.instanceType, offer.accelerator?.formFactor])).toEqual([
      ["a2-highgpu-1g", "SXM"],
    ]);
    // Compute Engine has no PCIe A100 (the fixtures' machine types are Google's documented ones).
    expect(await a100("PCIe")).toEqual([]);
    expect((await a100()).map((offer) => offer.instanceType)).toEqual(["a2-highgpu-1g"]);
    const t4 = await gcp.offers({
      query: query({ region: "us-central1-a", accelerator: { name: "T4", count: 1 } }),
      ...call(),
    });
    expect(t4.length).toBeGreaterThan(0);
    expect(t4.every((offer) => offer.accelerator?.formFactor === undefined)).toBe(true);
  });

  it("a region's offers come from each of its zones; a zone's from that zone; machine types are read page by page", async () => {
    const gcp = provider();
    const region = await gcp.offers({ query: query({ region: "us-central1", vcpus: 4 }), ...call() });
    expect(new Set(region.map((offer) => offer.region))).toEqual(new Set(["us-central1-a", "us-central1-b"]));
    const zone = await gcp.offers({ query: query({ region: "us-central1-b", vcpus: 4 }), ...call() });
    expect(zone.map((offer) => offer.id)).toEqual(["gcp:us-central1-b:n1-standard-4"]);
    // europe-west4 has machine types but no prices in the Catalog: no offer.
    expect(await gcp.offers({ query: query({ region: "europe-west4-a" }), ...call() })).toEqual([]);
    const pages = fake.requests.filter((request) =>
      request.path.endsWith("/zones/us-central1-a/machineTypes"),
    );
    expect(pages.map((request) => request.query.get("pageToken") ?? "")).toEqual(["", "5", "10"]);
    const skuPages = fake.requests.filter((request) => request.path.endsWith("/skus"));
    expect(skuPages.map((request) => request.query.get("pageToken") ?? "")).toEqual(["", "1"]);
  });

  it("a service-account key file signs every call (a self-signed JWT) and names the project", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const email = `skyward@${PROJECT}.iam.gserviceaccount.com`;
    fake.serviceAccounts.set(email, publicKey.export({ type: "spki", format: "pem" }).toString());
    const keyFile = join(home.path, "service-account.json");
    // The key file's format: https://cloud.google.com/iam/docs/keys-create-delete#creating
    await writeFile(
      keyFile,
      JSON.stringify({
        type: "service_account",
        project_id: PROJECT,
        private_key_id: "0123456789abcdef0123456789abcdef01234567",
        private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        client_email: email,
        client_id: "100000000000000000001",
        auth_uri: "https://accounts.google.com/o/oauth2/auth",
        token_uri: `${fake.endpoint}/token`,
      }),
      { mode: 0o600 },
    );
    const saved = process.env.GOOGLE_OAUTH_ACCESS_TOKEN;
    delete process.env.GOOGLE_OAUTH_ACCESS_TOKEN;
    try {
      const gcp = GCP({
        credentialsFile: keyFile,
        ...fakeEndpoints(fake),
      });
      const offers = await gcp.offers({ query: query({ vcpus: 2 }), ...call() });
      expect(offers.length).toBeGreaterThan(0);
      expect(fake.requests.length).toBeGreaterThan(0);
      // Every call, the Catalog's included, carried the account's JWT (the fake checked its signature);
      // none went to a token endpoint.
      for (const request of fake.requests) {
        const payload = (request.authorization ?? "").split(".")[1] ?? "";
        expect(JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))).toMatchObject({ iss: email });
      }
      expect(fake.requests.filter((request) => request.path === "/token")).toEqual([]);
      expect(
        fake.requests.some((request) => request.path.startsWith(`/compute/v1/projects/${PROJECT}/`)),
      ).toBe(true);

      // Another kind of credentials file is refused, naming the setting, before any call.
      const userFile = join(home.path, "authorized-user.json");
      await writeFile(
        userFile,
        JSON.stringify({ type: "authorized_user", client_id: "x", refresh_token: "y" }),
      );
      fake.requests.length = 0;
      const refused = await GCP({ project: PROJECT, credentialsFile: userFile, apiEndpoint: fake.endpoint })
        .offers({ query: query(), ...call() })
        .catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(refused)).toBe(true);
      expect((refused as ConfigurationError).issues[0]?.path).toBe("GCP.credentialsFile");
      expect(fake.requests).toEqual([]);
    } finally {
      if (saved !== undefined) process.env.GOOGLE_OAUTH_ACCESS_TOKEN = saved;
      fake.serviceAccounts.clear();
    }
  });

  describe("the offer cache", () => {
    // The core caches offers on disk by provider name and cacheKey (for a day: a catalogue). A provider
    // of another project must not be handed the offers cached for this one, even when the project is
    // not a setting but comes from the environment or the credentials file: the first caches its
    // offers, then the second is asked through the same cache (the core's own code).
    const projectVariables = ["GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"];
    const OTHER_PROJECT = "other-project-42";
    const wanted = query({ vcpus: 2 });
    const otherProjectAsked = () =>
      fake.requests.some((request) => request.path.startsWith(`/compute/v1/projects/${OTHER_PROJECT}/`));

    beforeEach(async () => {
      await rm(join(home.path, "offers"), { recursive: true, force: true });
      for (const name of [...projectVariables, "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN"])
        vi.stubEnv(name, undefined);
    });
    afterEach(() => {
      vi.unstubAllEnvs();
    });

    it("is not shared by providers of another project named in GOOGLE_CLOUD_PROJECT", async () => {
      const gcp = () => GCP({ accessToken: TEST_ACCESS_TOKEN, ...fakeEndpoints(fake) });
      vi.stubEnv("GOOGLE_CLOUD_PROJECT", PROJECT);
      expect((await cachedOffers(gcp(), wanted, call())).length).toBeGreaterThan(0);
      vi.stubEnv("GOOGLE_CLOUD_PROJECT", OTHER_PROJECT);
      // The other project's machine types are asked for: the fake knows no such project (404).
      await expect(cachedOffers(gcp(), wanted, call())).rejects.toThrow(/not found/i);
      expect(otherProjectAsked()).toBe(true);
    });

    it("is not shared by providers of another project named in the credentials file", async () => {
      // Only `project_id` is read from the file here: the calls carry the access token.
      const keyFile = async (name: string, project: string) => {
        const file = join(home.path, name);
        await writeFile(file, JSON.stringify({ type: "service_account", project_id: project }), {
          mode: 0o600,
        });
        return file;
      };
      const gcp = (credentialsFile: string) =>
        GCP({
          credentialsFile,
          accessToken: TEST_ACCESS_TOKEN,
          ...fakeEndpoints(fake),
        });
      const first = await keyFile("first.json", PROJECT);
      const other = await keyFile("other.json", OTHER_PROJECT);
      expect((await cachedOffers(gcp(first), wanted, call())).length).toBeGreaterThan(0);
      await expect(cachedOffers(gcp(other), wanted, call())).rejects.toThrow(/not found/i);
      expect(otherProjectAsked()).toBe(true);
    });
  });

  it("settings are checked at once, and a missing project is reported before anything is asked", async () => {
    expect(() => GCP({ zone: "us-central1" })).toThrow(ConfigurationError);
    expect(() => GCP({ diskGb: 5 } as never)).toThrow(/GCP.diskGb: expected at least 10 GB/);
    expect(() => GCP({ apiEndpoint: "ftp://x" })).toThrow(/GCP.apiEndpoint/);
    expect(() => GCP({ nope: 1 } as never)).toThrow(/GCP.nope: unknown field/);
    const saved = { ...process.env };
    for (const name of [
      "GOOGLE_CLOUD_PROJECT",
      "GCLOUD_PROJECT",
      "CLOUDSDK_CORE_PROJECT",
      "GOOGLE_APPLICATION_CREDENTIALS",
    ])
      delete process.env[name];
    try {
      const gcp = GCP({
        accessToken: TEST_ACCESS_TOKEN,
        ...fakeEndpoints(fake),
      });
      const error = await gcp.offers({ query: query(), ...call() }).catch((caught: unknown) => caught);
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).issues[0]?.path).toBe("GCP.project");
      expect(fake.requests).toEqual([]);
    } finally {
      process.env = saved;
    }
  });
});
