/** The Novita AI provider: an adapter on `@skyward/provider-utils`'s machine-provider base (see the README). */
import type { ProviderV1 } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  containerBootEnvironment,
  containerMarketplace,
  containerStartCommand,
  curlSelfDestructProgram,
  environmentList,
  environmentRecord,
  type MachineAdapter,
  type MachineClusterData,
  machineProviderFactories,
  marketListings,
  perGpuOffer,
  readAfterCreate,
  refuseSetting,
  rootSshdStatements,
  roundPrice,
  SKYWARD_TAGS,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { type NovitaInstance, novitaApi, novitaClient, PAGE_SIZE } from "./novita-api.js";
import { type NovitaSettings, type ParsedSettings, settingsSchema } from "./novita-settings.js";

export { DEFAULT_NOVITA_IMAGE, type NovitaSettings, type NovitaSshAddress } from "./novita-settings.js";

/** What an offer of this provider carries in {@link Offer.specific}: Novita's product (`A100 SXM 80GB`), the GPU count, the root filesystem bounds (GB) it states. */
export interface NovitaOfferData {
  readonly productId: string;
  readonly productName: string;
  readonly gpuNum: number;
  readonly minRootFS?: number | null | undefined;
  readonly maxRootFS?: number | null | undefined;
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
 * The command every instance starts with as PID 1 (at most 2,047 characters; the rest comes in the environment): sshd
 * for root, then it stays up; the self-destruct deletes the instance through the API (README: Self-destruct).
 */
export const STARTUP_COMMAND = containerStartCommand({
  secret: { variable: "SKYWARD_NOVITA_API_KEY", file: HEADER_FILE, format: "Authorization: Bearer %s\\n" },
  prepare: rootSshdStatements("PUBLIC_KEY"),
  watchdog: { root: DEFAULT_NODE_ROOT },
  handOver: "sleep infinity",
});

function adapterFor(settings: ParsedSettings): MachineAdapter<NovitaInstance, NovitaClusterData> {
  const api = novitaClient(settings);
  // Novita pulls the image before the container starts (`pulling`): as long a wait as RunPod's and Vast.ai's.
  const half = containerMarketplace<NovitaInstance, { id: string; host: string; port: number }>({
    name: "novita",
    label: "Novita",
    settings,
    peerNetwork: "none",
    containers: "instances",
    mapping: {
      // List Instances → `status`; the others (toCreate, pulling, starting…) are on their way.
      statuses: {
        running: ["running"],
        terminated: ["removed"],
        stopping: ["toStop", "stopping", "exited", "freezing", "toRemove", "removing"],
      },
      deleting: ["toRemove", "removing", "removed"],
      nameTag: "novita:name",
      tags: ({ envs }) => skywardTagsFromEnvironment(environmentRecord(envs)),
      // `host:port` (or a URL) mapped to 22; containers share no private network: peers use this endpoint.
      address(instance) {
        const mapping = instance.portMappings?.find((entry) => entry.port === 22 && entry.endpoint);
        const match = /^(.+):(\d+)$/.exec(mapping?.endpoint?.replace(/^[a-z]+:\/\//, "") ?? "");
        return match?.[1] ? { host: match[1], port: Number(match[2]) } : undefined;
      },
      // A container's endpoint is not in its `Instance`: the seam is asked once the instance is described.
      seamAddress: (id, endpoint) => ({ id, ...endpoint }),
      spot: (instance, tags) => instance.billingMode === "spot" || tags[SKYWARD_TAGS.spot] === "1",
      hourlyPrice: ({ instancePrice: price }) => (price == null ? null : roundPrice(price / 100_000)),
      createdAt: (instance) => instance.createdAt,
    },
  });
  // `skyward-self-destruct (ID | NAME)`: by id, or by name for the boot watchdog; base64 in the environment.
  const program = curlSelfDestructProgram({
    apiUrl: settings.apiUrl,
    headerFile: HEADER_FILE,
    namePattern: "novita-*",
    // Filtered by the name ("supports fuzzy search", List Instances): on the first page however many there are.
    listPath: `/gpu/instances?pageSize=${PAGE_SIZE}&pageNum=1&name=$target`,
    delete: { method: "POST", path: "/gpu/instance/delete", body: '{"instanceId":"$id"}' },
  });
  const apiKey = () => novitaApi.resolveApiKey(settings.apiKey);
  const read = (instanceId: string, signal: AbortSignal) => api.instance({ query: { instanceId } }, signal);

  return {
    ...half,
    cacheKey: JSON.stringify([settings.apiUrl, settings.clusterId ?? null, settings.rootfsSize]),
    checkCredentials: () => void apiKey(),

    // One offer per GPU product that can be deployed, for the GPU count asked and the root filesystem wanted (README: Offers).
    async offers(query, signal) {
      // Novita's CPU instances are another product line; only GPU offers are listed.
      if (!query.accelerator || query.architecture === "arm64") return [];
      const { count, name: wanted } = query.accelerator;
      const clusterId = query.region ?? settings.clusterId;
      const asked = { gpuNum: String(count), ...(clusterId ? { clusterId } : {}) };
      const list = async (spot: boolean) =>
        (await api.products({ query: { ...asked, billingMethod: spot ? "spot" : "onDemand" } }, signal)).data;
      const listed = await marketListings(query, list, []);
      // A market's price per GPU is the one its own listing gives; an empty `spotPrice` ("") means none.
      const priceIn = (market: keyof typeof listed, id: string) => {
        const product = listed[market].find((entry) => entry.id === id);
        const price = market === "spot" ? product?.spotPrice : product?.price;
        return price ? price / 100_000 : null;
      };
      // The root filesystem prepare will ask for: the setting's, or the spec's disk if larger.
      const rootfs = Math.max(settings.rootfsSize, Math.ceil(query.diskGb ?? 0));
      const products = new Map([...listed.onDemand, ...listed.spot].map((product) => [product.id, product]));
      return [...products.values()].flatMap(({ id, name, minRootFS, maxRootFS, ...product }) => {
        // `A100 SXM 80GB`: the model, or its first word(s), names the accelerator; the name its form factor.
        const model = name.replace(/\s+\d+\s*GB.*$/i, "").trim();
        const short = model.split(/\s+/, model.startsWith("RTX") ? 2 : 1).join(" ");
        const gpu = acceleratorFromNames([model, short, name]);
        if (product.availableDeploy === false || !gpu || gpu.name !== wanted) return [];
        if ((maxRootFS ?? rootfs) < rootfs) return [];
        const perGpu = { vcpus: product.cpuPerGpu, memoryGb: product.memoryPerGpu };
        return perGpuOffer({
          provider: "novita",
          key: id,
          typeName: name,
          accelerator: gpu,
          count,
          region: clusterId,
          perGpu: { ...perGpu, spotPrice: priceIn("spot", id), onDemandPrice: priceIn("onDemand", id) },
          specific: { productId: id, productName: name, gpuNum: count, minRootFS, maxRootFS },
        });
      });
    },

    async prepare({ spec, offer, keys }) {
      const { productName, minRootFS, maxRootFS } = offer.specific as unknown as NovitaOfferData;
      const rootfsSize = Math.max(settings.rootfsSize, Math.ceil(spec.diskGb ?? 0), minRootFS ?? 0);
      const tooLarge = `${rootfsSize} GB is more root filesystem than Novita's ${productName} takes`;
      if (rootfsSize > (maxRootFS ?? rootfsSize))
        refuseSetting("rootfsSize", `${tooLarge} (maxRootFS ${maxRootFS} GB)`);
      const clusterId = spec.region ?? settings.clusterId;
      return { ...keys, image: settings.dockerImage, rootfsSize, clusterId };
    },

    async create({ cluster, spot, name, tags, watchdogSeconds, signal }) {
      const { productId, gpuNum } = cluster.offer.specific as unknown as NovitaOfferData;
      const { rootfsSize, image, clusterId, publicKey } = cluster.specific;
      const billingMode = spot ? "spot" : "onDemand";
      // What the start command reads: the key, the tags, and how to arm the boot watchdog and the self-destruct.
      const boot = containerBootEnvironment({ program, seconds: watchdogSeconds, target: name });
      const secret = { SKYWARD_NOVITA_API_KEY: apiKey() };
      const skyward = skywardTagsToEnvironment(tags);
      const tagged = { ...settings.env, PUBLIC_KEY: publicKey, ...skyward };
      const container = { name, productId, gpuNum, rootfsSize, imageUrl: image, ports: "22/tcp" };
      const pinned = clusterId ? { clusterId } : {};
      const placement = { command: STARTUP_COMMAND, kind: "gpu", billingMode, ...pinned };
      const body = { ...container, envs: environmentList({ ...tagged, ...boot, ...secret }), ...placement };
      const { id } = await api.create({ body }, signal);
      const asked = { id, name, status: "toCreate", billingMode, envs: environmentList(skyward) };
      return readAfterCreate(read(id, signal), () => asked, signal);
    },

    get: read,
    listPage: (cursor, signal) => api.instances.page(cursor, signal),
    delete: { one: async (instanceId, signal) => void (await api.delete({ body: { instanceId } }, signal)) },
    // Novita's ids are 16 hex digits; names of other shapes are never sent.
    isMachineId: (id) => /^[A-Za-z0-9_-]+$/.test(id),
  };
}

const factories = machineProviderFactories<NovitaSettings>()("Novita", settingsSchema, adapterFor);

/** The Novita provider: `Novita()` or `Novita({ rootfsSize: 100 })`; bad settings throw `ConfigurationError`. */
export const Novita: (settings?: NovitaSettings) => ProviderV1<NovitaClusterData> = factories.provider;

/** The provider from a `skyward.toml` table (`type = "novita"`), its keys camelCased by the core (`docker_image` → `dockerImage`). */
export const createProviderFromConfig: (settings: Record<string, unknown>) => ProviderV1<NovitaClusterData> =
  factories.fromConfig;
