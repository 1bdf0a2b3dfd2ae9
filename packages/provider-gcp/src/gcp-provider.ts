import type { protos } from "@google-cloud/compute";
import {
  type Cluster,
  type ClusterFromTags,
  type Instance,
  type LeftPoolResource,
  NoCapacityError,
  type Offer,
  type OfferQuery,
  type PoolResource,
  type ProviderV1,
  ProvisionError,
  type RecordedCluster,
} from "@skyward/core/contract";
import {
  createClusterId,
  filterOffers,
  hourlyPriceFromTags,
  type Market,
  marketsFor,
  ownerTag,
  poolIdFromTags,
  requireOwnOffer,
  SKYWARD_TAGS,
  skywardKeysDirectory,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import {
  ensureSshKeyPair,
  findSshIdentityFile,
  launchSshWorker,
  reconnectThroughGetInstance,
} from "@skyward/ssh";
import { GCP_ACCELERATOR_TYPES, GPU_COUNTS } from "./accelerators.js";
import {
  createFirewall,
  deleteFirewall,
  firewallRulesOf,
  firewallTags,
  type RawFirewall,
} from "./firewalls.js";
import {
  createClientFactory,
  exceededQuota,
  type GcpClients,
  gcpCall,
  PROVIDER_NAME,
  projectOf,
  quotaError,
  sleep,
  translateGcpError,
  waitForOperation,
} from "./gcp-api.js";
import {
  bootDiskType,
  bundledLocalSsdGb,
  pricingSeriesOf,
  seriesOf,
  soldOnDemand,
} from "./machine-series.js";
import type { GcpClusterData, GcpOfferData } from "./offer-data.js";
import { fetchPriceBook, type PriceBook, vmPrice } from "./prices.js";
import { marketsWithGpuQuota } from "./quotas.js";
import {
  type GcpInstanceAddresses,
  type GcpSettings,
  type GcpSshAddressMapping,
  isZone,
  type ResolvedGcpSettings,
  resolveGcpSettings,
} from "./settings.js";
import { bootWatchdogSeconds, renderStartupScript, selfDeleteCommand } from "./startup-script.js";
import { instanceResource } from "./vm-resource.js";

export type { GcpClusterData, GcpOfferData } from "./offer-data.js";

import {
  clusterFilter,
  deleteVms,
  GCP_LABELS,
  getVm,
  listVms,
  networkPath,
  noAutoPages,
  type RawInstance,
  regionOfZone,
  statusOf,
  tagsOf,
  vmName,
  waitWhilePending,
} from "./vms.js";

export { GCP_LABELS, labelValue, TAGS_METADATA_KEY } from "./vms.js";

type RawMachineType = protos.google.cloud.compute.v1.IMachineType;
type RawAcceleratorType = protos.google.cloud.compute.v1.IAcceleratorType;

/** The boot image of CPU VMs when none is set. */
export const DEFAULT_CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts";
/** The boot image of Arm CPU VMs (T2A, C4A) when none is set. */
export const DEFAULT_ARM_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts-arm64";
/** The boot image of GPU VMs when none is set: a Deep Learning VM image (NVIDIA driver, CUDA 12.8). */
export const DEFAULT_GPU_IMAGE =
  "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570";

const _SCOPES = ["https://www.googleapis.com/auth/cloud-platform"];
/** Operation error codes that mean "no capacity here now" (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability). */
const CAPACITY_CODES = /ZONE_RESOURCE_POOL_EXHAUSTED|RESOURCE_POOL_EXHAUSTED|STOCKOUT|UNAVAILABLE/;
/** The longest teardown waits for VMs to go. */
const TEARDOWN_LIMIT_MS = 15 * 60_000;
/** How long the Catalog's prices are kept. */
const PRICE_BOOK_TTL_MS = 60 * 60_000;

/**
 * The GCP provider: `GCP()` uses the defaults (zone `us-central1-a`, Application Default
 * Credentials, the project from the environment). Settings are validated at once (a
 * `ConfigurationError` names the field); credentials and the project are looked up on the first
 * call that needs them.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { GCP } from "@skyward/provider-gcp";
 *
 * await using pool = await sky.compute({ provider: GCP({ zone: "us-central1-a" }), accelerator: sky.accelerators.L4() });
 * ```
 */
export function GCP(settings: GcpSettings = {}): ProviderV1<GcpClusterData> {
  return build(resolveGcpSettings(settings, "GCP"));
}

/**
 * Creates the provider from a `skyward.toml` table (`[providers.x]` with `type = "gcp"`), its keys
 * already in camelCase: `project`, `zone`, `credentialsFile`, `accessToken`, `apiEndpoint`,
 * `billingEndpoint`, `network`, `subnetwork`, `image`, `sshUser`, `root`, `diskGb`, `diskType`,
 * `maxRunDuration`, `serviceAccount`, `keysDirectory`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<GcpClusterData> {
  return build(resolveGcpSettings(settings, ""));
}

function build(settings: ResolvedGcpSettings): ProviderV1<GcpClusterData> {
  const clientsOf = createClientFactory(settings);
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const mappings = new Map<string, GcpSshAddressMapping>();
  const zoneCatalog = new Map<
    string,
    Promise<{ machineTypes: RawMachineType[]; acceleratorTypes: RawAcceleratorType[] }>
  >();
  let priceBook: { book: Promise<PriceBook>; at: number } | undefined;
  /** The project of the offer cache's key, found on the first read of the key. */
  let keyProject: string | undefined;

  const pricesOf = (clients: GcpClients, signal: AbortSignal): Promise<PriceBook> => {
    if (!priceBook || Date.now() - priceBook.at > PRICE_BOOK_TTL_MS) {
      const book = fetchPriceBook(clients, signal);
      priceBook = { book, at: Date.now() };
      book.catch(() => {
        priceBook = undefined;
      });
    }
    return priceBook.book;
  };

  const catalogOf = (clients: GcpClients, zone: string, signal: AbortSignal) => {
    let known = zoneCatalog.get(zone);
    if (!known) {
      // Kept for the provider's life: a zone's machine and accelerator types do not change while a program runs.
      known = (async () => {
        const machineTypes: RawMachineType[] = [];
        const acceleratorTypes: RawAcceleratorType[] = [];
        await gcpCall(`listing machine types in ${zone}`, signal, async () => {
          for await (const entry of clients.machineTypes.listAsync(
            { project: clients.project, zone },
            noAutoPages(),
          ))
            machineTypes.push(entry);
        });
        await gcpCall(`listing accelerator types in ${zone}`, signal, async () => {
          for await (const entry of clients.acceleratorTypes.listAsync(
            { project: clients.project, zone },
            noAutoPages(),
          ))
            acceleratorTypes.push(entry);
        });
        return { machineTypes, acceleratorTypes };
      })();
      zoneCatalog.set(zone, known);
      known.catch(() => zoneCatalog.delete(zone));
    }
    return known;
  };

  /** The zones a query's offers come from: its zone, its region's zones that are up, or the setting's. */
  const zonesFor = async (clients: GcpClients, region: string | undefined, signal: AbortSignal) => {
    if (region === undefined) return [settings.zone];
    if (isZone(region)) return [region];
    const zones: string[] = [];
    await gcpCall("listing zones", signal, async () => {
      for await (const zone of clients.zones.listAsync({ project: clients.project }, noAutoPages())) {
        if (zone.name && zone.status !== "DOWN" && zone.region?.split("/").pop() === region)
          zones.push(zone.name);
      }
    });
    return zones.sort();
  };

  const offersInZone = async (
    clients: GcpClients,
    zone: string,
    query: OfferQuery,
    book: PriceBook,
    signal: AbortSignal,
  ): Promise<Offer[]> => {
    const { machineTypes, acceleratorTypes } = await catalogOf(clients, zone, signal);
    const region = regionOfZone(zone);
    const offers: Offer[] = [];
    const usable = machineTypes.filter(
      (type) => type.name && !type.isSharedCpu && !type.deprecated?.state && (type.guestCpus ?? 0) > 0,
    );
    const add = (type: RawMachineType, gpu: { type: string; count: number } | null, attached: boolean) => {
      const name = type.name as string;
      const known = gpu ? GCP_ACCELERATOR_TYPES[gpu.type] : undefined;
      if (gpu && !known) return;
      const vcpus = type.guestCpus ?? 0;
      const memoryGib = (type.memoryMb ?? 0) / 1024;
      const parts = {
        series: pricingSeriesOf(name),
        vcpus,
        memoryGib,
        gpu: gpu && known ? { skuNames: known.skuNames, count: gpu.count } : null,
        localSsdGb: bundledLocalSsdGb(name),
      };
      // Machine types Google does not sell on demand get no on-demand price, so no on-demand offer.
      const onDemandPrice = soldOnDemand(name) ? vmPrice(book, region, "on-demand", parts) : null;
      const spotPrice = vmPrice(book, region, "spot", parts);
      if (onDemandPrice === null && spotPrice === null) return;
      const architecture = String(type.architecture ?? "").toUpperCase() === "ARM64" ? "arm64" : "x86_64";
      offers.push(
        Object.freeze({
          id: `gcp:${zone}:${name}${attached && gpu ? `+${gpu.type}x${gpu.count}` : ""}`,
          provider: PROVIDER_NAME,
          instanceType: attached && gpu ? `${name} + ${gpu.count}x ${gpu.type}` : name,
          accelerator:
            gpu && known
              ? Object.freeze({
                  name: known.name,
                  count: gpu.count,
                  memoryGb: known.memoryGb,
                  ...(known.formFactor === undefined ? {} : { formFactor: known.formFactor }),
                })
              : null,
          vcpus,
          memoryGb: Math.round(memoryGib * 100) / 100,
          architecture,
          region: zone,
          spotPrice,
          onDemandPrice,
          billingUnit: "second" as const,
          pricesAsOf: book.asOf,
          specific: Object.freeze({
            zone,
            machineType: name,
            acceleratorType: attached && gpu ? gpu.type : null,
            acceleratorCount: attached && gpu ? gpu.count : 0,
            gpu: gpu !== null,
            gpuType: gpu?.type ?? null,
            gpuCount: gpu?.count ?? 0,
          } satisfies GcpOfferData),
        }),
      );
    };
    const wanted = query.accelerator;
    if (wanted === null) {
      for (const type of usable) if (!type.accelerators?.length) add(type, null, false);
      return offers;
    }
    // GPUs built into accelerator-optimized machine types (A2, A3, G2).
    for (const type of usable) {
      const built = type.accelerators?.[0];
      if (built?.guestAcceleratorType && built.guestAcceleratorCount)
        add(type, { type: built.guestAcceleratorType, count: built.guestAcceleratorCount }, false);
    }
    // GPUs attached to N1 machine types: the zone's accelerator types no machine type has built in.
    if (!GPU_COUNTS.includes(wanted.count)) return offers;
    const builtIn = new Set(
      usable.flatMap((type) => (type.accelerators ?? []).map((entry) => entry.guestAcceleratorType)),
    );
    for (const accelerator of acceleratorTypes) {
      const name = accelerator.name ?? "";
      const known = GCP_ACCELERATOR_TYPES[name];
      if (!known?.n1VcpusPerGpu || builtIn.has(name) || known.name !== wanted.name.toUpperCase()) continue;
      if (wanted.count > (accelerator.maximumCardsPerInstance ?? 0)) continue;
      const maxVcpus = Math.min(96, known.n1VcpusPerGpu * wanted.count);
      for (const type of usable) {
        if (seriesOf(type.name as string) !== "N1" || type.accelerators?.length) continue;
        if ((type.guestCpus ?? 0) > maxVcpus) continue;
        add(type, { type: name, count: wanted.count }, true);
      }
    }
    return offers;
  };

  const mappingOf = (addresses: GcpInstanceAddresses): GcpSshAddressMapping | undefined => {
    if (!settings.sshAddress) return undefined;
    let mapping = mappings.get(addresses.id);
    if (!mapping) {
      mapping = settings.sshAddress(addresses);
      mappings.set(addresses.id, mapping);
    }
    return mapping;
  };

  /** A VM as a Skyward instance; SSH coordinates once it runs. */
  const toInstance = (
    raw: RawInstance,
    identityFile: string | undefined,
    fallbackOfferId: string,
  ): Instance => {
    const id = raw.name ?? "";
    const tags = tagsOf(raw);
    const nic = raw.networkInterfaces?.[0];
    const publicIp = nic?.accessConfigs?.[0]?.natIP ?? null;
    const status = statusOf(raw);
    const mapping =
      status === "running" ? mappingOf({ id, publicIp, privateIp: nic?.networkIP ?? null }) : undefined;
    const privateIp = mapping?.privateIp ?? nic?.networkIP ?? null;
    const host = mapping?.host ?? publicIp;
    const ssh =
      status === "running" && host
        ? Object.freeze({
            host,
            port: mapping?.port ?? 22,
            user: mapping?.user ?? settings.sshUser,
            ...(mapping?.privateKey !== undefined
              ? { privateKey: mapping.privateKey }
              : identityFile !== undefined
                ? { identityFile }
                : {}),
            ...(mapping?.hostKeyFingerprint !== undefined
              ? { hostKeyFingerprint: mapping.hostKeyFingerprint }
              : {}),
            root: mapping?.root ?? settings.root,
          })
        : null;
    const created = Date.parse(raw.creationTimestamp ?? "");
    return Object.freeze({
      id,
      status: sshReachableStatus(status, ssh),
      publicIp,
      privateIp,
      ssh,
      spot: raw.scheduling?.provisioningModel === "SPOT" || raw.scheduling?.preemptible === true,
      hourlyPrice: hourlyPriceFromTags(tags),
      offerId: tags[SKYWARD_TAGS.offer] ?? fallbackOfferId,
      createdAt: Number.isFinite(created) ? created : Date.now(),
      tags: Object.freeze(tags),
    });
  };

  /** The cluster's zone; a cluster rebuilt from an instance's tags (`skyward down`) has only its region tag. */
  const zoneOf = (
    cluster: Cluster<GcpClusterData> | RecordedCluster<GcpClusterData> | ClusterFromTags,
  ): string => cluster.specific?.zone ?? (isZone(cluster.region ?? "") ? cluster.region : settings.zone);

  return {
    specificationVersion: "v1",
    name: PROVIDER_NAME,
    // The Catalog's list prices change seldom: the core may cache offers for a day.
    capabilities: Object.freeze({ spot: true, offerCache: "catalogue" }),
    // Every setting the offers depend on: the zone, the two APIs asked, and the project whose zones and
    // machine types are listed, also when it comes from the environment or the credentials file (read
    // when the core first asks, as the clients are made on first use; not a secret). Not the network,
    // image, disk, login or service account: they shape the VM, not the offers.
    get cacheKey() {
      keyProject ??= projectOf(settings);
      return JSON.stringify([
        settings.zone,
        keyProject ?? null,
        settings.apiEndpoint ?? null,
        settings.billingEndpoint ?? null,
      ]);
    },

    async offers({ query, signal }) {
      if (query.accelerator && !Number.isInteger(query.accelerator.count)) return [];
      const clients = clientsOf();
      const book = await pricesOf(clients, signal);
      const zones = await zonesFor(clients, query.region, signal);
      const offers: Offer[] = [];
      for (const zone of zones) offers.push(...(await offersInZone(clients, zone, query, book, signal)));
      return filterOffers(offers, query);
    },

    async prepare({ spec, offer, poolId, signal }) {
      requireOwnOffer(offer, PROVIDER_NAME, "GCP");
      const data = offer.specific as Partial<GcpOfferData>;
      if (typeof data.zone !== "string" || typeof data.machineType !== "string")
        throw new ProvisionError({
          provider: PROVIDER_NAME,
          message: `offer ${offer.id} carries no zone and machine type`,
        });
      const diskType = bootDiskType(data.machineType, settings.diskType);
      if (typeof diskType !== "string")
        throw new ProvisionError({ provider: PROVIDER_NAME, message: diskType.refused, isRetryable: false });
      const clients = clientsOf();
      // A GPU pool no market's quota admits fails here, before anything is made, naming the quotas.
      if (typeof data.gpuType === "string" && (data.gpuCount ?? 0) > 0)
        await marketsWithGpuQuota(
          clients,
          {
            region: regionOfZone(data.zone),
            acceleratorType: data.gpuType,
            gpusPerNode: data.gpuCount ?? 0,
            markets: marketsFor(spec.allocation, offer),
          },
          signal,
        );
      const keys = await ensureSshKeyPair(keysDirectory(), "gcp_ed25519");
      const clusterId = createClusterId("sky");
      const zone = data.zone;
      const tags = skywardTags({ cluster: clusterId, pool: poolId ?? "", region: zone, owner: ownerTag() });
      const networkTag = clusterId;
      const description = JSON.stringify(tags);
      const rules: RawFirewall[] = [
        {
          name: `${clusterId}-ssh`,
          description,
          network: networkPath(settings.network),
          direction: "INGRESS",
          sourceRanges: ["0.0.0.0/0"],
          targetTags: [networkTag],
          allowed: [{ IPProtocol: "tcp", ports: ["22"] }],
        },
        {
          // Nodes talk to each other freely (head services, NCCL/gloo) on their internal addresses.
          name: `${clusterId}-internal`,
          description,
          network: networkPath(settings.network),
          direction: "INGRESS",
          sourceTags: [networkTag],
          targetTags: [networkTag],
          allowed: [{ IPProtocol: "all" }],
        },
      ];
      const created: string[] = [];
      try {
        for (const rule of rules) {
          await createFirewall(clients, rule, signal);
          created.push(rule.name as string);
        }
      } catch (error) {
        // Leave nothing behind: what this attempt created goes (with a fresh deadline, the signal may be spent).
        const cleanup = AbortSignal.timeout(60_000);
        for (const name of created) await deleteFirewall(clients, name, cleanup).catch(() => false);
        throw error;
      }
      return Object.freeze({
        id: clusterId,
        provider: PROVIDER_NAME,
        poolId: poolId ?? "",
        region: zone,
        spec,
        offer,
        ssh: Object.freeze({
          user: settings.sshUser,
          identityFile: keys.identityFile,
          sudo: settings.sshUser !== "root",
        }),
        specific: Object.freeze({
          project: clients.project,
          zone,
          networkTag,
          firewallRules: Object.freeze(rules.map((rule) => rule.name as string)),
          publicKey: keys.publicKey,
          identityFile: keys.identityFile,
          image:
            settings.image ??
            (data.gpu
              ? DEFAULT_GPU_IMAGE
              : offer.architecture === "arm64"
                ? DEFAULT_ARM_IMAGE
                : DEFAULT_CPU_IMAGE),
          diskGb: Math.max(settings.diskGb, Math.ceil(spec.diskGb ?? 0)),
          tags: Object.freeze(tags),
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      const { spec, offer, specific } = cluster;
      const _data = offer.specific as unknown as GcpOfferData;
      const clients = clientsOf();
      const zone = specific.zone;
      const startupScript = renderStartupScript({ root: settings.root, seconds: bootWatchdogSeconds(spec) });
      const created: string[] = [];
      const reasons: string[] = [];

      const quotaReasons: string[] = [];
      const insert = async (market: Market): Promise<string | { noCapacity: string }> => {
        const name = vmName(cluster.id);
        const resource = instanceResource(settings, cluster, market, name, startupScript);
        let operation: Parameters<typeof waitForOperation>[1];
        try {
          const [answer] = await gcpCall(`creating instance ${name}`, signal, () =>
            clients.instances.insert({ project: clients.project, zone, instanceResource: resource }),
          );
          operation = answer.latestResponse;
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          // A quota is per market (spot has its own): the next market may still have room.
          const quota = exceededQuota(error);
          if (quota !== undefined) {
            quotaReasons.push(`${market}: ${quota.message}`);
            return { noCapacity: `quota: ${quota.message}` };
          }
          if (CAPACITY_CODES.test(message)) return { noCapacity: message };
          throw translateGcpError(error, `creating instance ${name}`, signal, clients.project);
        }
        created.push(name);
        const outcome = await waitForOperation(clients, operation, { zone }, signal);
        const failure = outcome.errors[0];
        if (failure) {
          const text = `${failure.code}: ${failure.message}`;
          if (failure.code === "QUOTA_EXCEEDED") {
            quotaReasons.push(`${market}: ${failure.message}`);
            return { noCapacity: `quota: ${failure.message}` };
          }
          if (CAPACITY_CODES.test(failure.code)) return { noCapacity: text };
          throw new ProvisionError({
            provider: PROVIDER_NAME,
            message: `creating instance ${name}: ${text}`,
          });
        }
        return name;
      };

      const cleanUp = () =>
        deleteVms(clients, zone, created, AbortSignal.timeout(60_000)).catch(() => undefined);
      const ready: string[] = [];
      try {
        // Spot and on-demand in the allocation's order; a market without capacity gives way to the next.
        const markets = marketsFor(spec.allocation, offer);
        for (const market of markets) {
          const missing = count - ready.length;
          if (missing <= 0) break;
          // Every insert is let finish, so that a failed one leaves no other VM half made and unknown.
          const outcomes = await Promise.allSettled(Array.from({ length: missing }, () => insert(market)));
          const failed = outcomes.find((outcome) => outcome.status === "rejected");
          if (failed) throw failed.reason;
          for (const outcome of outcomes) {
            if (outcome.status !== "fulfilled") continue;
            if (typeof outcome.value === "string") ready.push(outcome.value);
            else reasons.push(`${market}: ${outcome.value.noCapacity}`);
          }
        }
      } catch (error) {
        await cleanUp();
        throw error;
      }
      if (ready.length === 0) {
        await cleanUp();
        // Every market met a quota: no capacity would come later, only a quota increase.
        if (quotaReasons.length > 0 && quotaReasons.length === reasons.length)
          throw quotaError(clients.project, `${offer.instanceType} in ${zone}: ${quotaReasons.join("; ")}`);
        throw new NoCapacityError({
          attempts: (reasons.length > 0 ? reasons : ["no market to try"]).map((reason) => ({
            provider: PROVIDER_NAME,
            offer: offer.instanceType,
            reason,
          })),
        });
      }
      // The pool connects right away, so VMs are handed back running, with their addresses.
      let seen: RawInstance[];
      try {
        seen = await waitWhilePending(
          clients,
          zone,
          ready,
          Date.now() + spec.provisionTimeout * 1000,
          signal,
        );
      } catch (error) {
        await cleanUp();
        throw error;
      }
      const running = seen.filter((raw) => raw.status === "RUNNING");
      const notRunning = created.filter((name) => !running.some((raw) => raw.name === name));
      if (notRunning.length > 0)
        await deleteVms(clients, zone, notRunning, AbortSignal.timeout(60_000)).catch(() => undefined);
      if (running.length === 0) {
        throw new NoCapacityError({
          attempts: [
            {
              provider: PROVIDER_NAME,
              offer: offer.instanceType,
              reason: `no instance reached RUNNING within ${spec.provisionTimeout} s: ${seen.map((raw) => `${raw.name}: ${raw.status}`).join("; ") || "none found"}`,
            },
          ],
        });
      }
      return running.map((raw) => toInstance(raw, specific.identityFile, offer.id));
    },

    async getInstance({ cluster, id, signal }) {
      if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(id)) return null;
      const raw = await getVm(clientsOf(), zoneOf(cluster), id, signal);
      return raw ? toInstance(raw, cluster.specific?.identityFile, cluster.offer?.id ?? "") : null;
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ cluster, ids, signal }) {
      await deleteVms(clientsOf(), zoneOf(cluster), ids, signal);
    },

    async teardown({ cluster, signal: callSignal }) {
      const signal = AbortSignal.any([callSignal, AbortSignal.timeout(TEARDOWN_LIMIT_MS)]);
      const deadline = Date.now() + TEARDOWN_LIMIT_MS;
      const clients = clientsOf();
      // Found by label, teardown also works for a cluster rebuilt from an instance's tags (`skyward down`).
      let live = await listVms(clients, clusterFilter(cluster.id), signal);
      const byZone = new Map<string, string[]>();
      for (const raw of live) {
        const zone = raw.zone?.split("/").pop() ?? zoneOf(cluster);
        byZone.set(zone, [...(byZone.get(zone) ?? []), raw.name ?? ""]);
      }
      for (const [zone, names] of byZone) await deleteVms(clients, zone, names, signal);
      let interval = 500;
      while (live.length > 0) {
        live = await listVms(clients, clusterFilter(cluster.id), signal);
        if (live.length === 0) break;
        if (Date.now() >= deadline)
          throw new ProvisionError({
            provider: PROVIDER_NAME,
            message: `instances of cluster ${cluster.id} are still not deleted after ${TEARDOWN_LIMIT_MS / 60_000} min; its firewall rules are left`,
            isRetryable: true,
          });
        await sleep(interval, signal);
        interval = Math.min(interval * 2, 10_000);
      }
      const names = new Set([
        `${cluster.id}-ssh`,
        `${cluster.id}-internal`,
        ...(cluster.specific?.firewallRules ?? []),
      ]);
      for (const name of names) await deleteFirewall(clients, name, signal);
    },

    selfDestruct({ instance }) {
      if (settings.sshAddress) {
        // A stand-in host of a test is not the VM: it must never be shut down.
        const mapping = mappingOf({
          id: instance.id,
          publicIp: instance.publicIp,
          privateIp: instance.privateIp,
        });
        return mapping?.selfDestruct ?? "true";
      }
      return selfDeleteCommand({ sudo: settings.sshUser !== "root" });
    },

    async cleanup(options) {
      const { signal } = options;
      const waitSeconds = Math.max(0, options.waitSeconds ?? 0);
      const deadline = Date.now() + waitSeconds * 1000;
      const clients = clientsOf();
      const wanted = options.pools === "all" ? undefined : new Set(options.pools);
      // Only what Skyward made carries its tags in the description.
      const clusters = new Map<string, { poolId: string; rules: string[] }>();
      for (const rule of await firewallRulesOf(clients, signal)) {
        const tags = firewallTags(rule);
        const clusterId = tags?.[SKYWARD_TAGS.cluster];
        if (!tags || !clusterId || !rule.name) continue;
        const poolId = poolIdFromTags(tags);
        if (wanted && !wanted.has(poolId) && !wanted.has(clusterId)) continue;
        const entry = clusters.get(clusterId) ?? { poolId, rules: [] };
        entry.rules.push(rule.name);
        clusters.set(clusterId, entry);
      }
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      const kind = "firewall rule";
      await Promise.all(
        [...clusters.entries()].map(async ([clusterId, { poolId, rules }]) => {
          const leave = (reason: string) => {
            for (const id of rules) left.push({ poolId, kind, id, reason });
          };
          let interval = 1000;
          for (;;) {
            const live = await listVms(clients, clusterFilter(clusterId), signal);
            const inUse = live.filter((raw) => raw.status !== "STOPPING");
            if (inUse.length > 0) {
              const listed = inUse.map((raw) => `${raw.name} (${raw.status})`);
              return leave(
                `pool ${poolId} still has ${inUse.length === 1 ? "an instance" : `${inUse.length} instances`}: ${listed.join(", ")}; terminate ${inUse.length === 1 ? "it" : "them"} first (skyward down --pool ${poolId})`,
              );
            }
            if (live.length === 0) break;
            if (Date.now() >= deadline) {
              return leave(
                `instances ${live.map((raw) => raw.name).join(", ")} still stopping after ${waitSeconds} s; run skyward down --pool ${poolId} again once they have gone`,
              );
            }
            await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), signal);
            interval = Math.min(interval * 2, 10_000);
          }
          for (const id of rules) {
            try {
              if (await deleteFirewall(clients, id, signal)) removed.push({ poolId, kind, id });
            } catch (error) {
              signal.throwIfAborted();
              left.push({ poolId, kind, id, reason: (error as Error).message });
            }
          }
        }),
      );
      const order = (a: PoolResource, b: PoolResource) =>
        a.poolId.localeCompare(b.poolId) || a.kind.localeCompare(b.kind) || a.id.localeCompare(b.id);
      return { removed: removed.sort(order), left: left.sort(order) };
    },

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), "gcp_ed25519");
      const found = await listVms(clientsOf(), `labels.${GCP_LABELS.cluster}:*`, signal);
      return found.map((raw) => toInstance(raw, identityFile, ""));
    },
  };
}
