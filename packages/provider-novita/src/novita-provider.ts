/**
 * The Novita AI provider: GPU instances — containers of any image — on demand or spot, reached over
 * SSH as root. Every instance exposes `22/tcp`, gets the public half of a key pair kept here as
 * `PUBLIC_KEY`, and starts with a command that authorises it for root and runs `sshd` (installing
 * OpenSSH when the image lacks it); Skyward's tags travel in its environment.
 */
import type { DockerImage } from "@skyward/core";
import {
  acceleratorFormFactor,
  type Cluster,
  canonicalAcceleratorName,
  containerImageSchema,
  type Instance,
  type InstanceStatus,
  type Offer,
  type OfferQuery,
  type ProviderV1,
  parseInput,
} from "@skyward/core/contract";
import {
  createClusterId,
  environmentVariablesSchema,
  filterOffers,
  type HttpSettings,
  httpSettingsShape,
  instanceSsh,
  keysDirectorySchema,
  provisionByMarket,
  refuseVolumesWithoutFuse,
  requireOwnOffer,
  roundPrice,
  SKYWARD_TAGS,
  type SshStandIn,
  skywardKeysDirectory,
  skywardTags,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
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
  createNovitaClient,
  NOVITA_API_URL,
  NOVITA_PRICE_UNITS_PER_USD,
  NovitaApiError,
  type NovitaInstance,
  type NovitaProduct,
  novitaApi,
} from "./novita-api.js";

/** The image instances run when none is set, as in the Python project: CUDA 12.9 runtime on Ubuntu 24.04. */
export const DEFAULT_NOVITA_IMAGE = "nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04";

/** Where an instance is reached instead of its own address: see {@link NovitaSettings.sshAddress} (user default `root`). */
export type NovitaSshAddress = SshStandIn;

/** Settings of the Novita provider; every field is optional. */
export interface NovitaSettings extends HttpSettings {
  /** The API key. Default: the `NOVITA_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The API's base URL. Default `https://api.novita.ai/gpu-instance/openapi/v1`. */
  apiUrl?: string;
  /** The cluster (region) instances are created in; a spec's `region` does the same. Default: any, Novita's choice. */
  clusterId?: string;
  /**
   * The container image: a tag or a {@link DockerImage} (`sky.containers.cuda("12.8")`). It needs a
   * shell; `sshd` is installed with apt-get when missing. Default {@link DEFAULT_NOVITA_IMAGE}.
   */
  dockerImage?: string | DockerImage;
  /** The root filesystem, GB (10–6144); a spec's `diskGb` raises it. Default 50, as in the Python project. */
  rootfsSize?: number;
  /** More environment variables for every instance. */
  env?: Readonly<Record<string, string>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * A test seam: where each instance is reached over SSH instead of its own address, so the provider
   * driven against a fake of Novita's API reaches real SSH hosts (a test bed). Never set it against
   * Novita.
   */
  sshAddress?: (instance: {
    readonly id: string;
    readonly host: string;
    readonly port: number;
  }) => NovitaSshAddress;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface NovitaOfferData {
  /** Novita's product id. */
  readonly productId: string;
  /** Novita's product name (`A100 SXM 80GB`). */
  readonly productName: string;
  readonly gpuNum: number;
}

/** What a Novita cluster keeps in {@link Cluster.specific}. */
export interface NovitaClusterData {
  /** The public key given to every instance as `PUBLIC_KEY`. */
  readonly publicKey: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
  /** The container image. */
  readonly image: string;
  /** The root filesystem, GB. */
  readonly rootfsSize: number;
  /** The cluster instances are created in, if pinned. */
  readonly clusterId: string | undefined;
}

const NAME = "novita";
const KEY_PAIR = "novita_ed25519";

/**
 * The command every instance starts with: authorise `$PUBLIC_KEY` for root, start `sshd` (installing
 * OpenSSH with apt-get when the image has none), then stay up.
 */
export const STARTUP_COMMAND = [
  "bash -c '",
  'mkdir -p /root/.ssh && chmod 700 /root/.ssh && printf "%s\\n" "$PUBLIC_KEY" >> /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys;',
  " if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server; fi;",
  " mkdir -p /run/sshd && ssh-keygen -A && /usr/sbin/sshd;",
  " exec sleep infinity'",
].join("");

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  apiUrl: z.url({ error: "expected the API's base URL" }).default(NOVITA_API_URL),
  clusterId: z.string().min(1, { message: "expected a cluster id" }).optional(),
  dockerImage: containerImageSchema.default(DEFAULT_NOVITA_IMAGE),
  rootfsSize: z
    .number({ error: "expected the root filesystem size in GB" })
    .int({ message: "expected a whole number of GB" })
    .min(10, { message: "expected at least 10 GB" })
    .max(6144, { message: "expected at most 6144 GB" })
    .default(50),
  env: environmentVariablesSchema.default({}),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<NonNullable<NovitaSettings["sshAddress"]>>((value) => typeof value === "function", {
      message: "expected a function",
    })
    .optional(),
});

