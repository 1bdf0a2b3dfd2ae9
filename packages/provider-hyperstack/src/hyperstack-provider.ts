/**
 * The Hyperstack provider: GPU (and CPU-only) virtual machines of Hyperstack's Infrahub API. Each
 * cluster gets its own environment (in the offer's region) holding its SSH key pair and its VMs; VMs get
 * a public (floating) IP with port 22 open and are reached over SSH as `ubuntu` with sudo. Skyward's tags
 * ride on the VMs' labels (`skyward:cluster=…`), and the environment's name carries the cluster and
 * pool ids (`skyward-1a2b3c4d--<pool>`), so `teardown`, `listInstances` and `cleanup` find them again.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { NoCapacityError } from "@skyward/core";
import {
  acceleratorCatalog,
  acceleratorFormFactor,
  type Cluster,
  canonicalAcceleratorName,
  type Instance,
  type InstanceStatus,
  type LeftPoolResource,
  type Offer,
  type PoolResource,
  type ProviderV1,
  parseInput,
  shellQuote,
} from "@skyward/core/contract";
import {
  createClusterId,
  filterOffers,
  type HttpSettings,
  hourlyPriceFromTags,
  httpSettingsShape,
  instanceSsh,
  keysDirectorySchema,
  type ProviderHttpClient,
  requireOwnOffer,
  roundPrice,
  SKYWARD_TAGS,
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
import {
  createEnvironmentAnswerSchema,
  createVmsAnswerSchema,
  environmentsAnswerSchema,
  type Flavor,
  flavorsAnswerSchema,
  HYPERSTACK_API_URL,
  HyperstackApiError,
  hyperstackApi,
  imagesAnswerSchema,
  keypairsAnswerSchema,
  parseAnswer,
  pricebookAnswerSchema,
  type Vm,
  vmAnswerSchema,
  vmsAnswerSchema,
} from "./hyperstack-api.js";
import { renderUserData, SELF_DESTRUCT_COMMAND } from "./user-data.js";

/** What the {@link HyperstackSettings.sshAddress} test seam receives: the VM as Hyperstack describes it. */
export interface HyperstackVmAddresses {
  /** The VM id. */
  readonly id: string;
  /** Its floating (public) IP. */
  readonly floatingIp: string;
  /** Its fixed (private) IP, or null. */
  readonly fixedIp: string | null;
}

/** What the {@link HyperstackSettings.sshAddress} test seam returns: where the pool reaches the VM instead. */
export interface HyperstackSshMapping {
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
  /** The address peers reach it on; default the VM's fixed IP. */
  readonly privateIp?: string;
  /** The shell operation run instead of the VM's self-destruct (a stand-in host must never be deleted). */
  readonly selfDestruct?: string;
}

/** Settings of the Hyperstack provider; every field is optional. */
export interface HyperstackSettings extends HttpSettings {
  /** The API key. Default: the `HYPERSTACK_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The API root. Default `https://infrahub-api.nexgencloud.com/v1`. */
  apiUrl?: string;
  /** Where VMs may go: a region (`"CANADA-1"`) or several; a spec's `region` narrows it. Default: every region. */
  region?: string | readonly string[];
  /** The OS image's name. Default: the newest Ubuntu image with CUDA in the region (else the newest Ubuntu). */
  image?: string;
  /** The login user of the image. Default `"ubuntu"` (with passwordless sudo), as on Hyperstack's images. */
  sshUser?: string;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
  /**
   * For tests only: where the pool reaches a VM instead of its floating IP (a stand-in SSH host), and
   * what runs instead of its self-destruct.
   */
  sshAddress?: (vm: HyperstackVmAddresses) => HyperstackSshMapping;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface HyperstackOfferData {
  /** The flavor to create VMs of (`n3-A100x1`). */
  readonly flavorName: string;
  /** Its region (`CANADA-1`). */
  readonly region: string;
  /** Hyperstack's GPU model name (`A100-80G-PCIe`), or `""` for CPU-only flavors. */
  readonly gpu: string;
}

/** What a Hyperstack cluster keeps in {@link Cluster.specific}. */
export interface HyperstackClusterData {
  /** The cluster's environment. */
  readonly environmentName: string;
  readonly environmentId: number;
  /** The key pair in it (named like the cluster). */
  readonly keyName: string;
  readonly flavorName: string;
  readonly imageName: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
}

const text = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { message: `expected ${what}` });
const regionName = text('a region name such as "CANADA-1"').transform((value) => value.toUpperCase());

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  apiUrl: z
    .url({ error: "expected the API's base URL" })
    .transform((value) => value.replace(/\/+$/, ""))
    .default(HYPERSTACK_API_URL),
  region: z
    .union([regionName, z.array(regionName).min(1, { message: "expected at least one region" })], {
      error: 'expected a region name such as "CANADA-1", or a list of them',
    })
    .optional(),
  image: text("an image name").optional(),
  sshUser: z
    .string({ error: "expected a user name" })
    .regex(/^[a-z_][a-z0-9_-]*$/, { message: "expected a user name" })
    .default("ubuntu"),
  keysDirectory: keysDirectorySchema,
  sshAddress: z
    .custom<(vm: HyperstackVmAddresses) => HyperstackSshMapping>((value) => typeof value === "function", {
      message: "expected a function (for tests only)",
    })
    .optional(),
});

