/**
 * The TensorDock provider: GPU virtual machines from TensorDock's marketplace through its v2 API,
 * placed by location (TensorDock picks the hostnode), each with a dedicated IP and reached over SSH on
 * port 22 as `user` with sudo. TensorDock keeps nothing but an instance's name, so the name carries the
 * cluster and pool ids (`skyward-1a2b3c4d-0--<pool>`); `teardown` and `listInstances` find them by it.
 */
import { NoCapacityError } from "@skyward/core";
import {
  acceleratorFormFactor,
  type Cluster,
  canonicalAcceleratorName,
  type Instance,
  type InstanceStatus,
  type Offer,
  type OfferQuery,
  type ProviderV1,
  parseInput,
  shellQuote,
} from "@skyward/core/contract";
import {
  createClusterId,
  filterOffers,
  type HttpSettings,
  httpSettingsShape,
  instanceSsh,
  keysDirectorySchema,
  type ProviderHttpClient,
  requireOwnOffer,
  roundPrice,
  skywardKeysDirectory,
  skywardTags,
  sshReachableStatus,
} from "@skyward/provider-utils";
import {
  DEFAULT_NODE_ROOT,
  ensureSshKeyPair,
  findSshIdentityFile,
  launchSshWorker,
  reconnectThroughGetInstance,
} from "@skyward/ssh";
import { z } from "zod";
import { bootCloudInit, renderBootScript, SELF_DESTRUCT_COMMAND } from "./boot-script.js";
import {
  instanceAnswerSchema,
  instancesAnswerSchema,
  type Location,
  type LocationGpu,
  locationsAnswerSchema,
  parseAnswer,
  TENSORDOCK_API_URL,
  TensorDockApiError,
  type TensorDockInstance,
  tensordockApi,
} from "./tensordock-api.js";

/** What the {@link TensorDockSettings.sshAddress} test seam receives: the instance as TensorDock describes it. */
export interface TensorDockInstanceAddress {
  /** The instance id (a UUID). */
  readonly id: string;
  /** Its (dedicated) IP address. */
  readonly ipAddress: string;
}

/** What the {@link TensorDockSettings.sshAddress} test seam returns: where the pool reaches the instance instead. */
export interface TensorDockSshMapping {
  /** Host name or address to connect to. */
  readonly host: string;
  /** The SSH port. */
  readonly port: number;
  /** The login user; default the provider's `sshUser`. */
  readonly user?: string;
  /** The stand-in host's Skyward root directory. */
  readonly root?: string;
  /** The stand-in host's key fingerprint (`SHA256:…`); default trust on first use. */
  readonly hostKeyFingerprint?: string;
  /** The shell operation run instead of the instance's self-destruct (a stand-in host must never be deleted). */
  readonly selfDestruct?: string;
}

