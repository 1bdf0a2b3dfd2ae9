/**
 * The Novita AI provider: GPU instances — containers of any image — on demand or spot, reached over
 * SSH as root through the port Novita maps to `22/tcp`. An adapter on `@skyward/provider-utils`'
 * machine-provider base. Skyward's tags, the public key and what the start command needs travel in the
 * instance's environment.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  containerStartCommand,
  curlSelfDestructProgram,
  describeMachine,
  type MachineAdapter,
  type MachineClusterData,
  machineOffer,
  machineProviderFactories,
  marketListings,
  marketplaceMachine,
  readAfterCreate,
  refuseSetting,
  refuseVolumesWithoutFuse,
  rootSshdStatements,
  roundPrice,
  SKYWARD_TAGS,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
  statusTable,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import {
  createNovitaClient,
  NOVITA_PRICE_UNITS_PER_USD,
  type NovitaInstance,
  type NovitaProduct,
  novitaApi,
  PAGE_SIZE,
} from "./novita-api.js";
import { type NovitaSettings, type ParsedSettings, settingsSchema } from "./novita-settings.js";

export { DEFAULT_NOVITA_IMAGE, type NovitaSettings, type NovitaSshAddress } from "./novita-settings.js";

/** What an offer of this provider carries in {@link Offer.specific}: Novita's product (`A100 SXM 80GB`), the GPU count, the root filesystem bounds (GB) it states. */
export interface NovitaOfferData {
  readonly productId: string;
  readonly productName: string;
  readonly gpuNum: number;
  readonly minRootFS?: number | undefined;
  readonly maxRootFS?: number | undefined;
}

/** What a Novita cluster keeps in `Cluster.specific`: the container image, the root filesystem (GB), the cluster instances go to if pinned. */
export interface NovitaClusterData extends MachineClusterData {
  readonly image: string;
  readonly rootfsSize: number;
  readonly clusterId: string | undefined;
}

/** Where the start command keeps the API key, as a request header curl reads (`-H @file`): never on a command line. */
const HEADER_FILE = "/etc/skyward/novita-auth";

/**
 * The command every instance starts with (Novita runs it as PID 1, at most 2,047 characters); what
 * differs per instance comes in its environment. It authorises `$PUBLIC_KEY` for root and starts sshd
 * (installing OpenSSH and curl with apt-get when the image lacks them), then stays up. Killing PID 1
 * would not end the instance: `sleep` has no signal handler, and Linux drops signals to a namespace's
 * init without one (pid_namespaces(7)); so the self-destruct deletes the instance through the API.
 */
export const STARTUP_COMMAND = containerStartCommand({
  secret: { variable: "SKYWARD_NOVITA_API_KEY", file: HEADER_FILE, format: "Authorization: Bearer %s\\n" },
  prepare: rootSshdStatements("PUBLIC_KEY"),
  programVariable: "SKYWARD_SELF_DESTRUCT",
  watchdog: {
    secondsVariable: "SKYWARD_WATCHDOG_SECONDS",
    root: DEFAULT_NODE_ROOT,
    targetVariable: "SKYWARD_INSTANCE_NAME",
  },
  handOver: "sleep infinity",
});

/** Novita's instance states (List Instances → `status`); the others (toCreate, pulling, starting…) are on their way. */
const statusOf = statusTable({
  running: ["running"],
  terminated: ["removed"],
  stopping: ["toStop", "stopping", "exited", "freezing", "toRemove", "removing"],
});

/** `A100 SXM 80GB` → its canonical accelerator, memory per GPU and form factor (when the name says it). */
function acceleratorOf(product: NovitaProduct) {
  const model = product.name.replace(/\s+\d+\s*GB.*$/i, "").trim();
  const short = model.split(/\s+/).slice(0, model.startsWith("RTX") ? 2 : 1);
  return acceleratorFromNames([model, short.join(" "), product.name]);
}

/**
 * One offer per GPU product that can be deployed, for the GPU count asked. `GET /products` prices per
 * GPU (as its `cpuPerGpu` and `memoryPerGpu`) in 1/100,000 USD an hour; an offer's prices are for the
 * whole instance. A product whose `maxRootFS` is below the root filesystem wanted is left out.
 */
