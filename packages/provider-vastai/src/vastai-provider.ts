/**
 * The Vast.ai provider: GPU instances rented from the Vast.ai marketplace, on demand or interruptible
 * (a bid of the offer's spot price), reached over SSH as root, directly on the machine's public address
 * and the port mapped to 22, or through Vast.ai's SSH proxy. Every instance runs an `onstart` script that
 * arms its self-destruct (`onstart-script.ts`). An adapter on provider-utils' machine-provider base; what
 * is Vast.ai's own is that one ask rents once, so each node rents the next ask of the kind.
 */
import { type Cluster, type Offer, offerQuery, type ProviderV1 } from "@skyward/core/contract";
import {
  deleteUntilGone,
  IMAGE_PULL_PROVISION_TIMEOUT_SECONDS,
  listAllMachines,
  type MachineAdapter,
  type MachineClusterData,
  type MachineCreateRequest,
  machineAdapterHalf,
  machineErrorKind,
  machineProviderFactories,
  mappedMachine,
  readAfterCreate,
  skywardTags,
  standInSeam,
} from "@skyward/provider-utils";
import { SELF_DESTRUCT_COMMAND } from "./onstart-script.js";
import { VastApiError, type VastInstance, vastClient, vastInstanceSchema } from "./vastai-api.js";
import { diskFor, searchOffers, type VastOfferData } from "./vastai-offers.js";
import {
  onstartScript,
  type ParsedSettings,
  settingsSchema,
  type VastAISettings,
  type VastSshMode,
  withImageCuda,
} from "./vastai-settings.js";

/** What a Vast.ai cluster keeps in {@link Cluster.specific}. */
export interface VastClusterData extends MachineClusterData {
  readonly image: string;
  readonly diskGb: number;
}

/** `<cluster id>[-<node index>] <offer id>`, then the pool id when there is one: the instance's label. */
const LABEL = /^(skyward-[0-9a-f]{8})(?:-\d+)? (\S+)(?: (\S+))?$/;

/** Skyward's tags of an instance, read from its label; empty when it is not Skyward's. */
function tagsOf(instance: VastInstance): Record<string, string> {
  const label = instance.label ?? "";
  const parsed = LABEL.exec(label);
  const tags: Record<string, string> = parsed?.[1]
    ? skywardTags({ cluster: parsed[1], offer: parsed[2] ?? "", ...(parsed[3] ? { pool: parsed[3] } : {}) })
    : {};
  if (label) tags["vastai:label"] = label;
  return tags;
}

/** Vast.ai's instances as Skyward sees them: `running`, with SSH coordinates, once they run and their SSH port is known. */
export function vastMachine(ssh: VastSshMode, root?: string) {
  // Vast.ai's settings have no `sshAddress` test seam.
  const noSeam = standInSeam(undefined, () => undefined);
  return mappedMachine(noSeam, {
    statuses: { running: ["running"], terminated: ["exited", "stopped", "offline", "destroyed"] },
    statusWord: (instance: VastInstance) => instance.actual_status,
    // One asked to stop is on its way out whatever it does now.
    status: ({ intended_status: intended }, byWord) =>
      intended?.toLowerCase() !== "stopped" ? byWord : byWord === "running" ? "stopping" : "terminated",
    deleting: [],
    name: (instance) => instance.label?.split(" ")[0],
    tags: tagsOf,
    address(instance) {
      const ports = instance.ports && !Array.isArray(instance.ports) ? instance.ports : {};
      const directPort = Number(ports["22/tcp"]?.[0]?.HostPort ?? Number.NaN);
      const publicIp = instance.public_ipaddr?.trim();
      if (ssh === "direct" && publicIp && Number.isInteger(directPort) && directPort > 0)
        return { host: publicIp, port: directPort };
      return instance.ssh_host && instance.ssh_port
        ? { host: instance.ssh_host, port: instance.ssh_port }
        : undefined;
    },
    seamAddress: () => undefined,
    publicIp: (instance) => instance.public_ipaddr?.trim() || null,
    // Instances on different machines share no private network: peers reach each other publicly.
    privateIp: (_instance, _standIn, publicIp) => publicIp,
    spot: (instance) => instance.is_bid === true,
    hourlyPrice: (instance) => instance.dph_total,
    createdAt: ({ start_date: started }) =>
      started != null && started > 0 ? Math.round(started * 1000) : null,
    root,
  });
}