type ParsedSettings = z.output<typeof settingsSchema>;

const NAME = "hyperstack";
const KEY_NAME = "hyperstack_ed25519";
/** `<cluster id>--<pool id>`: the environment of a cluster. */
const ENVIRONMENT_NAME = /^(skyward-[0-9a-f]{8})--(.*)$/;
/** VM statuses of a VM that is gone or will never run again. */
const ENDED = new Set(["DELETED", "ERROR", "SHUTOFF", "HIBERNATED", "HIBERNATING", "SHELVED"]);
const PAGE_SIZE = 100;

/** Skyward's tags as VM labels (`skyward:cluster=skyward-1a2b3c4d`), and back. */
export function tagsToLabels(tags: Readonly<Record<string, string>>): string[] {
  return Object.entries(tags).map(([key, value]) => `${key}=${value}`);
}

function tagsFromLabels(labels: readonly string[]): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const label of labels) {
    const at = label.indexOf("=");
    if (at > 0 && label.startsWith("skyward:")) tags[label.slice(0, at)] = label.slice(at + 1);
  }
  return tags;
}

/**
 * The canonical accelerator, its memory and its form factor (when the name says it) of a Hyperstack
 * GPU name (`A100-80G-PCIe-w-NVLink`: PCIe boards with an NVLink bridge; `H100-80G-SXM5`: SXM), or
 * undefined.
 */
export function acceleratorOfGpu(
  gpu: string,
): { name: string; memoryGb: number; formFactor?: string } | undefined {
  const model = gpu.replace(/-spot$/i, "").replace(/-(?:w-)?NVLink$/i, "");
  const name = canonicalAcceleratorName(model);
  if (!name) return undefined;
  const stated = /(\d+)G(?:B)?\b/i.exec(model)?.[1];
  const fallback = acceleratorCatalog.find((entry) => entry.name === name)?.defaultMemory;
  const memoryGb = stated ? Number(stated) : fallback ? Number.parseInt(fallback, 10) : 0;
  const formFactor = acceleratorFormFactor(model);
  return {
    name,
    memoryGb: Number.isFinite(memoryGb) ? memoryGb : 0,
    ...(formFactor === undefined ? {} : { formFactor }),
  };
}

function statusOf(vm: Vm): InstanceStatus {
  const status = vm.status.toUpperCase();
  if (ENDED.has(status)) return "terminated";
  if (status === "DELETING") return "stopping";
  return status === "ACTIVE" && vm.floating_ip ? "running" : "pending";
}

/** The private network a fixed IP is in, as a /24: peers of a cluster share their environment's network. */
function peerNetwork(fixedIp: string): string | undefined {
  const parts = fixedIp.split(".");
  return parts.length === 4 ? `${parts.slice(0, 3).join(".")}.0/24` : undefined;
}

