/**
 * The Verda provider (formerly DataCrunch): GPU and CPU virtual machines in Verda's locations, on demand
 * or spot, reached over SSH as root on their public address. A pool registers the public half of a key
 * pair kept here as a project SSH key (named after its cluster and pool) and deploys its instances
 * with it; instances carry Skyward's tags in their description. `teardown` and `cleanup` delete the
 * registered key again.
 */
import {
  acceleratorFormFactor,
  type CleanupResult,
  type Cluster,
  canonicalAcceleratorName,
  type Instance,
  type InstanceStatus,
  type LeftPoolResource,
  type Offer,
  type OfferQuery,
  type PoolResource,
  type ProviderV1,
  parseInput,
} from "@skyward/core/contract";
import {
  createClusterId,
  filterOffers,
  instanceSsh,
  keysDirectorySchema,
  poolIdFromTags,
  provisionByMarket,
  requireOwnOffer,
  roundPrice,
  SKYWARD_TAGS,
  type SshStandIn,
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
import { z } from "zod";
import {
  createVerdaClient,
  resolveVerdaCredentials,
  VERDA_API_URL,
  VerdaApiError,
  type VerdaInstance,
  type VerdaInstanceType,
} from "./verda-api.js";

/** Where an instance is reached instead of its own address: see {@link VerdaSettings.sshAddress} (user default `root`). */
export type VerdaSshAddress = SshStandIn;

/** Settings of the Verda provider; every field is optional. */
export interface VerdaSettings {
  /** The API client id. Default: the `VERDA_CLIENT_ID` environment variable, read on the first API call. */
  clientId?: string;
  /** The API client secret. Default: the `VERDA_CLIENT_SECRET` environment variable. A secret: never logged. */
  clientSecret?: string;
  /** The API's base URL. Default `https://api.verda.com/v1`. */
  apiUrl?: string;
  /** The location instances are deployed in (`FIN-01`); a spec's `region` does the same. Default: any location with capacity. */
  location?: string;
  /**
   * The OS image of every instance, verbatim (`ubuntu-24.04-cuda-12.8-open-docker`). Default: Ubuntu 24.04
   * with the CUDA version of `cuda` on GPU instances, plain `ubuntu-24.04` on CPU instances.
   */
  image?: string;
  /** The CUDA version of the default GPU image (`ubuntu-24.04-cuda-<cuda>-open`). Default `"13.0"`, as in the Python project. */
  cuda?: string;
  /** The OS volume size, GB; a spec's `diskGb` raises it. Default: Verda's size for the instance type. */
  osVolumeGb?: number;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /** The `fetch` to call the API with (tests, proxies). Default: Node's. */
  fetch?: (input: URL | Request | string, init?: RequestInit) => Promise<Response>;
  /** Retries of a rate-limited or failed idempotent request. Default 4. */
  maxRetries?: number;
  /** Delay before the first retry, doubled for each next one, ms. Default 1000. */
  retryDelayMs?: number;
  /** Deadline of one HTTP request, ms. Default 30000. */
  requestTimeoutMs?: number;
  /**
   * A test seam: where each instance is reached over SSH instead of its own address, so the provider
   * driven against a fake of Verda's API reaches real SSH hosts (a test bed). Never set it against
   * Verda.
   */
  sshAddress?: (instance: { readonly id: string; readonly ip: string }) => VerdaSshAddress;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface VerdaOfferData {
  /** Verda's instance type (`1H100.80S.30V`). */
  readonly instanceType: string;
  /** The location code (`FIN-01`). */
  readonly location: string;
}

/** What a Verda cluster keeps in {@link Cluster.specific}. */
export interface VerdaClusterData {
  /** The project SSH key registered for the pool. */
  readonly sshKeyId: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
  /** The OS image. */
  readonly image: string;
  /** The OS volume size, GB, when set. */
  readonly osVolumeGb: number | undefined;
}

const NAME = "verda";
const KEY_PAIR = "verda_ed25519";
const CUDA_VERSION = /^\d{1,2}\.\d{1,2}$/;
/** The name of a pool's SSH key at Verda: `<cluster id>_<pool id>`. */
const SSH_KEY_NAME = /^(verda-[0-9a-f]{8})(?:_(\S+))?$/;

const settingsSchema = z.strictObject({
  clientId: z.string().min(1, { message: "expected a non-empty client id" }).optional(),
  clientSecret: z.string().min(1, { message: "expected a non-empty client secret" }).optional(),
  apiUrl: z.url({ error: "expected the API's base URL" }).default(VERDA_API_URL),
  location: z.string().min(1, { message: "expected a location code like FIN-01" }).optional(),
  image: z.string().min(1, { message: "expected an OS image name" }).optional(),
  cuda: z.string().regex(CUDA_VERSION, { message: 'expected a CUDA version like "12.8"' }).default("13.0"),
  osVolumeGb: z
    .number({ error: "expected the OS volume size in GB" })
    .int({ message: "expected a whole number of GB" })
    .min(1)
    .optional(),
  keysDirectory: keysDirectorySchema,
  fetch: z
    .custom<NonNullable<VerdaSettings["fetch"]>>((value) => typeof value === "function", {
      message: "expected a fetch function",
    })
    .optional(),
  maxRetries: z.number().int().min(0).max(20).default(4),
  retryDelayMs: z.number().min(0).default(1000),
  requestTimeoutMs: z.number().positive().default(30_000),
  sshAddress: z
    .custom<NonNullable<VerdaSettings["sshAddress"]>>((value) => typeof value === "function", {
      message: "expected a function",
    })
    .optional(),
});

type ParsedSettings = z.output<typeof settingsSchema>;

/** Verda's instance states, as the pool sees them. */
function statusOf(status: string): InstanceStatus {
  switch (status.toLowerCase()) {
    case "running":
      return "running";
    case "offline":
    case "deleting":
    case "discontinued":
      return "stopping";
    case "error":
    case "notfound":
    case "no_capacity":
    case "installation_failed":
    case "deleted":
      return "terminated";
    default:
      // new, ordered, validating, provisioning
      return "pending";
  }
}

/** Skyward's tags in an instance description: `skyward skyward:cluster=… skyward:pool=…`. */
export function describeTags(tags: Readonly<Record<string, string>>): string {
  return ["skyward", ...Object.entries(tags).map(([key, value]) => `${key}=${value}`)].join(" ");
}

/** Skyward's tags read back from an instance description written by {@link describeTags}. */
export function tagsFromDescription(description: string | null | undefined): Record<string, string> {
  const words = (description ?? "").trim().split(/\s+/);
  if (words[0] !== "skyward") return {};
  const tags: Record<string, string> = {};
  for (const word of words.slice(1)) {
    const at = word.indexOf("=");
    if (at > 0 && word.startsWith("skyward:")) tags[word.slice(0, at)] = word.slice(at + 1);
  }
  return tags;
}

/**
 * The canonical accelerator of an instance type (`model`, else its GPU description `1x H100 SXM5 80GB`),
 * with the form factor its GPU description says (`SXM`), when it says one.
 */
function acceleratorOf(
  type: VerdaInstanceType,
): { name: string; count: number; memoryGb: number; formFactor?: string } | null {
  const count = type.gpu?.number_of_gpus ?? 0;
  if (!count) return null;
  const described = /^\d+x\s+(.+?)\s+\d+GB$/.exec(type.gpu?.description ?? "")?.[1];
  const name =
    canonicalAcceleratorName(type.model ?? "") ??
    (described ? canonicalAcceleratorName(described.replace(/\s+SXM\d*/, "")) : undefined);
  if (!name) return null;
  const total = type.gpu_memory?.size_in_gigabytes ?? 0;
  const formFactor = described ? acceleratorFormFactor(described) : undefined;
  return {
    name,
    count,
    memoryGb: total > 0 ? total / count : 0,
    ...(formFactor === undefined ? {} : { formFactor }),
  };
}

function isCapacityMessage(message: string): boolean {
  return /not enough|no capacity|insufficient|unavailable|not available|out of stock|sold out/i.test(message);
}

function build(settings: ParsedSettings): ProviderV1<VerdaClusterData> {
  const api = createVerdaClient({
    apiUrl: settings.apiUrl,
    clientId: settings.clientId,
    clientSecret: settings.clientSecret,
    fetch: settings.fetch,
    maxRetries: settings.maxRetries,
    retryDelayMs: settings.retryDelayMs,
    requestTimeoutMs: settings.requestTimeoutMs,
  });
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const counters = new Map<string, number>();
  /** Stand-in addresses, by instance id (the seam is asked once per instance). */
  const standIns = new Map<string, VerdaSshAddress>();

  function standInFor(instance: VerdaInstance): VerdaSshAddress | undefined {
    if (!settings.sshAddress || !instance.ip) return undefined;
    let address = standIns.get(instance.id);
    if (!address) {
      address = settings.sshAddress({ id: instance.id, ip: instance.ip });
      standIns.set(instance.id, address);
    }
    return address;
  }

  function toInstance(instance: VerdaInstance, identityFile: string | undefined, now = Date.now()): Instance {
    const tags = tagsFromDescription(instance.description);
    const status = statusOf(instance.status);
    const ip = instance.ip?.trim() || null;
    const standIn = standInFor(instance);
    const ssh =
      status === "running" && ip !== null
        ? instanceSsh({ host: ip, port: 22, user: "root" }, identityFile, standIn)
        : null;
    const created = instance.created_at ? Date.parse(instance.created_at) : Number.NaN;
    if (instance.hostname) tags["verda:hostname"] = instance.hostname;
    return Object.freeze({
      id: instance.id,
      status: sshReachableStatus(status, ssh),
      publicIp: ip,
      privateIp: standIn ? (ssh?.host ?? ip) : ip,
      ssh,
      spot: instance.is_spot === true,
      hourlyPrice: instance.price_per_hour ?? null,
      offerId: tags[SKYWARD_TAGS.offer] ?? "",
      createdAt: Number.isFinite(created) ? created : now,
      tags: Object.freeze(tags),
    });
  }

  function imageFor(offer: Offer): string {
    if (settings.image) return settings.image;
    return offer.accelerator ? `ubuntu-24.04-cuda-${settings.cuda}-open` : "ubuntu-24.04";
  }

  async function offersFor(query: OfferQuery, signal: AbortSignal): Promise<Offer[]> {
    const wantSpot = query.allocation !== "on-demand";
    const wantOnDemand = query.allocation !== "spot";
    const [types, onDemand, spot] = await Promise.all([
      api.instanceTypes(signal),
      wantOnDemand ? api.availability(false, signal) : Promise.resolve(new Map<string, Set<string>>()),
      wantSpot ? api.availability(true, signal) : Promise.resolve(new Map<string, Set<string>>()),
    ]);
    const location = query.region ?? settings.location;
    const locations = [...new Set([...onDemand.keys(), ...spot.keys()])]
      .filter((code) => location === undefined || code === location)
      .sort();
    const asOf = new Date().toISOString();
    const offers: Offer[] = [];
    for (const type of types) {
      const accelerator = acceleratorOf(type);
      if (query.accelerator) {
        if (accelerator?.name !== query.accelerator.name || accelerator.count !== query.accelerator.count)
          continue;
      } else if ((type.gpu?.number_of_gpus ?? 0) > 0) continue;
      for (const code of locations) {
        const onDemandPrice =
          onDemand.get(code)?.has(type.instance_type) && type.price_per_hour != null
            ? roundPrice(type.price_per_hour)
            : null;
        const spotPrice =
          spot.get(code)?.has(type.instance_type) && type.spot_price != null
            ? roundPrice(type.spot_price)
            : null;
        if (onDemandPrice === null && spotPrice === null) continue;
        offers.push(
          Object.freeze({
            id: `verda:${code}:${type.instance_type}`,
            provider: NAME,
            instanceType: type.instance_type,
            accelerator: accelerator ? Object.freeze(accelerator) : null,
            vcpus: type.cpu?.number_of_cores ?? 0,
            memoryGb: type.memory?.size_in_gigabytes ?? 0,
            architecture: /GH200|GB200/i.test(type.model ?? "") ? ("arm64" as const) : ("x86_64" as const),
            region: code,
            spotPrice,
            onDemandPrice,
            pricesAsOf: asOf,
            specific: Object.freeze({
              instanceType: type.instance_type,
              location: code,
            } satisfies VerdaOfferData),
          }),
        );
      }
    }
    return filterOffers(offers, query);
  }

  async function deploy(
    cluster: Cluster<VerdaClusterData>,
    spot: boolean,
    signal: AbortSignal,
  ): Promise<string | { noCapacity: string }> {
    const specific = cluster.offer.specific as unknown as VerdaOfferData;
    const index = counters.get(cluster.id) ?? 0;
    counters.set(cluster.id, index + 1);
    const hostname = `${cluster.id}-${index}`;
    const tags = skywardTags({
      cluster: cluster.id,
      pool: cluster.poolId,
      region: specific.location,
      offer: cluster.offer.id,
      spot,
    });
    try {
      return await api.deploy(
        {
          instance_type: specific.instanceType,
          image: cluster.specific.image,
          ssh_key_ids: [cluster.specific.sshKeyId],
          hostname,
          description: describeTags(tags),
          location_code: specific.location,
          is_spot: spot,
          ...(cluster.specific.osVolumeGb !== undefined
            ? { os_volume: { name: `${hostname}-os`, size: cluster.specific.osVolumeGb } }
            : {}),
        },
        signal,
      );
    } catch (error) {
      if (
        VerdaApiError.isInstance(error) &&
        error.statusCode !== undefined &&
        error.statusCode >= 400 &&
        error.statusCode !== 401 &&
        error.statusCode !== 403 &&
        error.statusCode !== 429 &&
        isCapacityMessage(error.message)
      )
        return { noCapacity: error.message };
      throw error;
    }
  }

  async function identityFile(): Promise<string | undefined> {
    return findSshIdentityFile(keysDirectory(), KEY_PAIR);
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    capabilities: Object.freeze({
      spot: true,
      volumes: false,
      images: true,
      offerCache: "marketplace",
      // Verda documents no private network between separately deployed instances: an instance has one
      // address, its public `ip` (API reference, "Get instance by ID": https://api.verda.com/v1/docs),
      // and the interconnect between nodes is a property of Instant Clusters, a separate product whose
      // worker nodes share an InfiniBand fabric and a /home filesystem
      // (https://docs.verda.com/clusters/instant-clusters/good-to-know/). So a distributed-training
      // plugin on several Verda instances is refused at validation instead of waiting on peers.
      peerNetwork: "none",
    }),
    // Every setting the offers depend on (the API asked, the location), so that a provider set
    // otherwise is never handed offers the core cached for another. Not the image, CUDA version, OS
    // volume or key: they shape the instance, not the offers.
    cacheKey: JSON.stringify([settings.apiUrl, settings.location ?? null]),

    async offers({ query, signal }) {
      return offersFor(query, signal);
    },

    async prepare({ spec, offer, poolId, signal }) {
      requireOwnOffer(offer, NAME, "Verda");
      resolveVerdaCredentials(settings);
      const keys = await ensureSshKeyPair(keysDirectory(), KEY_PAIR);
      const id = createClusterId(NAME);
      const sshKeyId = await api.addSshKey(`${id}_${poolId ?? ""}`.replace(/_$/, ""), keys.publicKey, signal);
      const requestedDisk = Math.ceil(spec.diskGb ?? 0);
      const osVolumeGb =
        settings.osVolumeGb !== undefined || requestedDisk > 0
          ? Math.max(settings.osVolumeGb ?? 0, requestedDisk)
          : undefined;
      return Object.freeze({
        id,
        provider: NAME,
        poolId: poolId ?? "",
        region: offer.region,
        spec,
        offer,
        ssh: Object.freeze({ user: "root", identityFile: keys.identityFile, sudo: false }),
        specific: Object.freeze({
          sshKeyId,
          identityFile: keys.identityFile,
          image: imageFor(offer),
          osVolumeGb,
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      return provisionByMarket({
        cluster,
        count,
        provider: NAME,
        signal,
        create: (spot) => deploy(cluster, spot, signal),
        describe: async (id) => {
          const instance = await api.instance(id, signal);
          return instance ? toInstance(instance, cluster.specific.identityFile) : null;
        },
      });
    },

    async getInstance({ cluster, id, signal }) {
      const instance = await api.instance(id, signal);
      if (instance === null || statusOf(instance.status) === "terminated") return null;
      return toInstance(instance, cluster.specific?.identityFile ?? (await identityFile()));
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      const known = await api.instances(signal);
      const live = new Set(known.map((instance) => instance.id));
      const wanted = [...new Set(ids)].filter((id) => live.has(id));
      await api.deleteInstances(wanted, signal);
      for (const id of ids) standIns.delete(id);
    },

    async teardown({ cluster, signal }) {
      const left = (await api.instances(signal)).filter(
        (instance) => tagsFromDescription(instance.description)[SKYWARD_TAGS.cluster] === cluster.id,
      );
      await api.deleteInstances(
        left.map((instance) => instance.id),
        signal,
      );
      if (cluster.specific?.sshKeyId) await api.deleteSshKey(cluster.specific.sshKeyId, signal);
      counters.delete(cluster.id);
    },

    selfDestruct({ instance }) {
      const standIn = standIns.get(instance.id);
      if (standIn) return standIn.selfDestruct ?? "true";
      // As in the Python project: the instance powers itself off; `skyward down` deletes what is left.
      return "shutdown -h now";
    },

    async listInstances({ signal }) {
      const file = await identityFile();
      return (await api.instances(signal))
        .filter((instance) => tagsFromDescription(instance.description)[SKYWARD_TAGS.cluster] !== undefined)
        .map((instance) => toInstance(instance, file));
    },

    async cleanup({ pools, signal }): Promise<CleanupResult> {
      const [keys, instances] = await Promise.all([api.sshKeys(signal), api.instances(signal)]);
      const liveClusters = new Set(
        instances
          .filter((instance) => statusOf(instance.status) !== "terminated")
          .map((instance) => tagsFromDescription(instance.description)[SKYWARD_TAGS.cluster])
          .filter((cluster): cluster is string => cluster !== undefined),
      );
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      for (const key of keys) {
        const match = SSH_KEY_NAME.exec(key.name);
        if (!match) continue;
        const cluster = match[1] as string;
        const poolId = poolIdFromTags({
          [SKYWARD_TAGS.cluster]: cluster,
          [SKYWARD_TAGS.pool]: match[2] ?? "",
        });
        if (pools !== "all" && !pools.includes(poolId)) continue;
        const resource = { poolId, kind: "SSH key", id: key.name };
        if (liveClusters.has(cluster)) {
          left.push({ ...resource, reason: `pool ${poolId} still has instances` });
          continue;
        }
        await api.deleteSshKey(key.id, signal);
        removed.push(resource);
      }
      return { removed, left };
    },
  };
}

function parseSettings(settings: VerdaSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

/**
 * The Verda provider: `Verda()` with default settings (credentials from `VERDA_CLIENT_ID` and
 * `VERDA_CLIENT_SECRET`), or `Verda({ location: "FIN-01" })`. Throws `ConfigurationError` for bad
 * settings; the credentials are looked up on the first API call.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Verda } from "@skyward/provider-verda";
 *
 * await using pool = await sky.compute({
 *   provider: Verda({ location: "FIN-01" }),
 *   accelerator: sky.accelerators.H100(),
 *   allocation: "spot-if-available",
 * });
 * ```
 */
export function Verda(settings: VerdaSettings = {}): ProviderV1<VerdaClusterData> {
  return build(parseSettings(settings, "Verda"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "verda"`), its keys
 * already camelCased by the core: `client_id = "…"` arrives as `clientId`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<VerdaClusterData> {
  return build(parseSettings(settings as VerdaSettings, ""));
}
