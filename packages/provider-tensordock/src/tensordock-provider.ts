/**
 * The TensorDock provider: GPU virtual machines from TensorDock's marketplace through its v2 API,
 * placed by location (TensorDock picks the hostnode), each with a dedicated IP and reached over SSH on
 * port 22 as `user` with sudo. It is an adapter on `@skyward/provider-utils`'s machine-provider base,
 * which owns the market loop, idempotent creates, deletes until gone and lists that fail loudly.
 * TensorDock keeps nothing but an instance's name, so the name carries the cluster and pool ids
 * (`skyward-1a2b3c4d-0--<pool>`): it is the tag codec, and what a create whose answer was lost is
 * looked for by.
 */
import type { Instance } from "@skyward/core/contract";
import {
  type ApiBootScriptOptions,
  describeMachine,
  type MachineAdapter,
  type MachineClusterData,
  machineProviderFactories,
  renderApiBootScript,
  SELF_DESTRUCT_COMMAND,
  selfDestructCommand,
  skywardTags,
  standInSeam,
  statusTable,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import {
  createdAnswerSchema,
  instanceAnswerSchema,
  instancesAnswerSchema,
  locationsAnswerSchema,
  type TensorDockInstance,
  tensordockApi,
} from "./tensordock-api.js";
import {
  locationMatches,
  NAME,
  offerIdOf,
  sizeFor,
  type TensorDockOfferData,
  toOffer,
} from "./tensordock-offers.js";
import { type ParsedSettings, settingsSchema, type TensorDockSettings } from "./tensordock-settings.js";

export type { TensorDockOfferData } from "./tensordock-offers.js";
export type {
  TensorDockInstanceAddress,
  TensorDockSettings,
  TensorDockSshMapping,
} from "./tensordock-settings.js";

/** What a TensorDock cluster keeps in `Cluster.specific`: the SSH key pair put on every VM. */
export type TensorDockClusterData = MachineClusterData;

/** `<cluster id>-<n>`, then `--<pool id>` when there is one: the name of a Skyward instance. */
const INSTANCE_NAME = /^(skyward-[0-9a-f]{8})-(\d+)(?:--([A-Za-z0-9_-]+))?$/;

/**
 * TensorDock's statuses (https://dashboard.tensordock.com/api/docs/instance-management), as Skyward's.
 * A stopped VM, and one stopped with its GPUs released to others ("StoppedDisassociated"), runs
 * nothing: the node is lost, though the VM bills its storage until deleted.
 */
const statusOf = statusTable({
  running: ["running"],
  stopping: ["stopping", "deleting"],
  terminated: ["stopped", "stoppeddisassociated", "deleted", "error"],
});

/** How the VM's self-destruct calls the API: by id, or by name from `GET /instances` (see `renderApiBootScript`). */
const SELF_DESTRUCT_API = {
  header: "Authorization",
  headerPrefix: "Bearer ",
  idPattern: "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}",
  listPath: "/instances",
  listItems: ["data", "instances"],
  deletePath: "/instances/{id}",
};

/** The boot script of a TensorDock VM: it arms the VM's self-destruct and boot watchdog (cloud-init runs it as root). */
export function renderBootScript(options: ApiBootScriptOptions): string {
  return renderApiBootScript(SELF_DESTRUCT_API, {
    keyFile: "/etc/skyward/tensordock-api-token",
    ...options,
  });
}

/** The port forwarded to 22, when the instance lists one (`{"22": 20022}` or `[{internal_port, external_port}]`). */
function sshPortOf(portForwards: unknown): number {
  const entries = Array.isArray(portForwards)
    ? (portForwards as Record<string, unknown>[]).map((entry) => [entry?.internal_port, entry?.external_port])
    : Object.entries(typeof portForwards === "object" && portForwards !== null ? portForwards : {});
  const forwarded = Number(entries.find(([internal]) => Number(internal) === 22)?.[1]);
  return Number.isInteger(forwarded) && forwarded > 0 ? forwarded : 22;
}

/** The GPU model and count of an instance (`[{gpuV0Name, count}]` or `{model: {count}}`). */
function gpusOf(instance: TensorDockInstance): { model: string; count: number } | undefined {
  const gpus = instance.resources?.gpus;
  if (typeof gpus !== "object" || gpus === null) return undefined;
  const [model, value] = Array.isArray(gpus)
    ? [(gpus[0] as { gpuV0Name?: unknown } | undefined)?.gpuV0Name, gpus[0] as { count?: unknown }]
    : (Object.entries(gpus as Record<string, { count?: unknown }>)[0] ?? []);
  return typeof model === "string" && model ? { model, count: Number(value?.count ?? 1) } : undefined;
}

/** The Skyward tags an instance's name carries (its cluster, pool and offer); empty for others. */
function tagsOf(instance: TensorDockInstance): Record<string, string> {
  const parsed = INSTANCE_NAME.exec(instance.name);
  if (!parsed?.[1]) return {};
  const gpus = gpusOf(instance);
  const offer = gpus ? offerIdOf(instance.location_id, gpus.model, gpus.count) : undefined;
  return {
    ...skywardTags({ cluster: parsed[1], pool: parsed[3], offer, spot: false }),
    "tensordock:name": instance.name,
  };
}

function adapterFor(settings: ParsedSettings): MachineAdapter<TensorDockInstance, TensorDockClusterData> {
  const client = tensordockApi.jsonClient(settings);
  const standIns = standInSeam(settings.sshAddress, (instance: Instance) =>
    instance.publicIp ? { id: instance.id, ipAddress: instance.publicIp } : undefined,
  );

  return {
    name: NAME,
    label: "TensorDock",
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    // Each VM is a separate host reached at its own public IP, with only the forwarded ports open.
    capabilities: Object.freeze({ spot: false, offerCache: "marketplace", peerNetwork: "none" }),
    // Every setting the offers depend on (the API asked, the location, the sizes priced in), so that a
    // provider set otherwise is never handed offers the core cached for another. Not the operating
    // system, user or key: they shape the VM, not the offers.
    cacheKey: JSON.stringify([
      settings.apiUrl,
      settings.location ?? null,
      settings.storageGb,
      settings.minVcpus,
      settings.minRamGb,
    ]),
    sshUser: settings.sshUser,
    keyName: "tensordock_ed25519",
    keysDirectory: settings.keysDirectory,
    // TensorDock's create takes no idempotency token: a create whose answer was lost is looked for by name.
    idempotencyToken: false,
    bootWatchdog: "boot-command",

    checkCredentials: () => void tensordockApi.resolveApiKey(settings.apiKey),

    async offers(query, signal) {
      // TensorDock deploys by location only with a GPU, and only x86_64 machines, never spot.
      if (!query.accelerator || query.architecture === "arm64" || query.allocation === "spot") return [];
      const wanted = [query.region, settings.location].filter((value) => value !== undefined);
      const answer = await client.read(
        "offers",
        "/locations",
        locationsAnswerSchema,
        "listing locations",
        signal,
      );
      const asOf = new Date().toISOString();
      return answer.data.locations
        .filter((location) => wanted.every((entry) => locationMatches(location, entry)))
        .flatMap((location) =>
          location.gpus.flatMap((gpu) => toOffer(settings, location, gpu, query, asOf) ?? []),
        );
    },

    async create({ cluster, name, watchdogSeconds, hourlyPrice, signal }) {
      const offer = cluster.offer.specific as unknown as TensorDockOfferData;
      const script = renderBootScript({
        apiUrl: settings.apiUrl,
        apiKey: tensordockApi.resolveApiKey(settings.apiKey),
        vmName: name,
        root: DEFAULT_NODE_ROOT,
        watchdogSeconds,
      });
      const { storageGb } = sizeFor(
        { ...settings, storageGb: offer.storageGb },
        { diskGb: cluster.spec.diskGb },
      );
      const attributes = {
        name,
        type: "virtualmachine",
        image: settings.operatingSystem,
        resources: {
          vcpu_count: offer.vcpus,
          ram_gb: offer.ramGb,
          storage_gb: storageGb,
          gpus: { [offer.gpuModel]: { count: offer.gpuCount } },
        },
        location_id: offer.locationId,
        useDedicatedIp: true,
        ssh_key: cluster.specific.publicKey,
        // One `runcmd` entry piping the script, base64-encoded, to `sh`: nothing of it on a command line.
        cloud_init: { runcmd: [`echo ${Buffer.from(script, "utf8").toString("base64")} | base64 -d | sh`] },
      };
      const data = { data: { type: "virtualmachine", attributes } };
      const purpose = `creating instance ${name}`;
      const answer = await client.call("create", "POST", "/instances", createdAnswerSchema, purpose, signal, {
        data,
      });
      const created = answer.data;
      // The create answer has only the id, name and status: the rest is what was asked.
      return {
        ...created,
        name: created.name || name,
        location_id: created.location_id || offer.locationId,
        resources: created.resources ?? { gpus: [{ gpuV0Name: offer.gpuModel, count: offer.gpuCount }] },
        rateHourly: created.rateHourly ?? hourlyPrice,
      };
    },

    get: (id, signal) =>
      client.read("get", `/instances/${id}`, instanceAnswerSchema, `looking up instance ${id}`, signal),

    async listPage(_cursor, signal) {
      // One page: TensorDock documents no paging of `GET /instances`.
      const answer = await client.read(
        "list",
        "/instances",
        instancesAnswerSchema,
        "listing instances",
        signal,
      );
      return { machines: answer.data.instances };
    },

    delete: {
      async one(id, signal) {
        await client.remove("delete", `/instances/${id}`, `deleting instance ${id}`, signal);
        standIns.forget(id);
      },
    },

    isMachineId: (id) => /^[A-Za-z0-9-]+$/.test(id),
    isBeingDeleted: (instance) => ["deleting", "deleted"].includes(instance.status.toLowerCase()),
    idOf: (instance) => instance.id,

    tags: {
      name: (cluster, index) => {
        const pool = cluster.poolId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24);
        return `${cluster.id}-${index}${pool ? `--${pool}` : ""}`;
      },
      nameOf: (instance) => instance.name || undefined,
      read: tagsOf,
    },

    describe(instance, { identityFile }) {
      const ip = instance.ipAddress || null;
      const standIn = standIns.of(instance.id, ip ? { id: instance.id, ipAddress: ip } : undefined);
      return describeMachine({
        id: instance.id,
        status: statusOf(instance.status),
        address: ip ? { host: ip, port: sshPortOf(instance.portForwards), user: settings.sshUser } : null,
        identityFile,
        standIn,
        publicIp: ip,
        // VMs on different hostnodes share no private network: peers reach each other on their own IPs.
        privateIp: standIn?.host ?? ip,
        spot: false,
        hourlyPrice: instance.rateHourly ?? null,
        tags: tagsOf(instance),
        createdAt: Date.now(),
      });
    },

    // Installed by the VM's boot script, with the token it saved there: it deletes the VM through the
    // API, which is what ends the bill.
    selfDestruct: (instance) =>
      standIns.selfDestruct(
        instance,
        selfDestructCommand(SELF_DESTRUCT_COMMAND, instance.id, settings.sshUser),
      ),
  };
}

const factories = machineProviderFactories<TensorDockSettings>()("TensorDock", settingsSchema, adapterFor);

/**
 * The TensorDock provider: `TensorDock()` with default settings, or `TensorDock({ location: "Germany" })`.
 * Throws {@link ConfigurationError} for bad settings; the API token is looked up on the first API call.
 */
export const TensorDock = factories.provider;

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "tensordock"`), its
 * keys already camelCased by the core: `storage_gb = 200` arrives as `storageGb`.
 */
export const createProviderFromConfig = factories.fromConfig;
