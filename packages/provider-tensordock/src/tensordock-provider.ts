/** The TensorDock provider: an adapter on `@skyward/provider-utils`'s machine-provider base (README: What it supports). */
import {
  defineApiVm,
  type MachineAdapter,
  type MachineClusterData,
  machineProviderFactories,
  nameTagCodec,
  readAfterCreate,
  SKYWARD_TAGS,
} from "@skyward/provider-utils";
import { type TensorDockInstance, tensordockApi, tensordockCalls } from "./tensordock-api.js";
import { offerIdOf, sizeFor, type TensorDockOfferData, tensordockOffers } from "./tensordock-offers.js";
import { type ParsedSettings, settingsSchema, type TensorDockSettings } from "./tensordock-settings.js";

/** What a TensorDock cluster keeps in `Cluster.specific`: the SSH key pair put on every VM. */
export type TensorDockClusterData = MachineClusterData;

/** The VM half of the adapter; its boot script runs from cloud-init's `runcmd`, as root. */
export const tensordockVm = defineApiVm({
  api: tensordockApi,
  // A marketplace; each VM a separate host at its own public IP (README: Limits).
  capabilities: Object.freeze({ spot: false, offerCache: "marketplace", peerNetwork: "none" }),
  machineNoun: "instance",
  endpoints: tensordockCalls,
  // The self-destruct finds a VM by name in `GET /instances` (a VM does not know its own id).
  selfDestruct: {
    header: "Authorization",
    headerPrefix: "Bearer ",
    idPattern: "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}",
    listPath: "/instances",
    listItems: ["data", "instances"],
    deletePath: "/instances/{id}",
    keyFile: "/etc/skyward/tensordock-api-token",
  },
});

/** The port forwarded to 22, when the instance lists one (`{"22": 20022}` or `[{internal_port, external_port}]`). */
function sshPortOf(portForwards: unknown): number {
  const entries = Array.isArray(portForwards)
    ? (portForwards as Record<string, unknown>[]).map((entry) => [entry?.internal_port, entry?.external_port])
    : Object.entries(typeof portForwards === "object" && portForwards !== null ? portForwards : {});
  const forwarded = Number(entries.find(([internal]) => Number(internal) === 22)?.[1]);
  return Number.isInteger(forwarded) && forwarded > 0 ? forwarded : 22;
}

/** The instance's name carries its cluster and pool; its GPUs (`[{gpuV0Name, count}]` or `{model: {count}}`) its offer. */
const tags = nameTagCodec<TensorDockInstance>({
  nameOf: (instance) => instance.name,
  extra({ resources, location_id }) {
    const gpus = resources?.gpus;
    const [model, value] = Array.isArray(gpus)
      ? [gpus[0]?.gpuV0Name, gpus[0]]
      : (Object.entries((typeof gpus === "object" && gpus) || {})[0] ?? []);
    const count = Number(value?.count ?? 1);
    const offer = typeof model === "string" && model ? offerIdOf(location_id, model, count) : undefined;
    return { ...(offer && { [SKYWARD_TAGS.offer]: offer }), [SKYWARD_TAGS.spot]: "0" };
  },
});

/** The fields of an answer that say something (neither null nor empty). */
const known = (answer: object) => Object.entries(answer).filter(([, value]) => value != null && value !== "");

function adapterFor(settings: ParsedSettings): MachineAdapter<TensorDockInstance, TensorDockClusterData> {
  const { calls, fields, bootScript, mapped } = tensordockVm.adapterBase(settings, (instance) =>
    instance.publicIp ? { id: instance.id, ipAddress: instance.publicIp } : undefined,
  );
  const machine = mapped({
    // TensorDock's statuses (https://dashboard.tensordock.com/api/docs/instance-management; README: Statuses).
    statuses: {
      running: ["running"],
      stopping: ["stopping", "deleting"],
      terminated: ["stopped", "stoppeddisassociated", "deleted", "error"],
    },
    deleting: ["deleting", "deleted"],
    tags: tags.read,
    nameTag: "tensordock:name",
    address: ({ ipAddress: host, portForwards }) =>
      host ? { host, port: sshPortOf(portForwards) } : undefined,
    seamAddress: (id, { host }) => ({ id, ipAddress: host }),
    hourlyPrice: (instance) => instance.rateHourly,
  });
  const { location, storageGb, minVcpus, minRamGb } = settings;
  return {
    ...fields,
    ...machine,
    cacheKey: JSON.stringify([settings.apiUrl, location ?? null, storageGb, minVcpus, minRamGb]),
    offers: (query, signal) => tensordockOffers(calls, settings, query, signal),

    async create({ cluster, name, watchdogSeconds, hourlyPrice: rateHourly, signal }) {
      const offer = cluster.offer.specific as unknown as TensorDockOfferData;
      const { locationId: location_id, gpuModel: gpuV0Name, gpuCount: count } = offer;
      const script = Buffer.from(bootScript(name, watchdogSeconds), "utf8").toString("base64");
      const size = sizeFor({ ...settings, storageGb: offer.storageGb }, { diskGb: cluster.spec.diskGb });
      const gpus = { [gpuV0Name]: { count } };
      const resources = { vcpu_count: offer.vcpus, ram_gb: offer.ramGb, storage_gb: size.storageGb, gpus };
      const reach = { location_id, useDedicatedIp: true, ssh_key: cluster.specific.publicKey };
      // One `runcmd` entry piping the script, base64-encoded, to `sh`: nothing of it on a command line.
      const boot = { cloud_init: { runcmd: [`echo ${script} | base64 -d | sh`] } };
      const vm = { name, type: "virtualmachine", image: settings.operatingSystem, resources };
      const body = { data: { type: "virtualmachine", attributes: { ...vm, ...reach, ...boot } } };
      const { data: created } = await calls.create({ body, purpose: `creating instance ${name}` }, signal);
      // The create answers only the id, name and status: the rest is what was asked, or what a read shows.
      const asked = { name, location_id, resources: { gpus: [{ gpuV0Name, count }] }, rateHourly };
      // What it bills is read back (`rateHourly`): the base deletes a VM over the cap (README: Offers).
      const shown = await readAfterCreate(calls.get({ id: created.id }, signal), () => created, signal);
      return { ...created, ...asked, ...Object.fromEntries([...known(created), ...known(shown)]) };
    },

    get: (id, signal) => calls.get({ id }, signal),
    listPage: calls.instances.page,
    isMachineId: (id) => /^[A-Za-z0-9-]+$/.test(id),
    tags,
  };
}

const factories = machineProviderFactories<TensorDockSettings>()("TensorDock", settingsSchema, adapterFor);

/** The TensorDock provider: `TensorDock()` or `TensorDock({ location: "Germany" })`; bad settings throw `ConfigurationError`. */
export const TensorDock = factories.provider;

/** Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "tensordock"`), keys camelCased. */
export const createProviderFromConfig = factories.fromConfig;