type ParsedSettings = z.output<typeof settingsSchema>;

/** Novita's instance states (List Instances → `status`), as the pool sees them. */
function statusOf(status: string): InstanceStatus {
  switch (status) {
    case "running":
      return "running";
    case "toStop":
    case "stopping":
    case "exited":
    case "freezing":
    case "toRemove":
    case "removing":
      return "stopping";
    case "removed":
      return "terminated";
    default:
      // toCreate, creating, pulling, toStart, starting, toRestart, restarting, toReset, resetting, migrating
      return "pending";
  }
}

/** `A100 SXM 80GB` → its canonical accelerator, memory per GPU and form factor (when the name says it). */
function acceleratorOf(
  product: NovitaProduct,
): { name: string; memoryGb: number; formFactor?: string } | null {
  const memory = /(\d+)\s*GB/i.exec(product.name);
  const model = product.name.replace(/\s+\d+\s*GB.*$/i, "").trim();
  const name =
    canonicalAcceleratorName(model) ??
    canonicalAcceleratorName(
      model
        .split(/\s+/)
        .slice(0, model.startsWith("RTX") ? 2 : 1)
        .join(" "),
    );
  if (!name) return null;
  const formFactor = acceleratorFormFactor(model);
  return {
    name,
    memoryGb: memory ? Number(memory[1]) : 0,
    ...(formFactor === undefined ? {} : { formFactor }),
  };
}

function envOf(instance: NovitaInstance): Record<string, string> {
  return Object.fromEntries((instance.envs ?? []).map((entry) => [entry.key, entry.value]));
}