/** Settings of the TensorDock provider; every field is optional. */
export interface TensorDockSettings extends HttpSettings {
  /** The API token. Default: the `TENSORDOCK_API_TOKEN` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The API root. Default `https://dashboard.tensordock.com/api/v2`. */
  apiUrl?: string;
  /** Only locations in this country, city, state or with this id (`"United States"`); a spec's `region` does the same. */
  location?: string;
  /** Disk per VM, GB (TensorDock's minimum is 100); a spec's `diskGb` raises it. Default 100. */
  storageGb?: number;
  /** The OS image (`"ubuntu2404"`, `"ubuntu2204"`). Default `"ubuntu2404"`. */
  operatingSystem?: string;
  /** The fewest vCPUs a VM gets; a spec's `vcpus` raises it. Default 4. */
  minVcpus?: number;
  /** The least RAM a VM gets, GB; a spec's `memoryGb` raises it. Default 16. */
  minRamGb?: number;
  /** The login user of the image. Default `"user"` (with passwordless sudo), as on TensorDock's images. */
  sshUser?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * For tests only: where the pool reaches an instance instead of its IP address (a stand-in SSH host),
   * and what runs instead of its self-destruct.
   */
  sshAddress?: (instance: TensorDockInstanceAddress) => TensorDockSshMapping;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface TensorDockOfferData {
  /** The location to deploy at. */
  readonly locationId: string;
  /** TensorDock's GPU model (`geforcertx4090-pcie-24gb`). */
  readonly gpuModel: string;
  readonly gpuCount: number;
  readonly vcpus: number;
  readonly ramGb: number;
  readonly storageGb: number;
}

/** What a TensorDock cluster keeps in {@link Cluster.specific}. */
export interface TensorDockClusterData {
  /** The public key put on every VM. */
  readonly publicKey: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
}

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  apiUrl: z
    .url({ error: "expected the API's base URL" })
    .transform((value) => value.replace(/\/+$/, ""))
    .default(TENSORDOCK_API_URL),
  location: z.string().min(1, { message: "expected a country, city or location id" }).optional(),
  storageGb: z
    .number({ error: "expected the disk size in GB" })
    .int({ message: "expected the disk size in GB as a whole number" })
    .min(100, { message: "expected at least 100 GB (TensorDock's minimum)" })
    .default(100),
  operatingSystem: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]*$/, { message: 'expected an image id such as "ubuntu2404"' })
    .default("ubuntu2404"),
  minVcpus: z.number().int({ message: "expected a whole number of vCPUs" }).min(1).default(4),
  minRamGb: z.number().positive({ message: "expected a RAM size in GB" }).default(16),
  sshUser: z
    .string({ error: "expected a user name" })
    .regex(/^[a-z_][a-z0-9_-]*$/, { message: "expected a user name" })
    .default("user"),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<(instance: TensorDockInstanceAddress) => TensorDockSshMapping>(
      (value) => typeof value === "function",
      {
        message: "expected a function (for tests only)",
      },
    )
    .optional(),
});

type ParsedSettings = z.output<typeof settingsSchema>;

const NAME = "tensordock";
const KEY_NAME = "tensordock_ed25519";
/** `<cluster id>-<n>`, then `--<pool id>` when there is one: the name of a Skyward instance. */
const INSTANCE_NAME = /^(skyward-[0-9a-f]{8})-(\d+)(?:--([A-Za-z0-9_-]+))?$/;

/**
 * The canonical accelerator, its memory and its form factor (when the name says it: `H100 SXM5 80GB`,
 * `A100 PCIe 80GB`) of a TensorDock GPU, or undefined.
 */
export function acceleratorOfGpu(
  gpu: Pick<LocationGpu, "v0Name" | "displayName">,
): { name: string; memoryGb: number; formFactor?: string } | undefined {
  const v0Words = gpu.v0Name.replaceAll("-", " ");
  const name = canonicalAcceleratorName(gpu.displayName) ?? canonicalAcceleratorName(v0Words);
  if (!name) return undefined;
  const memory = /(\d+)\s*GB/i.exec(gpu.displayName)?.[1] ?? /(\d+)gb/i.exec(gpu.v0Name)?.[1];
  const formFactor = acceleratorFormFactor(gpu.displayName) ?? acceleratorFormFactor(v0Words);
  return { name, memoryGb: memory ? Number(memory) : 0, ...(formFactor === undefined ? {} : { formFactor }) };
}

function locationMatches(location: Location, wanted: string): boolean {
  const needle = wanted.trim().toLowerCase();
  return [location.id, location.country, location.city, location.stateprovince].some(
    (field) => field.toLowerCase() === needle,
  );
}

function regionOf(location: Location): string {
  return [location.city, location.country].filter(Boolean).join(", ") || location.id;
}

