/** The Verda provider (formerly DataCrunch): an adapter on `@skyward/provider-utils`'s machine-provider base (see the README). */
import type { Instance, ProviderV1 } from "@skyward/core/contract";
import {
  knownMachines,
  type MachineAdapter,
  type MachineClusterData,
  machineAdapterHalf,
  machineProviderFactories,
  mappedMachine,
  marketListings,
  namedPoolResources,
  pythonSelfDestructProgram,
  readAfterCreate,
  renderSelfDestructScript,
  resolveClientCredentials,
  SELF_DESTRUCT_COMMAND,
  SKYWARD_TAGS,
  tagsFromDescription,
  tagsToDescription,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { createVerdaClient, VERDA_CREDENTIALS, type VerdaInstance, verdaApi } from "./verda-api.js";
import { imageFor, toOffers, type VerdaOfferData } from "./verda-offers.js";
import { type ParsedSettings, settingsSchema, type VerdaSettings } from "./verda-settings.js";

export type { VerdaOfferData } from "./verda-offers.js";
export type { VerdaSettings, VerdaSshAddress } from "./verda-settings.js";

/** What a Verda cluster keeps in `Cluster.specific`: the SSH key and startup script registered for the pool, the OS image, the OS volume (GB) when set. */
export interface VerdaClusterData extends MachineClusterData {
  readonly sshKeyId: string;
  readonly startupScriptId: string;
  readonly image: string;
  readonly osVolumeGb: number | undefined;
}

/** The startup script's self-destruct: a token, then the instance (by id, or by hostname) deleted with its OS volume. */
const SELF_DESTRUCT = pythonSelfDestructProgram({
  tokenPath: VERDA_CREDENTIALS.tokenPath,
  listPath: "/instances",
  nameField: "hostname",
  delete: {
    method: "PUT",
    path: "/instances",
    body: { action: "delete", id: ["{id}"], volume_ids: ["{os_volume_id}"], delete_permanently: true },
  },
});

function adapterFor(settings: ParsedSettings): MachineAdapter<VerdaInstance, VerdaClusterData> {
  const api = createVerdaClient(settings);
  const addressOf = ({ id, publicIp }: Instance) => (publicIp ? { id, ip: publicIp } : undefined);
  const { standIns, fields } = machineAdapterHalf({ name: "verda", label: "Verda", settings, addressOf });
  const machine = mappedMachine<VerdaInstance, { id: string; ip: string }>(standIns, {
    // The others (new, ordered, validating, provisioning) are on their way; a discontinued spot instance is lost.
    statuses: {
      running: ["running"],
      stopping: ["offline", "deleting"],
      terminated: ["error", "notfound", "no_capacity", "installation_failed", "deleted", "discontinued"],
    },
    deleting: ["deleting", "deleted"],
    name: (instance) => instance.hostname,
    nameTag: "verda:hostname",
    tags: (instance) => tagsFromDescription(instance.description),
    // One address, the public `ip`: no private network between instances (README: Several nodes).
    address: (instance) => (instance.ip?.trim() ? { host: instance.ip.trim(), port: 22 } : undefined),
    seamAddress: (id, { host }) => ({ id, ip: host }),
    spot: (instance) => instance.is_spot === true,
    hourlyPrice: (instance) => instance.price_per_hour,
    createdAt: (instance) => instance.created_at,
  });
  const credentials = () => resolveClientCredentials(verdaApi, VERDA_CREDENTIALS, settings);
  const read = (id: string, signal: AbortSignal) => api.instance({ id }, signal);

  // The SSH keys and startup scripts a pool registers; `skyward down` removes those of pools with no instance left.
  const resources = namedPoolResources({
    prefix: "verda",
    kinds: {
      sshKey: { kind: "SSH key", list: api.sshKeys, remove: api.deleteSshKey },
      script: { kind: "startup script", list: api.scripts.all, remove: api.deleteScript },
    },
    liveClusters: async (signal) => machine.liveClusters(await api.instances.all({}, signal)),
  });

  return {
    ...fields,
    ...machine,
    cacheKey: JSON.stringify([settings.apiUrl, settings.location ?? null]),
    checkCredentials: () => void credentials(),

    async offers(query, signal) {
      const [types, available] = await Promise.all([
        api.instanceTypes({}, signal),
        marketListings(query, (spot) => api.capacity({ query: { is_spot: String(spot) } }, signal), []),
      ]);
      return toOffers(types, available, { ...query, region: query.region ?? settings.location });
    },

    async prepare({ spec, offer, poolId, clusterId, keys, signal }) {
      const image = imageFor(settings, offer);
      const name = resources.name(clusterId, poolId);
      const { clientId, clientSecret } = credentials();
      const sshKeyId = await api.sshKey({ body: { name, key: keys.publicKey } }, signal);
      const seconds = Math.ceil(spec.ttl + spec.sshTimeout + spec.bootstrapTimeout);
      const script = renderSelfDestructScript({
        secret: `${clientId}\n${clientSecret}`,
        secretFile: "/etc/skyward/verda-credentials",
        program: SELF_DESTRUCT,
        programArguments: [settings.apiUrl],
        commandPath: SELF_DESTRUCT_COMMAND,
        watchdog: { seconds, root: DEFAULT_NODE_ROOT, target: "--self" },
      });
      const startupScriptId = await api.script({ body: { name, script } }, signal);
      // The setting's or the spec's disk, the larger; neither: Verda's size for the type.
      const osVolumeGb = Math.max(settings.osVolumeGb ?? 0, Math.ceil(spec.diskGb ?? 0)) || undefined;
      return { ...keys, sshKeyId, startupScriptId, image, osVolumeGb };
    },

    async create({ cluster, spot, name: hostname, tags, signal }) {
      const { instanceType, location } = cluster.offer.specific as unknown as VerdaOfferData;
      const { image, sshKeyId, startupScriptId, osVolumeGb } = cluster.specific;
      const description = tagsToDescription({ ...tags, [SKYWARD_TAGS.region]: location });
      // A spot instance always names its OS volume (100 GB), deleted with it once discontinued: no volume billing left.
      const size = osVolumeGb ?? (spot ? 100 : undefined);
      const discontinue = spot ? { on_spot_discontinue: "delete_permanently" } : {};
      const volume =
        size === undefined ? {} : { os_volume: { name: `${hostname}-os`, size, ...discontinue } };
      // The price of the offer (`FIXED_PRICE`), never one that moves with demand.
      const market = { instance_type: instanceType, location_code: location, pricing: "FIXED_PRICE" };
      const keys = { ssh_key_ids: [sshKeyId], startup_script_id: startupScriptId };
      const body = { ...market, ...keys, image, hostname, description, is_spot: spot, ...volume };
      const id = await api.deploy({ body }, signal);
      const asked = { id, hostname, description, status: "provisioning", is_spot: spot };
      return readAfterCreate(read(id, signal), () => asked, signal);
    },

    get: read,
    // One page: Verda documents no paging of `GET /instances`.
    listPage: (cursor, signal) => api.instances.page(cursor, signal),
    delete: {
      async batch(ids, signal) {
        // The OS volumes go with their instances.
        const listed = () => api.instances.all({}, signal);
        const known = await knownMachines(ids, listed, (id) => read(id, signal), fields.idOf);
        const outcomes = known.length > 0 ? await api.deleteInstances(known, signal) : new Map();
        return new Map(ids.map((id) => [id, outcomes.get(id) ?? "gone"] as const));
      },
    },
    isMachineId: (id) => /^[A-Za-z0-9-]+$/.test(id),
    cleanup: resources.cleanup,
    async teardown({ specific }, signal) {
      await resources.remove("sshKey", specific?.sshKeyId, signal);
      await resources.remove("script", specific?.startupScriptId, signal);
    },
  };
}

const factories = machineProviderFactories<VerdaSettings>()("Verda", settingsSchema, adapterFor);

/** The Verda provider: `Verda()` or `Verda({ location: "FIN-01" })`; bad settings throw `ConfigurationError`. */
export const Verda: (settings?: VerdaSettings) => ProviderV1<VerdaClusterData> = factories.provider;

/** The provider from a `skyward.toml` table (`type = "verda"`), its keys camelCased by the core (`client_id` → `clientId`). */
export const createProviderFromConfig: (settings: Record<string, unknown>) => ProviderV1<VerdaClusterData> =
  factories.fromConfig;