function isCapacityProblem(error: unknown): boolean {
  return (
    HyperstackApiError.isInstance(error) &&
    (error.statusCode === 400 || error.statusCode === 409) &&
    /stock|capacity|insufficient|not enough|unavailable|no (gpus?|hosts?|resources)/i.test(error.message)
  );
}

function isGone(error: unknown): boolean {
  return HyperstackApiError.isInstance(error) && error.statusCode === 404;
}

function parseSettings(settings: HyperstackSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

function build(settings: ParsedSettings): ProviderV1<HyperstackClusterData> {
  const http: ProviderHttpClient = hyperstackApi.createClient(settings);
  const api = settings.apiUrl;
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const vmCounters = new Map<string, number>();
  const regions = settings.region === undefined ? undefined : [settings.region].flat();

  const get = async (path: string, purpose: string, signal: AbortSignal, params?: Record<string, string>) =>
    (
      await http.send({
        method: "GET",
        url: `${api}${path}`,
        ...(params ? { params } : {}),
        idempotent: true,
        purpose,
        signal,
      })
    ).data;

  async function remove(path: string, purpose: string, signal: AbortSignal): Promise<boolean> {
    try {
      await http.send({ method: "DELETE", url: `${api}${path}`, idempotent: true, purpose, signal });
      return true;
    } catch (error) {
      if (isGone(error)) return false;
      throw error;
    }
  }

  function toInstance(vm: Vm, identityFile: string | undefined): Instance {
    const tags = tagsFromLabels(vm.labels);
    if (vm.environment?.name) tags["hyperstack:environment"] = vm.environment.name;
    const status = statusOf(vm);
    const floatingIp = vm.floating_ip || null;
    const fixedIp = vm.fixed_ip || null;
    const mapping =
      floatingIp && settings.sshAddress
        ? settings.sshAddress({ id: String(vm.id), floatingIp, fixedIp })
        : undefined;
    const ssh =
      status === "running" && floatingIp
        ? instanceSsh({ host: floatingIp, port: 22, user: settings.sshUser }, identityFile, mapping)
        : null;
    const created = Date.parse(vm.created_at);
    return Object.freeze({
      id: String(vm.id),
      status: sshReachableStatus(status, ssh),
      publicIp: floatingIp,
      privateIp: mapping?.privateIp ?? fixedIp,
      ssh,
      spot: tags[SKYWARD_TAGS.spot] === "1",
      hourlyPrice: hourlyPriceFromTags(tags),
      offerId: tags[SKYWARD_TAGS.offer] ?? "",
      createdAt: Number.isFinite(created) ? created : Date.now(),
      tags: Object.freeze(tags),
    });
  }

  async function flavorsAndPrices(region: string | undefined, signal: AbortSignal) {
    const [flavorsData, pricebookData] = await Promise.all([
      get("/core/flavors", "listing flavors", signal, region ? { region } : undefined),
      get("/pricebook", "reading the pricebook", signal),
    ]);
    const flavors = parseAnswer(flavorsAnswerSchema, flavorsData, "listing flavors").data.flatMap(
      (group) => group.flavors,
    );
    const prices = new Map<string, number>();
    for (const entry of parseAnswer(pricebookAnswerSchema, pricebookData, "reading the pricebook")) {
      if (entry.value !== null && entry.value > 0) prices.set(entry.name.toUpperCase(), entry.value);
    }
    return { flavors, prices };
  }

  function toOffer(
    flavor: Flavor,
    prices: ReadonlyMap<string, number>,
    pricesAsOf: string,
  ): Offer | undefined {
    const gpuCount = flavor.gpu_count ?? 0;
    const spot = /-spot$/i.test(flavor.gpu);
    let accelerator: Offer["accelerator"] = null;
    let hourly: number | undefined;
    if (flavor.gpu !== "" && gpuCount > 0) {
      const model = acceleratorOfGpu(flavor.gpu);
      if (!model) return undefined;
      accelerator = Object.freeze({
        name: model.name,
        count: gpuCount,
        memoryGb: model.memoryGb,
        ...(model.formFactor === undefined ? {} : { formFactor: model.formFactor }),
      });
      const perGpu =
        prices.get(flavor.gpu.toUpperCase()) ?? prices.get(flavor.gpu.replace(/-spot$/i, "").toUpperCase());
      hourly = perGpu === undefined ? undefined : perGpu * gpuCount;
    } else {
      hourly = prices.get(flavor.name.toUpperCase());
    }
    if (hourly === undefined) return undefined;
    const price = roundPrice(hourly);
    return Object.freeze({
      id: `hyperstack:${flavor.region_name}:${flavor.name}`,
      provider: NAME,
      instanceType: flavor.name,
      accelerator,
      vcpus: flavor.cpu ?? 0,
      memoryGb: flavor.ram ?? 0,
      diskGb: (flavor.disk ?? 0) + (flavor.ephemeral ?? 0),
      architecture: "x86_64" as const,
      region: flavor.region_name,
      spotPrice: spot ? price : null,
      onDemandPrice: spot ? null : price,
      billingUnit: "minute" as const,
      pricesAsOf,
      specific: Object.freeze({
        flavorName: flavor.name,
        region: flavor.region_name,
        gpu: flavor.gpu,
      } satisfies HyperstackOfferData),
    });
  }

  async function newestImage(region: string, signal: AbortSignal): Promise<string> {
    const answer = parseAnswer(
      imagesAnswerSchema,
      await get("/core/images", "listing images", signal, { region }),
      "listing images",
    );
    const images = answer.images
      .flatMap((group) => group.images)
      .filter((image) => (image.region_name || region) === region)
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
    const ubuntu = images.filter((image) => /ubuntu/i.test(image.name));
    const chosen = ubuntu.find((image) => /cuda/i.test(image.name)) ?? ubuntu[0];
    if (!chosen) {
      throw new HyperstackApiError({
        message: `Hyperstack lists no Ubuntu image in ${region}; set image to one of its images`,
      });
    }
    return chosen.name;
  }

  async function listVms(signal: AbortSignal, environment?: string): Promise<Vm[]> {
    const all: Vm[] = [];
    for (let page = 1; ; page += 1) {
      const params: Record<string, string> = {
        page: String(page),
        pageSize: String(PAGE_SIZE),
        ...(environment ? { environment, exact_environment_match: "true" } : { search: "skyward-" }),
      };
      const answer = parseAnswer(
        vmsAnswerSchema,
        await get("/core/virtual-machines", "listing virtual machines", signal, params),
        "listing virtual machines",
      );
      all.push(...answer.instances);
      if (answer.instances.length < PAGE_SIZE) return all;
    }
  }

  async function listEnvironments(signal: AbortSignal) {
    return parseAnswer(
      environmentsAnswerSchema,
      await get("/core/environments", "listing environments", signal, { pageSize: String(PAGE_SIZE) }),
      "listing environments",
    ).environments;
  }

  async function keypairsIn(environment: string, signal: AbortSignal) {
    const { keypairs } = parseAnswer(
      keypairsAnswerSchema,
      await get("/core/keypairs", "listing key pairs", signal, { pageSize: String(PAGE_SIZE) }),
      "listing key pairs",
    );
    return keypairs.filter((keypair) => {
      const owner = keypair.environment;
      const name = typeof owner === "string" ? owner : (owner as { name?: unknown } | null | undefined)?.name;
      return name === environment;
    });
  }

  async function deleteVm(id: string, signal: AbortSignal): Promise<void> {
    if (!/^\d+$/.test(id)) return; // Not an id Hyperstack issues: nothing of ours to delete.
    for (let attempt = 0; ; attempt += 1) {
      try {
        await remove(`/core/virtual-machines/${id}`, `deleting virtual machine ${id}`, signal);
        return;
      } catch (error) {
        // A VM still being created cannot be deleted yet; it can a moment later.
        const creating =
          HyperstackApiError.isInstance(error) &&
          error.statusCode === 400 &&
          /being created|cannot be deleted yet/i.test(error.message);
        if (!creating || attempt >= 10) throw error;
        await sleep(Math.min(settings.retryDelayMs * 2 ** attempt, 10_000), undefined, { signal });
      }
    }
  }

  /** Deletes an environment's key pairs, then the environment; false when VMs still hold it. */
  async function deleteEnvironment(
    environment: { id: number; name: string },
    signal: AbortSignal,
  ): Promise<{ kind: string; id: string }[]> {
    const removed: { kind: string; id: string }[] = [];
    for (const keypair of await keypairsIn(environment.name, signal)) {
      if (await remove(`/core/keypair/${keypair.id}`, `deleting key pair ${keypair.name}`, signal))
        removed.push({ kind: "key pair", id: keypair.name });
    }
    if (
      await remove(`/core/environments/${environment.id}`, `deleting environment ${environment.name}`, signal)
    )
      removed.push({ kind: "environment", id: environment.name });
    return removed;
  }

  /** Waits until the environment holds no VM (deleted ones take a moment), up to `deadline`. */
  async function waitForNoVms(environment: string, deadline: number, signal: AbortSignal): Promise<Vm[]> {
    for (;;) {
      const left = await listVms(signal, environment);
      if (left.length === 0 || Date.now() >= deadline) return left;
      await sleep(Math.min(2000, Math.max(50, settings.retryDelayMs)), undefined, { signal });
    }
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    // Prices are a catalogue, but stock moves: the core caches offers for an hour at most.
    capabilities: Object.freeze({ spot: true, volumes: false, images: true, offerCache: "marketplace" }),
    // Every setting the offers depend on (the API asked, the regions allowed), so that a provider set
    // otherwise is never handed offers the core cached for another. Not the image, user or key: they
    // shape the VM, not the offers.
    cacheKey: JSON.stringify([api, regions ? [...regions].sort() : null]),

    async offers({ query, signal }) {
      if (query.architecture === "arm64") return [];
      const wanted = query.region ? [query.region.toUpperCase()] : regions;
      if (wanted && regions && !wanted.every((region) => regions.includes(region))) return [];
      const { flavors, prices } = await flavorsAndPrices(
        wanted?.length === 1 ? wanted[0] : undefined,
        signal,
      );
      const asOf = new Date().toISOString();
      const offers = flavors
        .filter((flavor) => flavor.stock_available !== false)
        .filter((flavor) => wanted === undefined || wanted.includes(flavor.region_name.toUpperCase()))
        .flatMap((flavor) => toOffer(flavor, prices, asOf) ?? []);
      return filterOffers(offers, query);
    },

    async prepare({ spec, offer, poolId, signal }) {
      requireOwnOffer(offer, NAME, "Hyperstack");
      hyperstackApi.resolveApiKey(settings.apiKey);
      const specific = offer.specific as unknown as HyperstackOfferData;
      const keys = await ensureSshKeyPair(keysDirectory(), KEY_NAME);
      const id = createClusterId();
      const pool = (poolId ?? "").replace(/[^A-Za-z0-9_-]/g, "").slice(0, 24);
      const environmentName = `${id}--${pool}`;
      const created = parseAnswer(
        createEnvironmentAnswerSchema,
        (
          await http.send({
            method: "POST",
            url: `${api}/core/environments`,
            data: { name: environmentName, region: specific.region },
            idempotent: false,
            purpose: `creating environment ${environmentName}`,
            signal,
          })
        ).data,
        "creating an environment",
      ).environment;
      try {
        await http.send({
          method: "POST",
          url: `${api}/core/keypairs`,
          data: { name: id, environment_name: environmentName, public_key: keys.publicKey },
          idempotent: false,
          purpose: `importing key pair ${id}`,
          signal,
        });
        const imageName = settings.image ?? (await newestImage(specific.region, signal));
        return Object.freeze({
          id,
          provider: NAME,
          poolId: poolId ?? "",
          region: specific.region,
          spec,
          offer,
          ssh: Object.freeze({
            user: settings.sshUser,
            identityFile: keys.identityFile,
            sudo: settings.sshUser !== "root",
          }),
          specific: Object.freeze({
            environmentName,
            environmentId: created.id,
            keyName: id,
            flavorName: specific.flavorName,
            imageName,
            identityFile: keys.identityFile,
          }),
        });
      } catch (error) {
        // Nothing is left behind by a prepare that failed half-way.
        await deleteEnvironment(created, AbortSignal.timeout(60_000)).catch(() => undefined);
        throw error;
      }
    },

    async provision({ cluster, count, signal }) {
      const spot = cluster.offer.spotPrice !== null && cluster.offer.onDemandPrice === null;
      if (cluster.spec.allocation === "on-demand" && spot) {
        throw new NoCapacityError({
          attempts: [
            {
              provider: NAME,
              offer: cluster.offer.instanceType,
              reason: "a spot flavor, and on-demand was asked for",
            },
          ],
        });
      }
      const created: Instance[] = [];
      const reasons: string[] = [];
      const apiKey = hyperstackApi.resolveApiKey(settings.apiKey);
      const tags = skywardTags({
        cluster: cluster.id,
        pool: cluster.poolId,
        region: cluster.region,
        offer: cluster.offer.id,
        hourlyPrice: spot ? cluster.offer.spotPrice : cluster.offer.onDemandPrice,
        spot,
      });
      while (created.length < count) {
        const next = vmCounters.get(cluster.id) ?? 0;
        vmCounters.set(cluster.id, next + 1);
        const name = `${cluster.id}-${next}`;
        let answer: { data: unknown };
        try {
          answer = await http.send({
            method: "POST",
            url: `${api}/core/virtual-machines`,
            data: {
              name,
              environment_name: cluster.specific.environmentName,
              image_name: cluster.specific.imageName,
              flavor_name: cluster.specific.flavorName,
              key_name: cluster.specific.keyName,
              count: 1,
              assign_floating_ip: true,
              // Port 22 stays port 22 on the floating IP.
              enable_port_randomization: false,
              create_bootable_volume: false,
              labels: tagsToLabels(tags),
              security_rules: [
                {
                  direction: "ingress",
                  ethertype: "IPv4",
                  protocol: "tcp",
                  remote_ip_prefix: "0.0.0.0/0",
                  port_range_min: 22,
                  port_range_max: 22,
                },
              ],
              user_data: renderUserData({
                apiUrl: api,
                apiKey,
                vmName: name,
                root: DEFAULT_NODE_ROOT,
                watchdogSeconds: Math.ceil(
                  cluster.spec.ttl + cluster.spec.sshTimeout + cluster.spec.bootstrapTimeout,
                ),
              }),
            },
            idempotent: false,
            purpose: `creating virtual machine ${name}`,
            signal,
          });
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          if (isCapacityProblem(error)) {
            reasons.push((error as Error).message);
            break;
          }
          // VMs already created are handed back (the pool asks again), never left unknown.
          if (created.length > 0) break;
          throw error;
        }
        const vms = parseAnswer(createVmsAnswerSchema, answer.data, "creating a virtual machine").instances;
        created.push(...vms.map((vm) => toInstance(vm, cluster.specific.identityFile)));
        if (vms.length === 0) break;
      }
      if (created.length === 0) {
        throw new NoCapacityError({
          attempts: (reasons.length > 0 ? reasons : ["Hyperstack created no virtual machine"]).map(
            (reason) => ({
              provider: NAME,
              offer: cluster.offer.instanceType,
              reason,
            }),
          ),
        });
      }
      return created;
    },

    async getInstance({ cluster, id, signal }) {
      if (!/^\d+$/.test(id)) return null;
      let vm: Vm | null | undefined;
      try {
        vm = parseAnswer(
          vmAnswerSchema,
          await get(`/core/virtual-machines/${id}`, `looking up virtual machine ${id}`, signal),
          `looking up virtual machine ${id}`,
        ).instance;
      } catch (error) {
        if (isGone(error)) return null;
        throw error;
      }
      if (!vm) return null;
      // Peers talk to each other on their private network: open it once the VM has its address there.
      const network =
        vm.status.toUpperCase() === "ACTIVE" && vm.fixed_ip ? peerNetwork(vm.fixed_ip) : undefined;
      if (network && !vm.security_rules.some((rule) => rule.remote_ip_prefix === network)) {
        await http.send({
          method: "POST",
          url: `${api}/core/virtual-machines/${id}/sg-rules`,
          data: { direction: "ingress", ethertype: "IPv4", protocol: "any", remote_ip_prefix: network },
          idempotent: true,
          purpose: `opening the private network to virtual machine ${id}`,
          signal,
        });
      }
      // A cluster rebuilt from an instance's tags (`skyward down`) has no specific data.
      return toInstance(vm, cluster.specific?.identityFile ?? cluster.ssh?.identityFile);
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) await deleteVm(id, signal);
    },

    async teardown({ cluster, signal }) {
      const environmentName =
        cluster.specific?.environmentName ??
        (await listEnvironments(signal)).find((entry) => entry.name.startsWith(`${cluster.id}--`))?.name;
      vmCounters.delete(cluster.id);
      if (!environmentName) return;
      for (const vm of await listVms(signal, environmentName))
        if (vm.status.toUpperCase() !== "DELETING") await deleteVm(String(vm.id), signal);
      const environment = (await listEnvironments(signal)).find((entry) => entry.name === environmentName);
      if (!environment) return;
      await waitForNoVms(environmentName, Date.now() + 120_000, signal);
      await deleteEnvironment(environment, signal);
    },

    selfDestruct({ instance }) {
      if (settings.sshAddress && instance.publicIp) {
        // A stand-in host of a test is not the VM: it must never be deleted.
        const mapping = settings.sshAddress({
          id: instance.id,
          floatingIp: instance.publicIp,
          fixedIp: instance.privateIp,
        });
        return mapping.selfDestruct ?? "true";
      }
      // Installed by the VM's user data, with the key it saved there (see user-data.ts).
      const command = `${SELF_DESTRUCT_COMMAND} ${shellQuote(instance.id)}`;
      return settings.sshUser === "root" ? command : `sudo -n ${command}`;
    },

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), KEY_NAME);
      return (await listVms(signal))
        .filter((vm) => tagsFromLabels(vm.labels)[SKYWARD_TAGS.cluster] !== undefined)
        .map((vm) => toInstance(vm, identityFile));
    },

    async cleanup({ pools, waitSeconds, signal }) {
      const deadline = Date.now() + Math.max(0, waitSeconds ?? 0) * 1000;
      const removed: PoolResource[] = [];
      const left: LeftPoolResource[] = [];
      for (const environment of await listEnvironments(signal)) {
        const match = ENVIRONMENT_NAME.exec(environment.name);
        if (!match) continue;
        const poolId = match[2] || (match[1] as string);
        if (pools !== "all" && !pools.includes(poolId)) continue;
        const vms = await listVms(signal, environment.name);
        const live = vms.filter((vm) => vm.status.toUpperCase() !== "DELETING");
        const holding = live.length > 0 ? live : await waitForNoVms(environment.name, deadline, signal);
        if (holding.length > 0) {
          const reason =
            live.length > 0
              ? `virtual machine ${live[0]?.id} still uses it`
              : `virtual machine ${holding[0]?.id} is still being deleted`;
          left.push({ poolId, kind: "environment", id: environment.name, reason });
          continue;
        }
        for (const resource of await deleteEnvironment(environment, signal))
          removed.push({ poolId, ...resource });
      }
      return { removed, left };
    },
  };
}

/**
 * The Hyperstack provider: `Hyperstack()` with default settings, or `Hyperstack({ region: "CANADA-1" })`.
 * Throws {@link ConfigurationError} for bad settings; the API key is looked up on the first API call.
 */
export function Hyperstack(settings: HyperstackSettings = {}): ProviderV1<HyperstackClusterData> {
  return build(parseSettings(settings, "Hyperstack"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "hyperstack"`), its
 * keys already camelCased by the core: `ssh_user = "ubuntu"` arrives as `sshUser`.
 */
export function createProviderFromConfig(
  settings: Record<string, unknown>,
): ProviderV1<HyperstackClusterData> {
  return build(parseSettings(settings as HyperstackSettings, ""));
}
