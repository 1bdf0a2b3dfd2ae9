/**
 * The Vast.ai provider: GPU instances rented from the Vast.ai marketplace, on demand or interruptible
 * (a bid of the offer's spot price), reached over SSH as root, directly on the machine's public address
 * and the port mapped to 22, or through Vast.ai's SSH proxy. Every instance runs an `onstart` script that
 * arms its self-destruct (`onstart-script.ts`). An adapter on provider-utils' machine-provider base; what
 * is Vast.ai's own is that one ask rents once, so each node rents the next ask of the kind.
 */
import { type Cluster, type Offer, offerQuery, type ProviderV1 } from "@skyward/core/contract";
import {
  askRentals,
  containerMarketplace,
  declaredImageCuda,
  deleteUntilGone,
  labelTags,
  listAllMachines,
  type MachineAdapter,
  type MachineClusterData,
  type MachineCreateRequest,
  machineProviderFactories,
  readAfterCreate,
  setUpOrDelete,
} from "@skyward/provider-utils";
import { onstartScript, SELF_DESTRUCT_COMMAND } from "./onstart-script.js";
import { VastApiError, type VastInstance, vastClient, vastInstanceSchema } from "./vastai-api.js";
import { diskFor, type VastOfferData, vastOffers } from "./vastai-offers.js";
import { type ParsedSettings, settingsSchema, type VastAISettings } from "./vastai-settings.js";

/** What a Vast.ai cluster keeps in {@link Cluster.specific}. */
export interface VastClusterData extends MachineClusterData {
  readonly image: string;
  readonly diskGb: number;
}

/** Instance labels: `<cluster id>-<node index> <offer id>`, then the pool id when there is one. */
const labels = labelTags("vastai");