/** `host:port` (or a URL) of the port mapped to 22, when Novita lists one. */
function sshEndpoint(instance: NovitaInstance): { host: string; port: number } | undefined {
  const mapping = instance.portMappings?.find((entry) => entry.port === 22 && entry.endpoint);
  const endpoint = mapping?.endpoint?.replace(/^[a-z]+:\/\//, "") ?? "";
  const match = /^(.+):(\d+)$/.exec(endpoint);
  return match ? { host: match[1] as string, port: Number(match[2]) } : undefined;
}

function isCapacityMessage(message: string): boolean {
  return /not enough|no (available )?(gpu|resource|inventory|stock)|insufficient|sold out|out of stock|unavailable/i.test(
    message,
  );
}

function build(settings: ParsedSettings): ProviderV1<NovitaClusterData> {
  const api = createNovitaClient(settings.apiUrl, settings);
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const counters = new Map<string, number>();
  const standIns = new Map<string, NovitaSshAddress>();

  function toInstance(
    instance: NovitaInstance,
    identityFile: string | undefined,
    now = Date.now(),
  ): Instance {
    const tags = skywardTagsFromEnvironment(envOf(instance));
    const status = statusOf(instance.status);
    const endpoint = sshEndpoint(instance);
    let standIn = standIns.get(instance.id);
    if (!standIn && endpoint && settings.sshAddress) {
      standIn = settings.sshAddress({ id: instance.id, ...endpoint });
      standIns.set(instance.id, standIn);
    }
    const ssh =
      status === "running" && endpoint
        ? instanceSsh({ host: endpoint.host, port: endpoint.port, user: "root" }, identityFile, standIn)
        : null;
    if (instance.name) tags["novita:name"] = instance.name;
    const created = instance.createdAt ? Date.parse(instance.createdAt) : Number.NaN;
    const price = instance.instancePrice;
    return Object.freeze({
      id: instance.id,
      status: sshReachableStatus(status, ssh),
      publicIp: endpoint?.host ?? null,
      // Containers on different machines share no private network: peers use the public endpoint.
      privateIp: ssh?.host ?? endpoint?.host ?? null,
      ssh,
      spot: instance.billingMode === "spot" || tags[SKYWARD_TAGS.spot] === "1",
      hourlyPrice: price == null ? null : roundPrice(price / NOVITA_PRICE_UNITS_PER_USD),
      offerId: tags[SKYWARD_TAGS.offer] ?? "",
      createdAt: Number.isFinite(created) ? created : now,
      tags: Object.freeze(tags),
    });
  }

  async function offersFor(query: OfferQuery, signal: AbortSignal): Promise<Offer[]> {
    const accelerator = query.accelerator;
    // Novita's CPU instances are another product line; only GPU offers are listed.
    if (!accelerator || query.architecture === "arm64") return [];
    const clusterId = query.region ?? settings.clusterId;
    const markets: ("onDemand" | "spot")[] = [];
    if (query.allocation !== "spot") markets.push("onDemand");
    if (query.allocation !== "on-demand") markets.push("spot");
    const listed = await Promise.all(
      markets.map((billingMethod) =>
        api.products(
          { gpuNum: accelerator.count, billingMethod, ...(clusterId ? { clusterId } : {}) },
          signal,
        ),
      ),
    );
    const prices = new Map<
      string,
      { product: NovitaProduct; onDemand: number | null; spot: number | null }
    >();
    listed.forEach((products, index) => {
      for (const product of products) {
        if (product.availableDeploy === false) continue;
        const entry = prices.get(product.id) ?? { product, onDemand: null, spot: null };
        if (markets[index] === "onDemand") entry.onDemand = product.price ?? null;
        // An empty `spotPrice` ("") means no spot price.
        else entry.spot = product.spotPrice || null;
        prices.set(product.id, entry);
      }
    });
    const asOf = new Date().toISOString();
    const count = accelerator.count;
    const perPool = (price: number | null) =>
      price === null ? null : roundPrice((price / NOVITA_PRICE_UNITS_PER_USD) * count);
    const offers: Offer[] = [];
    for (const { product, onDemand, spot } of prices.values()) {
      const gpu = acceleratorOf(product);
      if (gpu?.name !== accelerator.name) continue;
      if (onDemand === null && spot === null) continue;
      offers.push(
        Object.freeze({
          id: `novita:${product.id}:x${count}`,
          provider: NAME,
          instanceType: `${count > 1 ? `${count}x ` : ""}${product.name}`,
          accelerator: Object.freeze({
            name: gpu.name,
            count,
            memoryGb: gpu.memoryGb,
            ...(gpu.formFactor === undefined ? {} : { formFactor: gpu.formFactor }),
          }),
          vcpus: (product.cpuPerGpu ?? 0) * count,
          memoryGb: (product.memoryPerGpu ?? 0) * count,
          architecture: "x86_64" as const,
          region: clusterId ?? "any",
          spotPrice: perPool(spot),
          onDemandPrice: perPool(onDemand),
          pricesAsOf: asOf,
          specific: Object.freeze({
            productId: product.id,
            productName: product.name,
            gpuNum: count,
          } satisfies NovitaOfferData),
        }),
      );
    }
    return filterOffers(offers, query);
  }

  async function create(
    cluster: Cluster<NovitaClusterData>,
    spot: boolean,
    signal: AbortSignal,
  ): Promise<string | { noCapacity: string }> {
    const specific = cluster.offer.specific as unknown as NovitaOfferData;
    const index = counters.get(cluster.id) ?? 0;
    counters.set(cluster.id, index + 1);
    const env = {
      ...settings.env,
      PUBLIC_KEY: cluster.specific.publicKey,
      ...skywardTagsToEnvironment(
        skywardTags({ cluster: cluster.id, pool: cluster.poolId, offer: cluster.offer.id, spot }),
      ),
    };
    try {
      return await api.create(
        {
          name: `${cluster.id}-${index}`,
          productId: specific.productId,
          gpuNum: specific.gpuNum,
          rootfsSize: cluster.specific.rootfsSize,
          imageUrl: cluster.specific.image,
          ports: "22/tcp",
          envs: Object.entries(env).map(([key, value]) => ({ key, value })),
          command: STARTUP_COMMAND,
          kind: "gpu",
          billingMode: spot ? "spot" : "onDemand",
          ...(cluster.specific.clusterId ? { clusterId: cluster.specific.clusterId } : {}),
        },
        signal,
      );
    } catch (error) {
      if (
        NovitaApiError.isInstance(error) &&
        error.statusCode !== undefined &&
        ![401, 403, 429].includes(error.statusCode) &&
        isCapacityMessage(error.message)
      )
        return { noCapacity: error.message };
      throw error;
    }
  }

  async function clusterInstances(clusterId: string, signal: AbortSignal): Promise<NovitaInstance[]> {
    return (await api.instances(signal)).filter(
      (instance) =>
        skywardTagsFromEnvironment(envOf(instance))[SKYWARD_TAGS.cluster] === clusterId &&
        statusOf(instance.status) !== "terminated",
    );
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    capabilities: Object.freeze({
      spot: true,
      volumes: false,
      images: true,
      offerCache: "marketplace",
      // Containers reached through a mapped public port: no network between instances.
      peerNetwork: "none",
    }),
    // Every setting the offers depend on (the API asked, the cluster they are listed in), so that a
    // provider set otherwise is never handed offers the core cached for another. Not the image, disk,
    // env or key: they shape the instance, not the offers.
    cacheKey: JSON.stringify([settings.apiUrl, settings.clusterId ?? null]),

    async offers({ query, signal }) {
      return offersFor(query, signal);
    },

    async prepare({ spec, offer, poolId }) {
      requireOwnOffer(offer, NAME, "Novita");
      // Its instances are containers without FUSE: volumes are refused before anything is created.
      refuseVolumesWithoutFuse(spec.volumes, { provider: "Novita", machines: "instances" });
      novitaApi.resolveApiKey(settings.apiKey);
      const keys = await ensureSshKeyPair(keysDirectory(), KEY_PAIR);
      const clusterId = spec.region ?? settings.clusterId;
      return Object.freeze({
        id: createClusterId(NAME),
        provider: NAME,
        poolId: poolId ?? "",
        region: clusterId ?? offer.region,
        spec,
        offer,
        ssh: Object.freeze({ user: "root", identityFile: keys.identityFile, sudo: false }),
        specific: Object.freeze({
          publicKey: keys.publicKey,
          identityFile: keys.identityFile,
          image: settings.dockerImage,
          rootfsSize: Math.max(settings.rootfsSize, Math.ceil(spec.diskGb ?? 0)),
          clusterId,
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      return provisionByMarket({
        cluster,
        count,
        provider: NAME,
        signal,
        create: (spot) => create(cluster, spot, signal),
        describe: async (id) => {
          const instance = await api.instance(id, signal);
          return instance ? toInstance(instance, cluster.specific.identityFile) : null;
        },
      });
    },

    async getInstance({ cluster, id, signal }) {
      const instance = await api.instance(id, signal);
      if (instance === null || statusOf(instance.status) === "terminated") return null;
      return toInstance(
        instance,
        cluster.specific?.identityFile ?? (await findSshIdentityFile(keysDirectory(), KEY_PAIR)),
      );
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) {
        await api.delete(id, signal);
        standIns.delete(id);
      }
    },

    async teardown({ cluster, signal }) {
      for (const instance of await clusterInstances(cluster.id, signal)) {
        await api.delete(instance.id, signal);
        standIns.delete(instance.id);
      }
      counters.delete(cluster.id);
    },

    selfDestruct({ instance }) {
      const standIn = standIns.get(instance.id);
      if (standIn) return standIn.selfDestruct ?? "true";
      // As in the Python project: ending the container's first process stops the instance.
      return "kill 1";
    },

    async listInstances({ signal }) {
      const identityFile = await findSshIdentityFile(keysDirectory(), KEY_PAIR);
      return (await api.instances(signal))
        .filter((instance) => skywardTagsFromEnvironment(envOf(instance))[SKYWARD_TAGS.cluster] !== undefined)
        .filter((instance) => statusOf(instance.status) !== "terminated")
        .map((instance) => toInstance(instance, identityFile));
    },
  };
}

function parseSettings(settings: NovitaSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

/**
 * The Novita provider: `Novita()` with default settings (the key from `NOVITA_API_KEY`), or
 * `Novita({ dockerImage: sky.containers.cuda("12.8"), rootfsSize: 100 })`. Throws `ConfigurationError`
 * for bad settings; the API key is looked up on the first API call.
 *
 * @example
 * ```ts
 * import * as sky from "@skyward/core";
 * import { Novita } from "@skyward/provider-novita";
 *
 * await using pool = await sky.compute({
 *   provider: Novita({ dockerImage: sky.containers.pytorch("2.8") }),
 *   accelerator: sky.accelerators.RTX_4090(),
 * });
 * ```
 */
export function Novita(settings: NovitaSettings = {}): ProviderV1<NovitaClusterData> {
  return build(parseSettings(settings, "Novita"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "novita"`), its keys
 * already camelCased by the core: `docker_image = "…"` arrives as `dockerImage`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<NovitaClusterData> {
  return build(parseSettings(settings as NovitaSettings, ""));
}