function toOffers(
  listed: Readonly<Record<"onDemand" | "spot", readonly NovitaProduct[]>>,
  query: OfferQuery,
  region: string | undefined,
  rootfsGb: number,
): Offer[] {
  const count = query.accelerator?.count ?? 1;
  // A market's price is the one its own listing gives; an empty `spotPrice` ("") means none.
  const priceIn = (market: "onDemand" | "spot", id: string) => {
    const product = listed[market].find((entry) => entry.id === id);
    const price = market === "spot" ? product?.spotPrice : product?.price;
    return price ? roundPrice((price / NOVITA_PRICE_UNITS_PER_USD) * count) : null;
  };
  const products = new Map([...listed.onDemand, ...listed.spot].map((product) => [product.id, product]));
  const pricesAsOf = new Date().toISOString();
  return [...products.values()].flatMap((product) => {
    const gpu = acceleratorOf(product);
    if (product.availableDeploy === false || !gpu || gpu.name !== query.accelerator?.name) return [];
    if (product.maxRootFS != null && product.maxRootFS < rootfsGb) return [];
    const [onDemandPrice, spotPrice] = [priceIn("onDemand", product.id), priceIn("spot", product.id)];
    if (onDemandPrice === null && spotPrice === null) return [];
    const specific: NovitaOfferData = {
      productId: product.id,
      productName: product.name,
      gpuNum: count,
      minRootFS: product.minRootFS ?? undefined,
      maxRootFS: product.maxRootFS ?? undefined,
    };
    return [
      machineOffer({
        id: `novita:${product.id}:x${count}`,
        provider: "novita",
        instanceType: `${count > 1 ? `${count}x ` : ""}${product.name}`,
        accelerator: { ...gpu, count },
        vcpus: (product.cpuPerGpu ?? 0) * count,
        memoryGb: (product.memoryPerGpu ?? 0) * count,
        region: region ?? "any",
        spotPrice,
        onDemandPrice,
        pricesAsOf,
        specific,
      }),
    ];
  });
}

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
  const { standIns, fields } = marketplaceMachine({
    name: "novita",
    label: "Novita",
    settings,
    addressOf: () => undefined,
  });
  const tagsOf = (instance: NovitaInstance): Record<string, string> => ({
    ...skywardTagsFromEnvironment(
      Object.fromEntries((instance.envs ?? []).map((entry) => [entry.key, entry.value])),
    ),
    ...(instance.name ? { "novita:name": instance.name } : {}),
  });
  const envs = (variables: Record<string, string>) =>
    Object.entries(variables).map(([key, value]) => ({ key, value }));
  // `skyward-self-destruct (ID | NAME)`: by id, or by name for the boot watchdog.
  const selfDestructProgram = curlSelfDestructProgram({
    apiUrl: settings.apiUrl,
    headerFile: HEADER_FILE,
    namePattern: "novita-*",
    listPath: `/gpu/instances?pageSize=${PAGE_SIZE}&pageNum=1`,
    delete: { method: "POST", path: "/gpu/instance/delete", body: '{"instanceId":"$id"}' },
  });

  return {
    ...fields,
    cacheKey: JSON.stringify([settings.apiUrl, settings.clusterId ?? null, settings.rootfsSize]),
    checkCredentials: () => void novitaApi.resolveApiKey(settings.apiKey),
    tags: {
      name: (cluster, index) => `${cluster.id}-${index}`,
      nameOf: (instance) => instance.name ?? undefined,
      read: tagsOf,
    },

    async offers(query, signal) {
      // Novita's CPU instances are another product line; only GPU offers are listed.
      if (!query.accelerator || query.architecture === "arm64") return [];
      const clusterId = query.region ?? settings.clusterId;
      const count = query.accelerator.count;
      const listed = await marketListings(
        query,
        (spot) => api.products(count, spot ? "spot" : "onDemand", clusterId, signal),
        [],
      );
      return toOffers(listed, query, clusterId, settings.rootfsSize);
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
      const billingMode = spot ? "spot" : "onDemand";
      const id = await api.create(
        {
          name,
          productId: offer.productId,
          gpuNum: offer.gpuNum,
          rootfsSize: cluster.specific.rootfsSize,
          imageUrl: cluster.specific.image,
          ports: "22/tcp",
          envs: envs({
            ...settings.env,
            PUBLIC_KEY: cluster.specific.publicKey,
            ...skywardTagsToEnvironment(tags),
            SKYWARD_INSTANCE_NAME: name,
            SKYWARD_WATCHDOG_SECONDS: String(watchdogSeconds),
            SKYWARD_SELF_DESTRUCT: Buffer.from(selfDestructProgram).toString("base64"),
            SKYWARD_NOVITA_API_KEY: novitaApi.resolveApiKey(settings.apiKey),
          }),
          command: STARTUP_COMMAND,
          kind: "gpu",
          billingMode,
          ...(cluster.specific.clusterId ? { clusterId: cluster.specific.clusterId } : {}),
        },
        signal,
      );
      const asked = { id, name, status: "toCreate", billingMode, envs: envs(skywardTagsToEnvironment(tags)) };
      return readAfterCreate(api.instance(id, signal), () => asked, signal);
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
  };
}

const factories = machineProviderFactories<NovitaSettings>()("Novita", settingsSchema, adapterFor);

/**
 * The Novita provider: `Novita()` (the key from `NOVITA_API_KEY`, looked up on the first API call) or
 * `Novita({ dockerImage: sky.containers.cuda("12.8"), rootfsSize: 100 })`; bad settings throw `ConfigurationError`.
 */
export const Novita = factories.provider;

/** The provider from a `skyward.toml` table (`type = "novita"`), its keys camelCased by the core (`docker_image` → `dockerImage`). */
export const createProviderFromConfig = factories.fromConfig;
