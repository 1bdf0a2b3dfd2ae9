/**
 * The Novita AI provider: GPU instances — containers of any image — on demand or spot, reached over
 * SSH as root through the port Novita maps to `22/tcp`. An adapter on `@skyward/provider-utils`'
 * machine-provider base, which owns the market loop and price cap, idempotent creates (found again by
 * name), deletes until gone and lists that read every page. Skyward's tags, the public key and what the
 * start command needs (see `start-command.ts`) travel in the instance's environment.
 */
import {
  describeMachine,
  type MachineAdapter,
  type MachineClusterData,
  machineProviderFactories,
  refuseSetting,
  refuseVolumesWithoutFuse,
  roundPrice,
  SELF_DESTRUCT_COMMAND,
  SKYWARD_TAGS,
  selfDestructCommand,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
  standInSeam,
  statusTable,
} from "@skyward/provider-utils";
import {
  createNovitaClient,
  NOVITA_PRICE_UNITS_PER_USD,
  type NovitaInstance,
  novitaApi,
  PAGE_SIZE,
} from "./novita-api.js";
import { NAME, type NovitaOfferData, toOffers } from "./novita-offers.js";
import { type NovitaSettings, type ParsedSettings, settingsSchema } from "./novita-settings.js";
import { STARTUP_COMMAND, selfDestructScript } from "./start-command.js";

export type { NovitaOfferData } from "./novita-offers.js";
export { DEFAULT_NOVITA_IMAGE, type NovitaSettings, type NovitaSshAddress } from "./novita-settings.js";
export { STARTUP_COMMAND } from "./start-command.js";

/** What a Novita cluster keeps in `Cluster.specific`. */
export interface NovitaClusterData extends MachineClusterData {
  /** The container image. */
  readonly image: string;
  /** The root filesystem, GB. */
  readonly rootfsSize: number;
  /** The cluster instances are created in, if pinned. */
  readonly clusterId: string | undefined;
}

/** Novita's instance states (List Instances → `status`), as the pool sees them; the others (toCreate, pulling, starting…) are on their way. */
const statusOf = statusTable({
  running: ["running"],
  terminated: ["removed"],
  stopping: ["toStop", "stopping", "exited", "freezing", "toRemove", "removing"],
});

const environmentOf = (instance: NovitaInstance) =>
  Object.fromEntries((instance.envs ?? []).map((entry) => [entry.key, entry.value]));