/** The instance id in a refused bid's answer: `new_contract`, or "instance N" in its message. */
function instanceIdInRefusal(error: unknown): number | undefined {
  if (!VastApiError.isInstance(error)) return undefined;
  const answer = error.answer as Record<string, unknown> | undefined;
  const field = answer?.new_contract ?? answer?.instance_id;
  if (typeof field === "number" && Number.isInteger(field)) return field;
  const match = /instance\D{0,4}(\d{5,})/i.exec(error.message);
  return match?.[1] ? Number(match[1]) : undefined;
}

/** An ask to rent, at the prices of its offer. */
function askOf(offer: Offer) {
  const { askId, gpuName, bid } = offer.specific as unknown as VastOfferData;
  return { askId, gpuName, bid, spotPrice: offer.spotPrice, onDemandPrice: offer.onDemandPrice };
}

function adapterFor(settings: ParsedSettings): MachineAdapter<VastInstance, VastClusterData> {
  const client = vastClient(settings);
  /** The asks each cluster rented: an ask rents once, so they are never asked again. */
  const rentedAsks = new Map<string, Set<number>>();
  /** Labels whose rent's answer was lost and that no list showed yet: the rent may have happened. */
  const unsettledRents = new Set<string>();

  /** Rents `askId` (at `bid` in the spot market); its instance id, a capacity error when none came back. */
  async function rent(
    cluster: Cluster<VastClusterData>,
    askId: number,
    bid: number | null,
    label: string,
    signal: AbortSignal,
  ) {
    const { image, diskGb: disk } = cluster.specific;
    const runtype = settings.ssh === "direct" ? "ssh_direct" : "ssh_proxy";
    const env = { ...settings.env, SKYWARD_CLUSTER: cluster.id };
    const body = {
      client_id: "me",
      image,
      disk,
      label,
      runtype,
      onstart: onstartScript(settings),
      env,
      cancel_unavail: true,
    };
    const answer = await client.rent({ askId, body: bid !== null ? { ...body, price: bid } : body }, signal);
    if (answer.new_contract != null) return answer.new_contract;
    const why = answer.msg ?? answer.error ?? "no instance id in the answer";
    throw new VastApiError({
      kind: "capacity",
      statusCode: 410,
      message: `Vast.ai did not rent offer ${askId}: ${why}`,
    });
  }

  /**
   * Rents one ask of the cluster's kind in the request's market: the cluster's own offer first, then
   * the asks a search for the same spec finds, each at its own price checked against `maxHourlyCost`.
   * Then attaches the cluster's key to the instance alone (an account key reaches every instance).
   */
  async function create(request: MachineCreateRequest<VastClusterData>): Promise<VastInstance> {
    const { cluster, spot, signal } = request;
    const rented = rentedAsks.get(cluster.id) ?? new Set<number>();
    rentedAsks.set(cluster.id, rented);
    const label = `${request.name} ${cluster.offer.id}${cluster.poolId ? ` ${cluster.poolId.replace(/\s+/g, "")}` : ""}`;
    const cap = cluster.spec.maxHourlyCost;
    const market = spot ? "bid" : "on-demand";
    const refusals: string[] = [];
    const tried = new Set<number>();
    const own = askOf(cluster.offer);
    // The query the pool sent to `offers` for this spec, in this market: every node meets the spec.
    const query = { ...offerQuery(cluster.spec), allocation: spot ? "spot" : "on-demand" } as const;
    const searched = async () =>
      (await searchOffers(settings, client, query, signal))
        .map(askOf)
        .filter((ask) => ask.gpuName === own.gpuName);
    for (const asks of [async () => [own], searched])
      for (const ask of await asks()) {
        const price = spot ? ask.spotPrice : ask.onDemandPrice;
        if (rented.has(ask.askId) || tried.has(ask.askId) || price === null || (spot && ask.bid === null))
          continue;
        tried.add(ask.askId);
        if (cap !== undefined && price > cap) {
          refusals.push(`${market} on offer ${ask.askId}: $${price}/h is over maxHourlyCost $${cap}/h`);
          continue;
        }
        let id: number;
        try {
          id = await rent(cluster, ask.askId, spot ? ask.bid : null, label, signal);
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          const kind = machineErrorKind(error);
          if (kind === "unavailable" || kind === "unknown-answer") {
            // Rented perhaps, its answer lost: found by its label, it gets its key; else the base retries.
            const found = (await listAllMachines(adapter, signal)).find(
              (instance) => instance.label === label,
            );
            if (!found) {
              unsettledRents.add(label);
              throw error;
            }
            id = found.id;
          } else if (kind === "capacity" || kind === "gone" || kind === "price") {
            // A bid below the machine's minimum: Vast.ai creates the instance stopped, billing its disk.
            const stopped = kind === "price" ? instanceIdInRefusal(error) : undefined;
            if (stopped !== undefined) await deleteUntilGone(adapter, [String(stopped)], signal);
            else rented.add(ask.askId); // Taken by someone else, or gone: not offered again.
            // The lost rent may be what took this ask: renting another would make a second instance
            // while the first bills unseen. The base waits for it to be listed instead.
            if (unsettledRents.delete(label)) throw error;
            const destroyed =
              stopped !== undefined ? ` (instance ${stopped}, created stopped, was destroyed)` : "";
            refusals.push(`${market} on offer ${ask.askId}: ${(error as Error).message}${destroyed}`);
            continue;
          } else throw error;
        }
        rented.add(ask.askId);
        unsettledRents.delete(label);
        // Unreachable without its key: destroyed rather than left billing.
        await client
          .attachKey({ id, body: { ssh_key: cluster.specific.publicKey } }, signal)
          .catch(async (error: unknown) => {
            await deleteUntilGone(adapter, [String(id)], signal).catch((destroyError: unknown) => {
              if (signal.aborted) throw signal.reason;
              // Not a kind the base retries: a retry would find this keyless instance by its name.
              throw new VastApiError({
                kind: "bad-request",
                message: `Vast.ai did not attach Skyward's key to instance ${id} (${(error as Error).message}), and destroying it failed too (${(destroyError as Error).message}): instance ${id} (label "${label}") may still be billing — \`skyward down\` removes it (it finds it by its label)`,
              });
            });
            throw error;
          });
        const asked = { id, label, actual_status: "loading", is_bid: spot, dph_total: price };
        if (spot) return vastInstanceSchema.parse(asked);
        // An on-demand rent takes no price: what it bills is read back, the ask may have been raised since
        // the offer was cached (the base deletes an instance over the cap).
        const read = client.get({ id }, signal).then(({ instances }) => instances ?? asked);
        const instance = await readAfterCreate(read, () => asked, signal);
        return vastInstanceSchema.parse({ ...asked, ...instance, dph_total: instance.dph_total ?? price });
      }
    const message =
      refusals.length > 0 ? refusals.join("; ") : "Vast.ai has no other ask of this kind to rent";
    throw new VastApiError({ kind: "capacity", message });
  }

  // A marketplace: the core caches its offers for an hour at most. Instances are rented on separate
  // machines, each behind its own NAT: no network between them, so a distributed-training plugin on
  // several nodes is refused at validation (core), not left to hang. Vast.ai takes no idempotency
  // token: a rent whose answer was lost is found by its label.
  const capabilities = Object.freeze({
    spot: true,
    offerCache: "marketplace",
    peerNetwork: "none",
    provisionTimeout: IMAGE_PULL_PROVISION_TIMEOUT_SECONDS,
  });
  const half = { name: "vastai", label: "Vast.ai", settings, capabilities, clusterIdPrefix: "skyward" };
  const { fields } = machineAdapterHalf({ ...half, addressOf: () => undefined });

  const adapter: MachineAdapter<VastInstance, VastClusterData> = {
    ...fields,
    containersWithoutFuse: "instances",
    ...vastMachine(settings.ssh, settings.root),
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
    offers: (query, signal) => searchOffers(settings, client, query, signal),
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
    async teardown(cluster: Cluster<VastClusterData>) {
      rentedAsks.delete(cluster.id);
      for (const label of unsettledRents)
        if (label.startsWith(`${cluster.id}-`)) unsettledRents.delete(label);
    },
  };
  return adapter;
}

const factories = machineProviderFactories<VastAISettings>()("VastAI", settingsSchema, (parsed, written) =>
  adapterFor(withImageCuda(parsed, written)),
);

/**
 * The Vast.ai provider: `VastAI()` with default settings, or `VastAI({ minReliability: 0.98,
 * geolocation: "US" })`. Throws `ConfigurationError` for bad settings; the API key is looked up on the
 * first API call.
 */
export const VastAI: (settings?: VastAISettings) => ProviderV1<VastClusterData> = factories.provider;

/** The provider from a `[providers.NAME]` table of `skyward.toml` (`type = "vastai"`), keys camelCased: `min_reliability` → `minReliability`. */
export const createProviderFromConfig = factories.fromConfig;
