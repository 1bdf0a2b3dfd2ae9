/**
 * The TensorDock provider: GPU virtual machines from TensorDock's marketplace through its v2 API,
 * placed by location (TensorDock picks the hostnode), each with a dedicated IP and reached over SSH on
 * port 22 as `user` with sudo. It is an adapter on `@skyward/provider-utils`'s machine-provider base,
 * which owns the market loop, idempotent creates, deletes until gone and lists that fail loudly.
 * TensorDock keeps nothing but an instance's name, so the name carries the cluster and pool ids
 * (`skyward-1a2b3c4d-0--<pool>`): it is the tag codec, and what a create whose answer was lost is
 * looked for by.
 */
import type { Instance, InstanceStatus, ProviderV1 } from "@skyward/core/contract";
import { shellQuote } from "@skyward/core/contract";
import {
  defineMachineProvider,
  instanceSsh,
  type MachineAdapter,
  type MachineClusterData,
  pacedClient,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { bootCloudInit, renderBootScript, SELF_DESTRUCT_COMMAND } from "./boot-script.js";
import {
  createdAnswerSchema,
  instanceAnswerSchema,
  instancesAnswerSchema,
  locationsAnswerSchema,
  parseAnswer,
  TENSORDOCK_RATE_LIMITS,
  type TensorDockInstance,
  tensordockApi,
} from "./tensordock-api.js";
import {
  locationMatches,
  NAME,
  offerIdOf,
  RESOURCE_STEPS,
  roundUpToStep,
  type TensorDockOfferData,
  toOffer,
} from "./tensordock-offers.js";
import { type ParsedSettings, parseSettings, type TensorDockSettings } from "./tensordock-settings.js";

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

/** TensorDock's statuses (https://dashboard.tensordock.com/api/docs/instance-management), as Skyward's. */
function statusOf(status: string): InstanceStatus {
  switch (status.toLowerCase()) {
    case "running":
      return "running";
    case "stopping":
    case "deleting":
      return "stopping";
    // A stopped VM, and one stopped with its GPUs released to others ("StoppedDisassociated"), runs
    // nothing: the node is lost, though the VM bills its storage until deleted.
    case "stopped":
    case "stoppeddisassociated":
    case "deleted":
    case "error":
      return "terminated";
    default:
      return "pending";
  }
}

/** The port forwarded to 22, when the instance lists one (`{"22": 20022}` or `[{internal_port, external_port}]`). */
function sshPortOf(portForwards: unknown): number {
  if (Array.isArray(portForwards)) {
    for (const entry of portForwards as Record<string, unknown>[]) {
      if (Number(entry?.internal_port) === 22 && Number(entry?.external_port) > 0)
        return Number(entry.external_port);
    }
  } else if (typeof portForwards === "object" && portForwards !== null) {
    const forwarded = Number((portForwards as Record<string, unknown>)["22"]);
    if (Number.isInteger(forwarded) && forwarded > 0) return forwarded;
  }
  return 22;
}

/** The GPU model and count of an instance (`[{gpuV0Name, count}]` or `{model: {count}}`). */
function gpusOf(instance: TensorDockInstance): { model: string; count: number } | undefined {
  const gpus = instance.resources?.gpus;
  if (Array.isArray(gpus)) {
    const first = gpus[0] as { gpuV0Name?: unknown; count?: unknown } | undefined;
    return first && typeof first.gpuV0Name === "string"
      ? { model: first.gpuV0Name, count: Number(first.count ?? 1) }
      : undefined;
  }
  if (typeof gpus === "object" && gpus !== null) {
    const [model, value] = Object.entries(gpus as Record<string, { count?: unknown }>)[0] ?? [];
    return model ? { model, count: Number(value?.count ?? 1) } : undefined;
  }
  return undefined;
}

/** The Skyward tags an instance's name carries (its cluster, pool and offer); empty for others. */
function tagsOf(instance: TensorDockInstance): Record<string, string> {
  const parsed = INSTANCE_NAME.exec(instance.name);
  if (!parsed?.[1]) return {};
  const gpus = gpusOf(instance);
  const offerId = gpus ? offerIdOf(instance.location_id, gpus.model, gpus.count) : "";
  return {
    ...skywardTags({
      cluster: parsed[1],
      ...(parsed[3] ? { pool: parsed[3] } : {}),
      ...(offerId ? { offer: offerId } : {}),
      spot: false,
    }),
    "tensordock:name": instance.name,
  };
}

function adapterFor(settings: ParsedSettings): MachineAdapter<TensorDockInstance, TensorDockClusterData> {
  const http = pacedClient(tensordockApi.createClient(settings), TENSORDOCK_RATE_LIMITS);
  const api = settings.apiUrl;
  const isId = (id: string) => /^[A-Za-z0-9-]+$/.test(id);

  return {
    name: NAME,
    label: "TensorDock",
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    capabilities: Object.freeze({
      spot: false,
      offerCache: "marketplace",
      // Each VM is a separate host reached at its own public IP, with only the forwarded ports open.
      peerNetwork: "none",
    }),
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
      const wanted = [query.region, settings.location].filter(
        (value): value is string => value !== undefined,
      );
      const { data } = await http.send("offers", {
        method: "GET",
        url: `${api}/locations`,
        idempotent: true,
        purpose: "listing locations",
        signal,
      });
      const asOf = new Date().toISOString();
      return parseAnswer(locationsAnswerSchema, data, "listing locations")
        .data.locations.filter((location) => wanted.every((entry) => locationMatches(location, entry)))
        .flatMap((location) =>
          location.gpus.flatMap((gpu) => toOffer(settings, location, gpu, query, asOf) ?? []),
        );
    },

    async create({ cluster, name, watchdogSeconds, hourlyPrice, signal }) {
      const offer = cluster.offer.specific as unknown as TensorDockOfferData;
      const script = renderBootScript({
        apiUrl: api,
        apiToken: tensordockApi.resolveApiKey(settings.apiKey),
        vmName: name,
        root: DEFAULT_NODE_ROOT,
        watchdogSeconds,
      });
      const storageGb = roundUpToStep(
        Math.max(offer.storageGb, cluster.spec.diskGb ?? 0),
        RESOURCE_STEPS.storageGb,
      );
      const { data } = await http.send("create", {
        method: "POST",
        url: `${api}/instances`,
        data: {
          data: {
            type: "virtualmachine",
            attributes: {
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
              cloud_init: bootCloudInit(script),
            },
          },
        },
        idempotent: false,
        purpose: `creating instance ${name}`,
        signal,
      });
      const created = parseAnswer(createdAnswerSchema, data, "creating an instance").data;
      // The create answer has only the id, name and status: the rest is what was asked.
      return {
        ...created,
        name: created.name || name,
        location_id: created.location_id || offer.locationId,
        resources: created.resources ?? { gpus: [{ gpuV0Name: offer.gpuModel, count: offer.gpuCount }] },
        rateHourly: created.rateHourly ?? hourlyPrice,
      };
    },

    async get(id, signal) {
      const { data } = await http.send("get", {
        method: "GET",
        url: `${api}/instances/${id}`,
        idempotent: true,
        purpose: `looking up instance ${id}`,
        signal,
      });
      return parseAnswer(instanceAnswerSchema, data, `looking up instance ${id}`);
    },

    async listPage(_cursor, signal) {
      // One page: TensorDock documents no paging of `GET /instances`.
      const { data } = await http.send("list", {
        method: "GET",
        url: `${api}/instances`,
        idempotent: true,
        purpose: "listing instances",
        signal,
      });
      return { machines: parseAnswer(instancesAnswerSchema, data, "listing instances").data.instances };
    },

    delete: {
      async one(id, signal) {
        await http.send("delete", {
          method: "DELETE",
          url: `${api}/instances/${id}`,
          idempotent: true,
          purpose: `deleting instance ${id}`,
          signal,
        });
      },
    },

    isMachineId: isId,
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

    describe(instance, { identityFile }): Instance {
      const status = statusOf(instance.status);
      const ip = instance.ipAddress || null;
      const mapping =
        ip && settings.sshAddress ? settings.sshAddress({ id: instance.id, ipAddress: ip }) : undefined;
      const ssh =
        status === "running" && ip
          ? instanceSsh(
              { host: ip, port: sshPortOf(instance.portForwards), user: settings.sshUser },
              identityFile,
              mapping,
            )
          : null;
      const tags = tagsOf(instance);
      return Object.freeze({
        id: instance.id,
        status: sshReachableStatus(status, ssh),
        publicIp: ip,
        // VMs on different hostnodes share no private network: peers reach each other on their own IPs.
        privateIp: mapping?.host ?? ip,
        ssh,
        spot: false,
        hourlyPrice: instance.rateHourly ?? null,
        offerId: tags["skyward:offer"] ?? "",
        createdAt: Date.now(),
        tags: Object.freeze(tags),
      });
    },

    selfDestruct(instance) {
      if (settings.sshAddress && instance.publicIp) {
        // A stand-in host of a test is not the VM: it must never be deleted.
        return settings.sshAddress({ id: instance.id, ipAddress: instance.publicIp }).selfDestruct ?? "true";
      }
      // Installed by the VM's boot script, with the token it saved there (see boot-script.ts): it
      // deletes the VM through the API, which is what ends the bill.
      const command = `${SELF_DESTRUCT_COMMAND} ${shellQuote(instance.id)}`;
      return settings.sshUser === "root" ? command : `sudo -n ${command}`;
    },
  };
}

/**
 * The TensorDock provider: `TensorDock()` with default settings, or `TensorDock({ location: "Germany" })`.
 * Throws {@link ConfigurationError} for bad settings; the API token is looked up on the first API call.
 */
export function TensorDock(settings: TensorDockSettings = {}): ProviderV1<TensorDockClusterData> {
  return defineMachineProvider(adapterFor(parseSettings(settings, "TensorDock")));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "tensordock"`), its
 * keys already camelCased by the core: `storage_gb = 200` arrives as `storageGb`.
 */
export function createProviderFromConfig(
  settings: Record<string, unknown>,
): ProviderV1<TensorDockClusterData> {
  return defineMachineProvider(adapterFor(parseSettings(settings as TensorDockSettings, "")));
}