function statusOf(status: string): InstanceStatus {
  switch (status.toLowerCase()) {
    case "running":
      return "running";
    case "stopping":
    case "deleting":
      return "stopping";
    case "stopped":
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

function isCapacityProblem(error: unknown): boolean {
  return (
    TensorDockApiError.isInstance(error) &&
    (error.statusCode === 400 || error.statusCode === 409 || error.statusCode === 503) &&
    /no available|capacity|insufficient|not enough|out of stock|unavailable/i.test(error.message)
  );
}

function isGone(error: unknown): boolean {
  return TensorDockApiError.isInstance(error) && error.statusCode === 404;
}

function parseSettings(settings: TensorDockSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

function build(settings: ParsedSettings): ProviderV1<TensorDockClusterData> {
  const http: ProviderHttpClient = tensordockApi.createClient(settings);
  const api = settings.apiUrl;
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const counters = new Map<string, number>();

  const offerIdOf = (locationId: string, model: string, count: number) =>
    `tensordock:${locationId}:${model}:x${count}`;

  function toInstance(instance: TensorDockInstance, identityFile: string | undefined): Instance {
    const parsed = INSTANCE_NAME.exec(instance.name);
    const gpus = gpusOf(instance);
    const offerId = gpus ? offerIdOf(instance.location_id, gpus.model, gpus.count) : "";
    const tags: Record<string, string> = parsed?.[1]
      ? skywardTags({
          cluster: parsed[1],
          ...(parsed[3] ? { pool: parsed[3] } : {}),
          ...(offerId ? { offer: offerId } : {}),
          spot: false,
        })
      : {};
    if (instance.name) tags["tensordock:name"] = instance.name;
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
    return Object.freeze({
      id: instance.id,
      status: sshReachableStatus(status, ssh),
      publicIp: ip,
      // VMs on different hostnodes share no private network: peers reach each other on their own IPs.
      privateIp: mapping?.host ?? ip,
      ssh,
      spot: false,
      hourlyPrice: instance.rateHourly ?? null,
      offerId,
      createdAt: Date.now(),
      tags: Object.freeze(tags),
    });
  }

  async function listLocations(signal: AbortSignal): Promise<Location[]> {
    const { data } = await http.send({
      method: "GET",
      url: `${api}/locations`,
      idempotent: true,
      purpose: "listing locations",
      signal,
    });
    return parseAnswer(locationsAnswerSchema, data, "listing locations").data.locations;
  }

  function toOffer(
    location: Location,
    gpu: LocationGpu,
    query: OfferQuery,
    pricesAsOf: string,
  ): Offer | undefined {
    const accelerator = query.accelerator;
    if (!accelerator || gpu.network_features?.dedicated_ip_available === false) return undefined;
    const model = acceleratorOfGpu(gpu);
    if (!model || model.name !== accelerator.name) return undefined;
    const count = accelerator.count;
    if ((gpu.max_count ?? 0) < count || gpu.price_per_hr === null) return undefined;
    const vcpus = Math.max(settings.minVcpus, Math.ceil(query.vcpus ?? 0));
    const ramGb = Math.max(settings.minRamGb, Math.ceil(query.memoryGb ?? 0));
    const storageGb = Math.max(settings.storageGb, Math.ceil(query.diskGb ?? 0));
    const limits = gpu.resources;
    if (
      (limits?.max_vcpus ?? Number.POSITIVE_INFINITY) < vcpus ||
      (limits?.max_ram_gb ?? Number.POSITIVE_INFINITY) < ramGb ||
      (limits?.max_storage_gb ?? Number.POSITIVE_INFINITY) < storageGb
    )
      return undefined;
    const pricing = gpu.pricing;
    const hourly =
      gpu.price_per_hr * count +
      (pricing?.per_vcpu_hr ?? 0) * vcpus +
      (pricing?.per_gb_ram_hr ?? 0) * ramGb +
      (pricing?.per_gb_storage_hr ?? 0) * storageGb;
    return Object.freeze({
      id: offerIdOf(location.id, gpu.v0Name, count),
      provider: NAME,
      instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.displayName || gpu.v0Name}`,
      accelerator: Object.freeze({
        name: model.name,
        count,
        memoryGb: model.memoryGb,
        ...(model.formFactor === undefined ? {} : { formFactor: model.formFactor }),
      }),
      vcpus,
      memoryGb: ramGb,
      diskGb: storageGb,
      architecture: "x86_64" as const,
      region: regionOf(location),
      spotPrice: null,
      onDemandPrice: roundPrice(hourly),
      billingUnit: "second" as const,
      pricesAsOf,
      specific: Object.freeze({
        locationId: location.id,
        gpuModel: gpu.v0Name,
        gpuCount: count,
        vcpus,
        ramGb,
        storageGb,
      } satisfies TensorDockOfferData),
    });
  }

  async function listAll(signal: AbortSignal): Promise<TensorDockInstance[]> {
    const { data } = await http.send({
      method: "GET",
      url: `${api}/instances`,
      idempotent: true,
      purpose: "listing instances",
      signal,
    });
    return parseAnswer(instancesAnswerSchema, data, "listing instances").data.instances;
  }

  async function deleteInstance(id: string, signal: AbortSignal): Promise<void> {
    if (!/^[A-Za-z0-9-]+$/.test(id)) return; // Not an id TensorDock issues: nothing of ours to delete.
    try {
      await http.send({
        method: "DELETE",
        url: `${api}/instances/${id}`,
        idempotent: true,
        purpose: `deleting instance ${id}`,
        signal,
      });
    } catch (error) {
      if (!isGone(error)) throw error;
    }
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    capabilities: Object.freeze({
      spot: false,
      volumes: false,
      images: true,
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

    async offers({ query, signal }) {
      // TensorDock deploys by location only with a GPU, and only x86_64 machines.
      if (!query.accelerator || query.architecture === "arm64" || query.allocation === "spot") return [];
      const wanted = [query.region, settings.location].filter(
        (value): value is string => value !== undefined,
      );
      const asOf = new Date().toISOString();
      const offers = (await listLocations(signal))
        .filter((location) => wanted.every((entry) => locationMatches(location, entry)))
        .flatMap((location) => location.gpus.flatMap((gpu) => toOffer(location, gpu, query, asOf) ?? []));
      return filterOffers(offers, query);
    },

    async prepare({ spec, offer, poolId }) {
      requireOwnOffer(offer, NAME, "TensorDock");
      tensordockApi.resolveApiKey(settings.apiKey);
      const keys = await ensureSshKeyPair(keysDirectory(), KEY_NAME);
      return Object.freeze({
        id: createClusterId(),
        provider: NAME,
        poolId: poolId ?? "",
        region: offer.region,
        spec,
        offer,
        ssh: Object.freeze({
          user: settings.sshUser,
          identityFile: keys.identityFile,
          sudo: settings.sshUser !== "root",
        }),
        specific: Object.freeze({ publicKey: keys.publicKey, identityFile: keys.identityFile }),
      });
    },

    async provision({ cluster, count, signal }) {
      const specific = cluster.offer.specific as unknown as TensorDockOfferData;
      const apiToken = tensordockApi.resolveApiKey(settings.apiKey);
      const pool = cluster.poolId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24);
      const created: Instance[] = [];
      const reasons: string[] = [];
      while (created.length < count) {
        const next = counters.get(cluster.id) ?? 0;
        counters.set(cluster.id, next + 1);
        const name = `${cluster.id}-${next}${pool ? `--${pool}` : ""}`;
        const script = renderBootScript({
          apiUrl: api,
          apiToken,
          vmName: name,
          root: DEFAULT_NODE_ROOT,
          watchdogSeconds: Math.ceil(
            cluster.spec.ttl + cluster.spec.sshTimeout + cluster.spec.bootstrapTimeout,
          ),
        });
        let answer: { data: unknown };
        try {
          answer = await http.send({
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
                    vcpu_count: specific.vcpus,
                    ram_gb: specific.ramGb,
                    storage_gb: Math.max(specific.storageGb, Math.ceil(cluster.spec.diskGb ?? 0)),
                    gpus: { [specific.gpuModel]: { count: specific.gpuCount } },
                  },
                  location_id: specific.locationId,
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
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          if (isCapacityProblem(error)) {
            reasons.push((error as Error).message);
            break;
          }
          // Instances already created are handed back (the pool asks again), never left unknown.
          if (created.length > 0) break;
          throw error;
        }
        const instance = parseAnswer(instanceAnswerSchema, answer.data, "creating an instance").data;
        const shown = toInstance(
          {
            ...instance,
            name: instance.name || name,
            location_id: instance.location_id || specific.locationId,
            resources: instance.resources ?? {
              gpus: [{ gpuV0Name: specific.gpuModel, count: specific.gpuCount }],
            },
            rateHourly: instance.rateHourly ?? cluster.offer.onDemandPrice,
          },
          cluster.specific.identityFile,
        );
        created.push(Object.freeze({ ...shown, offerId: cluster.offer.id }));
      }
      if (created.length === 0) {
        throw new NoCapacityError({
          attempts: (reasons.length > 0 ? reasons : ["TensorDock created no instance"]).map((reason) => ({
            provider: NAME,
            offer: cluster.offer.instanceType,
            reason,
          })),
        });
      }
      return created;
    },

    async getInstance({ cluster, id, signal }) {
      if (!/^[A-Za-z0-9-]+$/.test(id)) return null;
      try {
        const { data } = await http.send({
          method: "GET",
          url: `${api}/instances/${id}`,
          idempotent: true,
          purpose: `looking up instance ${id}`,
          signal,
        });
        const instance = parseAnswer(instanceAnswerSchema, data, `looking up instance ${id}`).data;
        // A cluster rebuilt from an instance's tags (`skyward down`) has no specific data.
        return toInstance(instance, cluster.specific?.identityFile ?? cluster.ssh?.identityFile);
      } catch (error) {
        if (isGone(error)) return null;
        throw error;
      }
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) await deleteInstance(id, signal);
    },

    async teardown({ cluster, signal }) {
      counters.delete(cluster.id);
      for (const instance of await listAll(signal)) {
        if (INSTANCE_NAME.exec(instance.name)?.[1] !== cluster.id) continue;
        if (instance.status.toLowerCase() === "deleting") continue;
        await deleteInstance(instance.id, signal);
      }
    },

    selfDestruct({ instance }) {
      if (settings.sshAddress && instance.publicIp) {
        // A stand-in host of a test is not the VM: it must never be deleted.
        return settings.sshAddress({ id: instance.id, ipAddress: instance.publicIp }).selfDestruct ?? "true";
      }
      // Installed by the VM's boot script, with the token it saved there (see boot-script.ts).
      const command = `${SELF_DESTRUCT_COMMAND} ${shellQuote(instance.id)}`;
      return settings.sshUser === "root" ? command : `sudo -n ${command}`;
    },

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), KEY_NAME);
      return (await listAll(signal))
        .filter((instance) => INSTANCE_NAME.test(instance.name))
        .map((instance) => toInstance(instance, identityFile));
    },
  };
}

/**
 * The TensorDock provider: `TensorDock()` with default settings, or `TensorDock({ location: "Germany" })`.
 * Throws {@link ConfigurationError} for bad settings; the API token is looked up on the first API call.
 */
export function TensorDock(settings: TensorDockSettings = {}): ProviderV1<TensorDockClusterData> {
  return build(parseSettings(settings, "TensorDock"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "tensordock"`), its
 * keys already camelCased by the core: `storage_gb = 200` arrives as `storageGb`.
 */
export function createProviderFromConfig(
  settings: Record<string, unknown>,
): ProviderV1<TensorDockClusterData> {
  return build(parseSettings(settings as TensorDockSettings, ""));
}