function adapterFor(parsed: ParsedSettings, written: unknown) {
  // `minCuda` raised to the CUDA a `DockerImage` states (`sky.containers.cuda("12.9")` → 12.9), read from
  // the settings as written: the parsed one is the tag alone.
  const cuda = Number(declaredImageCuda(written, "dockerImage") ?? 0);
  const settings = { ...parsed, minCuda: Math.max(parsed.minCuda, Number.isFinite(cuda) ? cuda : 0) };
  const client = vastClient(settings);
  const searchOffers = vastOffers(settings, client);
  const rentals = askRentals();
  const onstart = onstartScript(settings);

  /**
   * Rents one ask of the cluster's kind in the request's market (`askRentals`): the cluster's own offer
   * first, then the asks a search for the same spec finds. Then attaches the cluster's key to the
   * instance alone (an account key reaches every instance).
   */
  async function create({ cluster, spot, name, signal }: MachineCreateRequest<VastClusterData>) {
    const label = labels.label(name, cluster);
    const askOf = ({ specific, spotPrice, onDemandPrice }: Offer) => {
      const { askId: id, gpuName, bid } = specific as unknown as VastOfferData;
      return { id, gpuName, bid, price: spot ? spotPrice : onDemandPrice };
    };
    const own = askOf(cluster.offer);
    // The query the pool sent to `offers` for this spec, in this market: every node meets the spec.
    const query = { ...offerQuery(cluster.spec), allocation: spot ? "spot" : "on-demand" } as const;
    const searched = async () =>
      (await searchOffers(query, signal)).map(askOf).filter((ask) => ask.gpuName === own.gpuName);
    const body = {
      client_id: "me",
      image: cluster.specific.image,
      disk: cluster.specific.diskGb,
      label,
      runtype: settings.ssh === "direct" ? "ssh_direct" : "ssh_proxy",
      onstart,
      env: { ...settings.env, SKYWARD_CLUSTER: cluster.id },
      cancel_unavail: true,
    };
    const { id, price } = await rentals.rent({
      cluster: cluster.id,
      name: label,
      market: spot ? "bid" : "on-demand",
      maxHourlyCost: cluster.spec.maxHourlyCost,
      asks: [async () => [own], searched],
      async rent({ id: askId, bid }) {
        const answer = await client.rent({ askId, body: spot ? { ...body, price: bid } : body }, signal);
        if (answer.new_contract != null) return answer.new_contract;
        const why = answer.msg ?? answer.error ?? "no instance id in the answer";
        const message = `Vast.ai did not rent offer ${askId}: ${why}`;
        throw new VastApiError({ kind: "capacity", statusCode: 410, message });
      },
      findLost: async () =>
        (await listAllMachines(adapter, signal)).find((found) => found.label === label)?.id,
      // A bid below the machine's minimum: Vast.ai creates the instance stopped, billing its disk. Its id
      // is the answer's `new_contract` (or `instance_id`), or "instance N" in its message.
      async cleanUp(error, kind) {
        if (kind !== "price" || !VastApiError.isInstance(error)) return undefined;
        const answer = error.answer as Record<string, unknown> | undefined;
        const field = answer?.new_contract ?? answer?.instance_id;
        const named = /instance\D{0,4}(\d{5,})/i.exec(error.message)?.[1];
        const stopped = typeof field === "number" && Number.isInteger(field) ? field : named && Number(named);
        if (!stopped) return undefined;
        await deleteUntilGone(adapter, [String(stopped)], signal);
        return ` (instance ${stopped}, created stopped, was destroyed)`;
      },
      noAsk: (message) => new VastApiError({ kind: "capacity", message }),
      label: "Vast.ai",
      signal,
    });
    // Unreachable without its key: destroyed rather than left billing.
    const attach = () => client.attachKey({ id, body: { ssh_key: cluster.specific.publicKey } }, signal);
    await setUpOrDelete(adapter, String(id), attach, signal, (error, destroyError) => {
      const message = `Vast.ai did not attach Skyward's key to instance ${id} (${error.message}), and destroying it failed too (${destroyError.message}): instance ${id} (label "${label}") may still be billing — \`skyward down\` removes it (it finds it by its label)`;
      return new VastApiError({ kind: "bad-request", message });
    });
    const asked = { id, label, actual_status: "loading", is_bid: spot, dph_total: price };
    if (spot) return vastInstanceSchema.parse(asked);
    // An on-demand rent takes no price: what it bills is read back, the ask may have been raised since
    // the offer was cached (the base deletes an instance over the cap).
    const read = client.get({ id }, signal).then(({ instances }) => instances ?? asked);
    const instance = await readAfterCreate(read, () => asked, signal);
    return vastInstanceSchema.parse({ ...asked, ...instance, dph_total: instance.dph_total ?? price });
  }

  // Instances are rented on separate machines, each behind its own NAT: no network between them, so a
  // distributed-training plugin on several nodes is refused at validation (core), not left to hang.
  // Vast.ai takes no idempotency token: a rent whose answer was lost is found by its label.
  const adapter: MachineAdapter<VastInstance, VastClusterData> = {
    ...containerMarketplace({
      name: "vastai",
      label: "Vast.ai",
      settings,
      clusterIdPrefix: "skyward",
      peerNetwork: "none",
      containers: "instances",
      mapping: {
        statuses: { running: ["running"], terminated: ["exited", "stopped", "offline", "destroyed"] },
        statusWord: (instance: VastInstance) => instance.actual_status,
        // One asked to stop is on its way out whatever it does now.
        status: ({ intended_status: intended }, byWord) =>
          intended?.toLowerCase() !== "stopped" ? byWord : byWord === "running" ? "stopping" : "terminated",
        name: (instance) => labels.name(instance.label),
        tags: (instance) => labels.tags(instance.label),
        address({ ports, public_ipaddr: ip, ssh_host: host, ssh_port: port }) {
          const mapped = Number(ports && !Array.isArray(ports) ? ports["22/tcp"]?.[0]?.HostPort : undefined);
          const publicIp = ip?.trim();
          if (settings.ssh === "direct" && publicIp && Number.isInteger(mapped) && mapped > 0)
            return { host: publicIp, port: mapped };
          return host && port ? { host, port } : undefined;
        },
        publicIp: (instance) => instance.public_ipaddr?.trim() || null,
        // Instances on different machines share no private network: peers reach each other publicly.
        privateIp: (_instance, _standIn, publicIp) => publicIp,
        spot: (instance) => instance.is_bid === true,
        hourlyPrice: (instance) => instance.dph_total,
        createdAt: ({ start_date: started }) => (started && started > 0 ? Math.round(started * 1000) : null),
        root: settings.root,
      },
    }),
    // Every setting the search's answer depends on (the image by the CUDA it states), so a provider set
    // otherwise never gets another's cached offers.
    cacheKey: JSON.stringify([
      settings.minReliability,
      settings.verifiedOnly,
      settings.minCuda,
      settings.geolocation ?? null,
      settings.bidMultiplier,
      settings.diskGb,
      settings.ssh,
      settings.searchLimit,
    ]),

    checkCredentials: () => void client.resolveApiKey(),
    offers: searchOffers,
    async prepare({ spec, keys }) {
      // The key is attached to each instance as it is rented, never registered on the account.
      return { ...keys, image: settings.dockerImage, diskGb: diskFor(settings, spec.diskGb) };
    },
    create,
    get: async (id, signal) => (await client.get({ id }, signal)).instances ?? null,
    listPage: client.list.page,
    delete: { one: async (id, signal) => void (await client.destroy({ id, body: {} }, signal)) },
    isMachineId: (id) => /^\d+$/.test(id),
    // Installed by the onstart script, with the instance-scoped API key Vast.ai gives the container.
    selfDestruct: () => SELF_DESTRUCT_COMMAND,
    teardown: async (cluster: Cluster<VastClusterData>) => rentals.forget(cluster.id),
  };
  return adapter;
}

const factories = machineProviderFactories<VastAISettings>()("VastAI", settingsSchema, adapterFor);

/**
 * The Vast.ai provider: `VastAI()` with default settings, or `VastAI({ minReliability: 0.98,
 * geolocation: "US" })`. Throws `ConfigurationError` for bad settings; the API key is looked up on the
 * first API call.
 */
export const VastAI: (settings?: VastAISettings) => ProviderV1<VastClusterData> = factories.provider;

/** The provider from a `[providers.NAME]` table of `skyward.toml` (`type = "vastai"`), keys camelCased: `min_reliability` → `minReliability`. */
export const createProviderFromConfig = factories.fromConfig;