/** `host:port` (or a URL) of the port mapped to 22, when Novita lists one. */
function sshEndpoint(instance: NovitaInstance): { host: string; port: number } | undefined {
  const mapping = instance.portMappings?.find((entry) => entry.port === 22 && entry.endpoint);
  const match = /^(.+):(\d+)$/.exec(mapping?.endpoint?.replace(/^[a-z]+:\/\//, "") ?? "");
  return match ? { host: match[1] as string, port: Number(match[2]) } : undefined;
}

/** The root filesystem of the offer's instances: the setting or `diskGb`, within the product's bounds. */
function rootfsFor(settings: ParsedSettings, offer: NovitaOfferData, diskGb: number | undefined): number {
  const wanted = Math.max(settings.rootfsSize, Math.ceil(diskGb ?? 0), offer.minRootFS ?? 0);
  if (offer.maxRootFS !== undefined && wanted > offer.maxRootFS)
    refuseSetting(
      "rootfsSize",
      `${wanted} GB is more root filesystem than Novita's ${offer.productName} takes (maxRootFS ${offer.maxRootFS} GB)`,
    );
  return wanted;
}

function adapterFor(settings: ParsedSettings): MachineAdapter<NovitaInstance, NovitaClusterData> {
  const api = createNovitaClient(settings);
  // A container's endpoint is not in its `Instance`: a seam is asked once the instance is described.
  const standIns = standInSeam(settings.sshAddress, () => undefined);
  const tagsOf = (instance: NovitaInstance): Record<string, string> => ({
    ...skywardTagsFromEnvironment(environmentOf(instance)),
    ...(instance.name ? { "novita:name": instance.name } : {}),
  });

  return {
    name: NAME,
    label: "Novita",
    capabilities: Object.freeze({
      spot: true,
      offerCache: "marketplace",
      // Containers reached through a mapped public port: no network between instances.
      peerNetwork: "none",
    }),
    // Every setting the offers depend on (the API asked, the cluster they are listed in, the root
    // filesystem a product must take), so offers cached for one configuration never serve another.
    cacheKey: JSON.stringify([settings.apiUrl, settings.clusterId ?? null, settings.rootfsSize]),
    clusterIdPrefix: NAME,
    sshUser: "root",
    keyName: "novita_ed25519",
    keysDirectory: settings.keysDirectory,
    // Novita's create takes no idempotency token: a create whose answer was lost is found by name.
    idempotencyToken: false,
    bootWatchdog: "boot-command",
    deleteRetryDelayMs: settings.retryDelayMs * 5,

    checkCredentials: () => void novitaApi.resolveApiKey(settings.apiKey),
    idOf: (instance) => instance.id,
    // The tags travel in the environment; the name is what a lost create is looked for by.
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (instance) => instance.name ?? undefined,
      read: tagsOf,
    },

    async offers(query, signal) {
      // Novita's CPU instances are another product line; only GPU offers are listed.
      if (!query.accelerator || query.architecture === "arm64") return [];
      const clusterId = query.region ?? settings.clusterId;
      const list = (billingMethod: "onDemand" | "spot", wanted: boolean) =>
        wanted
          ? api.products({ gpuNum: query.accelerator?.count ?? 1, billingMethod, clusterId }, signal)
          : [];
      const [onDemand, spot] = await Promise.all([
        list("onDemand", query.allocation !== "spot"),
        list("spot", query.allocation !== "on-demand"),
      ]);
      return toOffers({ onDemand, spot }, query, clusterId, settings.rootfsSize);
    },

    async prepare({ spec, offer, keys }) {
      // Its instances are containers without FUSE: volumes are refused before anything is created.
      refuseVolumesWithoutFuse(spec.volumes, { provider: "Novita", machines: "instances" });
      const rootfsSize = rootfsFor(settings, offer.specific as unknown as NovitaOfferData, spec.diskGb);
      return {
        ...keys,
        image: settings.dockerImage,
        rootfsSize,
        clusterId: spec.region ?? settings.clusterId,
      };
    },

    async create({ cluster, spot, name, tags, watchdogSeconds, signal }) {
      const offer = cluster.offer.specific as unknown as NovitaOfferData;
      const env = {
        ...settings.env,
        PUBLIC_KEY: cluster.specific.publicKey,
        ...skywardTagsToEnvironment(tags),
        SKYWARD_INSTANCE_NAME: name,
        SKYWARD_WATCHDOG_SECONDS: String(watchdogSeconds),
        SKYWARD_SELF_DESTRUCT: Buffer.from(selfDestructScript(settings.apiUrl)).toString("base64"),
        SKYWARD_NOVITA_API_KEY: novitaApi.resolveApiKey(settings.apiKey),
      };
      const id = await api.create(
        {
          name,
          productId: offer.productId,
          gpuNum: offer.gpuNum,
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
      // A read that fails right after the create must not lose the instance: it is what was asked.
      return api.instance(id, signal).catch((error: unknown) => {
        if (signal.aborted) throw error;
        const envs = Object.entries(skywardTagsToEnvironment(tags)).map(([key, value]) => ({ key, value }));
        return { id, name, status: "toCreate", billingMode: spot ? "spot" : "onDemand", envs };
      });
    },

    get: (id, signal) => api.instance(id, signal),

    async listPage(cursor, signal) {
      const page = Number(cursor ?? 1);
      const machines = await api.instances(page, signal);
      return { machines, ...(machines.length < PAGE_SIZE ? {} : { next: String(page + 1) }) };
    },

    delete: {
      async one(id, signal) {
        await api.delete(id, signal);
        standIns.forget(id);
      },
    },

    // Novita's ids are 16 hex digits; names of other shapes are never sent.
    isMachineId: (id) => /^[A-Za-z0-9_-]+$/.test(id),
    isBeingDeleted: (instance) => ["toRemove", "removing", "removed"].includes(instance.status),

    describe(instance, { identityFile }) {
      const tags = tagsOf(instance);
      const endpoint = sshEndpoint(instance);
      const price = instance.instancePrice;
      // Containers on different machines share no private network: peers use the public endpoint.
      return describeMachine({
        id: instance.id,
        status: statusOf(instance.status),
        address: endpoint ? { ...endpoint, user: "root" } : null,
        identityFile,
        standIn: standIns.of(instance.id, endpoint ? { id: instance.id, ...endpoint } : undefined),
        spot: instance.billingMode === "spot" || tags[SKYWARD_TAGS.spot] === "1",
        hourlyPrice: price == null ? null : roundPrice(price / NOVITA_PRICE_UNITS_PER_USD),
        tags,
        createdAt: instance.createdAt,
      });
    },

    // Installed by the start command: deletes the instance through the API.
    selfDestruct: (instance) =>
      standIns.selfDestruct(instance, selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, "root")),
  };
}

const factories = machineProviderFactories<NovitaSettings>()("Novita", settingsSchema, adapterFor);

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
export const Novita = factories.provider;

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "novita"`), its keys
 * already camelCased by the core: `docker_image = "…"` arrives as `dockerImage`.
 */
export const createProviderFromConfig = factories.fromConfig;
