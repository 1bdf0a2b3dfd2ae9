/**
 * The RunPod provider: GPU pods in the secure and community clouds, on demand or interruptible (a spot
 * pod, rented at a bid per GPU equal to the offer's spot price), and CPU pods. Pods are reached over
 * SSH as root on their public address and the public port mapped to 22; the public half of a key pair
 * generated here goes to the pod as `PUBLIC_KEY`, which RunPod's images install for root.
 */
import { type DockerImage, NoCapacityError } from "@skyward/core";
import {
  type Cluster,
  canonicalAcceleratorName,
  containerImageSchema,
  type Instance,
  type Offer,
  type OfferQuery,
  type ProviderV1,
  parseInput,
  shellQuote,
} from "@skyward/core/contract";
import {
  createClusterId,
  environmentVariablesSchema,
  filterOffers,
  type HttpSettings,
  httpSettingsShape,
  keysDirectorySchema,
  marketsFor,
  requireOwnOffer,
  roundPrice,
  SKYWARD_TAGS,
  skywardKeysDirectory,
  skywardTags,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
  sshReachableStatus,
} from "@skyward/provider-utils";
import { ensureSshKeyPair, findSshIdentityFile, launchSshWorker } from "@skyward/ssh";
import { z } from "zod";
import {
  answers,
  CPU_FLAVORS_QUERY,
  type CpuFlavor,
  cpuSpecificsQuery,
  DEPLOY_INTERRUPTIBLE_MUTATION,
  DEPLOY_ON_DEMAND_MUTATION,
  type GpuType,
  gpuTypesQuery,
  graphql,
  MY_PODS_QUERY,
  POD_QUERY,
  type Pod,
  parseAnswer,
  podSchema,
  RUNPOD_REST_URL,
  RunPodApiError,
  requireData,
  runpodApi,
  TERMINATE_MUTATION,
} from "./runpod-api.js";

/** The container image pods run when none is set: CUDA on Ubuntu with OpenSSH, from RunPod. */
export const DEFAULT_RUNPOD_IMAGE = "runpod/base:1.0.3-cuda1290-ubuntu2204";

/** Which RunPod cloud to rent in. */
export type RunPodCloudType = "secure" | "community" | "all";

/** Settings of the RunPod provider; every field is optional. */
export interface RunPodSettings extends HttpSettings {
  /** The API key. Default: the `RUNPOD_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** Secure cloud, community cloud, or offers from both. Default `"all"`. CPU pods are secure cloud only. */
  cloudType?: RunPodCloudType;
  /**
   * The container image: a tag or a {@link DockerImage} (`sky.containers.runpodPytorch("2.8")`). It must
   * start `sshd` with `$PUBLIC_KEY` authorised for root, as RunPod's images do. Default
   * {@link DEFAULT_RUNPOD_IMAGE}.
   */
  containerImage?: string | DockerImage;
  /** Container disk per pod, GB; a spec's `diskGb` raises it. Default 50. */
  containerDiskGb?: number;
  /** A pod volume, GB (kept while the pod lives, removed with it). Default 0: none. */
  volumeGb?: number;
  /** Where the pod volume is mounted. Default `/workspace`. */
  volumeMountPath?: string;
  /** Pin pods to this data center (`EU-RO-1`); a spec's `region` does the same. Default: any. */
  dataCenterId?: string;
  /** CPU flavors CPU-only specs may use (`cpu3c`, `cpu3g`, `cpu5c`…). Default: every flavor RunPod lists. */
  cpuFlavorIds?: readonly string[];
  /** More environment variables for every pod. */
  env?: Readonly<Record<string, string>>;
  /** Where the SSH key pair is kept. Default `$SKYWARD_HOME/keys` (`~/.skyward/keys`). */
  keysDirectory?: string;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export type RunPodOfferData =
  | {
      readonly kind: "gpu";
      readonly gpuTypeId: string;
      readonly gpuCount: number;
      readonly cloudType: "SECURE" | "COMMUNITY";
      /** The spot price per GPU: the bid placed for an interruptible pod. */
      readonly bidPerGpu: number | null;
    }
  | {
      readonly kind: "cpu";
      readonly flavorId: string;
      readonly instanceId: string;
      readonly vcpuCount: number;
      readonly memoryGb: number;
    };

/** What a RunPod cluster keeps in {@link Cluster.specific}. */
export interface RunPodClusterData {
  /** The public key given to every pod as `PUBLIC_KEY`. */
  readonly publicKey: string;
  /** The private key's path on this machine (mode 0600). */
  readonly identityFile: string;
  /** The container image of the pods. */
  readonly image: string;
  /** The container disk per pod, GB. */
  readonly containerDiskGb: number;
  /** The data center pods are pinned to, if any. */
  readonly dataCenterId: string | undefined;
}

const positiveInteger = (what: string) =>
  z
    .number({ error: `expected ${what} as a whole number` })
    .int({ message: `expected ${what} as a whole number` });

const settingsSchema = z.strictObject({
  ...httpSettingsShape,
  cloudType: z.enum(["secure", "community", "all"]).default("all"),
  containerImage: containerImageSchema.default(DEFAULT_RUNPOD_IMAGE),
  containerDiskGb: positiveInteger("the container disk size in GB").min(1).default(50),
  volumeGb: positiveInteger("the volume size in GB").min(0).default(0),
  volumeMountPath: z
    .string()
    .refine((value) => value.startsWith("/"), { message: "expected an absolute path" })
    .default("/workspace"),
  dataCenterId: z.string().min(1).optional(),
  cpuFlavorIds: z.array(z.string().min(1)).min(1, { message: "expected at least one CPU flavor" }).optional(),
  env: environmentVariablesSchema.default({}),
  keysDirectory: keysDirectorySchema,
});

type ParsedSettings = z.output<typeof settingsSchema>;

const NAME = "runpod";
/** vCPU sizes RunPod rents CPU pods in. */
const CPU_SIZES = [2, 4, 8, 16, 32, 64, 128];

function envOf(pod: Pod): Record<string, string> {
  const env: Record<string, string> = {};
  const source = pod.env ?? [];
  // GraphQL lists "KEY=value" strings; REST v1 answers an object.
  if (!Array.isArray(source)) return { ...source };
  for (const entry of source) {
    const at = entry.indexOf("=");
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/** Skyward's tags of a pod, carried in its environment (`SKYWARD_CLUSTER`, `SKYWARD_POOL`…). */
function tagsOf(pod: Pod): Record<string, string> {
  return skywardTagsFromEnvironment(envOf(pod));
}

/** The instance a pod is: `running`, with SSH coordinates, once its public port for 22 is known. */
export function instanceFromPod(pod: Pod, identityFile: string | undefined, now = Date.now()): Instance {
  const tags = tagsOf(pod);
  const sshPort = pod.runtime?.ports?.find(
    (port) => port.privatePort === 22 && port.isIpPublic === true && port.ip && port.publicPort,
  );
  const desired = (pod.desiredStatus ?? "").toUpperCase();
  const running = desired === "RUNNING";
  const host = running && sshPort?.ip ? sshPort.ip : null;
  const ssh =
    host !== null && sshPort?.publicPort
      ? Object.freeze({
          host,
          port: sshPort.publicPort,
          user: "root",
          ...(identityFile !== undefined ? { identityFile } : {}),
        })
      : null;
  const status =
    desired === "TERMINATED" || desired === "EXITED" ? "terminated" : running ? "running" : "pending";
  if (pod.name) tags["runpod:name"] = pod.name;
  const uptime = pod.runtime?.uptimeInSeconds;
  return Object.freeze({
    id: pod.id,
    status: sshReachableStatus(status, ssh),
    publicIp: host,
    // Pods on different machines share no private network: peers reach each other on public addresses.
    privateIp: host,
    ssh,
    spot: tags[SKYWARD_TAGS.spot] === "1",
    hourlyPrice: pod.costPerHr,
    offerId: tags[SKYWARD_TAGS.offer] ?? "",
    createdAt: typeof uptime === "number" && uptime > 0 ? now - uptime * 1000 : now,
    tags: Object.freeze(tags),
  });
}

function isCapacityMessage(message: string): boolean {
  return /no longer any instances available|does not have the resources|not enough (free )?gpus|no (gpus?|instances?|machines?)( \w+)? (is |are )?available|out of stock|insufficient capacity|bid (price )?(is )?too low/i.test(
    message,
  );
}

function isNotFoundMessage(message: string): boolean {
  return /not found|does not exist|no pod|unknown pod/i.test(message);
}

/** The vCPU count and memory of the smallest size of `flavor` meeting the query, or undefined. */
function cpuSize(flavor: CpuFlavor, query: OfferQuery): { vcpus: number; memoryGb: number } | undefined {
  const multiplier = flavor.ramMultiplier ?? 2;
  const wantedVcpus = Math.max(
    query.vcpus ?? 2,
    flavor.minVcpu ?? 2,
    Math.ceil((query.memoryGb ?? 0) / multiplier),
  );
  const vcpus = CPU_SIZES.find((size) => size >= wantedVcpus && size <= (flavor.maxVcpu ?? 128));
  return vcpus === undefined ? undefined : { vcpus, memoryGb: vcpus * multiplier };
}

function parseSettings(settings: RunPodSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

function build(settings: ParsedSettings): ProviderV1<RunPodClusterData> {
  const http = runpodApi.createClient(settings);
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const podCounters = new Map<string, number>();

  const query = async (
    text: string,
    purpose: string,
    signal: AbortSignal,
    variables?: Record<string, unknown>,
  ): Promise<Record<string, unknown>> =>
    requireData(
      await graphql(http, {
        query: text,
        purpose,
        idempotent: true,
        signal,
        ...(variables ? { variables } : {}),
      }),
      purpose,
    );

  async function gpuOffers(
    query_: OfferQuery,
    accelerator: NonNullable<OfferQuery["accelerator"]>,
    signal: AbortSignal,
  ) {
    const dataCenterId = query_.region ?? settings.dataCenterId;
    const data = await query(
      gpuTypesQuery({
        gpuCount: accelerator.count,
        ...(query_.vcpus !== undefined ? { minVcpuCount: query_.vcpus } : {}),
        ...(query_.memoryGb !== undefined ? { minMemoryInGb: query_.memoryGb } : {}),
        ...(dataCenterId !== undefined ? { dataCenterId } : {}),
      }),
      "listing GPU types and prices",
      signal,
    );
    const { gpuTypes } = parseAnswer(answers.gpuTypes, data, "listing GPU types");
    const asOf = new Date().toISOString();
    const offers: Offer[] = [];
    for (const gpu of gpuTypes) {
      const canonical = canonicalAcceleratorName(gpu.id) ?? canonicalAcceleratorName(gpu.displayName ?? "");
      if (canonical !== accelerator.name) continue;
      const memoryGb = gpu.memoryInGb ?? 0;
      if (accelerator.memoryGb !== undefined && memoryGb < accelerator.memoryGb) continue;
      for (const cloud of ["secure", "community"] as const) {
        if (settings.cloudType !== "all" && settings.cloudType !== cloud) continue;
        offers.push(...gpuOffer(gpu, cloud, accelerator.count, canonical, dataCenterId, asOf, query_));
      }
    }
    return offers;
  }

  function gpuOffer(
    gpu: GpuType,
    cloud: "secure" | "community",
    count: number,
    canonical: string,
    dataCenterId: string | undefined,
    pricesAsOf: string,
    query_: OfferQuery,
  ): Offer[] {
    const secure = cloud === "secure";
    if (!(secure ? gpu.secureCloud : gpu.communityCloud)) return [];
    const maxCount = (secure ? gpu.maxGpuCountSecureCloud : gpu.maxGpuCountCommunityCloud) ?? gpu.maxGpuCount;
    if (maxCount !== null && count > maxCount) return [];
    const lowest = secure ? gpu.secureLowest : gpu.communityLowest;
    const onDemandPerGpu = lowest?.uninterruptablePrice ?? (secure ? gpu.securePrice : gpu.communityPrice);
    const spotPerGpu = lowest?.minimumBidPrice ?? (secure ? gpu.secureSpotPrice : gpu.communitySpotPrice);
    if (onDemandPerGpu === null && spotPerGpu === null) return [];
    const offer: Offer = Object.freeze({
      id: `runpod:${cloud}:${gpu.id}:x${count}`,
      provider: NAME,
      instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.id} (${cloud} cloud)`,
      accelerator: Object.freeze({ name: canonical, count, memoryGb: gpu.memoryInGb ?? 0 }),
      vcpus: Math.max(lowest?.minVcpu ?? 0, query_.vcpus ?? 0),
      memoryGb: Math.max(lowest?.minMemory ?? 0, query_.memoryGb ?? 0),
      architecture: "x86_64",
      region: dataCenterId ?? "any",
      spotPrice: spotPerGpu === null ? null : roundPrice(spotPerGpu * count),
      onDemandPrice: onDemandPerGpu === null ? null : roundPrice(onDemandPerGpu * count),
      pricesAsOf,
      specific: Object.freeze({
        kind: "gpu",
        gpuTypeId: gpu.id,
        gpuCount: count,
        cloudType: secure ? "SECURE" : "COMMUNITY",
        bidPerGpu: spotPerGpu,
      } satisfies RunPodOfferData),
    });
    return [offer];
  }

  async function cpuOffers(query_: OfferQuery, signal: AbortSignal): Promise<Offer[]> {
    if (settings.cloudType === "community" || query_.allocation === "spot") return [];
    const { cpuFlavors } = parseAnswer(
      answers.cpuFlavors,
      await query(CPU_FLAVORS_QUERY, "listing CPU flavors", signal),
      "listing CPU flavors",
    );
    const sizes = cpuFlavors
      .filter((flavor) => settings.cpuFlavorIds === undefined || settings.cpuFlavorIds.includes(flavor.id))
      .flatMap((flavor) => {
        const size = cpuSize(flavor, query_);
        return size
          ? [{ flavorId: flavor.id, instanceId: `${flavor.id}-${size.vcpus}-${size.memoryGb}`, ...size }]
          : [];
      });
    if (sizes.length === 0) return [];
    const prices = parseAnswer(
      answers.cpuSpecifics,
      await query(cpuSpecificsQuery(sizes), "pricing CPU pods", signal),
      "pricing CPU pods",
    );
    const asOf = new Date().toISOString();
    return sizes.flatMap((size, index) => {
      const specifics = prices[`f${index}`]?.[0]?.specifics;
      if (!specifics || specifics.securePrice === null) return [];
      return [
        Object.freeze({
          id: `runpod:cpu:${size.instanceId}`,
          provider: NAME,
          instanceType: size.instanceId,
          accelerator: null,
          vcpus: size.vcpus,
          memoryGb: size.memoryGb,
          architecture: "x86_64" as const,
          region: query_.region ?? settings.dataCenterId ?? "any",
          spotPrice: null,
          onDemandPrice: roundPrice(specifics.securePrice),
          pricesAsOf: asOf,
          specific: Object.freeze({
            kind: "cpu",
            flavorId: size.flavorId,
            instanceId: size.instanceId,
            vcpuCount: size.vcpus,
            memoryGb: size.memoryGb,
          } satisfies RunPodOfferData),
        }),
      ];
    });
  }

  function podEnv(cluster: Cluster<RunPodClusterData>, spot: boolean): Record<string, string> {
    return {
      ...settings.env,
      PUBLIC_KEY: cluster.specific.publicKey,
      ...skywardTagsToEnvironment(
        skywardTags({ cluster: cluster.id, pool: cluster.poolId, offer: cluster.offer.id, spot }),
      ),
    };
  }

  function podName(cluster: Cluster<RunPodClusterData>): string {
    const next = podCounters.get(cluster.id) ?? 0;
    podCounters.set(cluster.id, next + 1);
    return `${cluster.id}-${next}`;
  }

  /** Creates one pod; resolves with it, or with the capacity problem's message. */
  async function deployPod(
    cluster: Cluster<RunPodClusterData>,
    spot: boolean,
    signal: AbortSignal,
  ): Promise<Pod | { noCapacity: string }> {
    const specific = cluster.offer.specific as RunPodOfferData;
    const env = podEnv(cluster, spot);
    const name = podName(cluster);
    if (specific.kind === "cpu") {
      let answer: { data: unknown };
      try {
        answer = await http.send({
          method: "POST",
          url: `${RUNPOD_REST_URL}/pods`,
          data: {
            name,
            imageName: cluster.specific.image,
            computeType: "CPU",
            cloudType: "SECURE",
            cpuFlavorIds: [specific.flavorId],
            vcpuCount: specific.vcpuCount,
            containerDiskInGb: cluster.specific.containerDiskGb,
            volumeInGb: settings.volumeGb,
            ...(settings.volumeGb > 0 ? { volumeMountPath: settings.volumeMountPath } : {}),
            ports: ["22/tcp"],
            env,
            supportPublicIp: true,
            ...(cluster.specific.dataCenterId ? { dataCenterIds: [cluster.specific.dataCenterId] } : {}),
          },
          idempotent: false,
          purpose: "creating a CPU pod",
          signal,
        });
      } catch (error) {
        if (
          RunPodApiError.isInstance(error) &&
          error.statusCode !== 401 &&
          error.statusCode !== 403 &&
          error.statusCode !== 429 &&
          isCapacityMessage(error.message)
        )
          return { noCapacity: error.message };
        throw error;
      }
      return parseAnswer(podSchema, answer.data, "creating a CPU pod");
    }
    const input: Record<string, unknown> = {
      name,
      imageName: cluster.specific.image,
      gpuTypeId: specific.gpuTypeId,
      gpuCount: specific.gpuCount,
      cloudType: specific.cloudType,
      containerDiskInGb: cluster.specific.containerDiskGb,
      volumeInGb: settings.volumeGb,
      ...(settings.volumeGb > 0 ? { volumeMountPath: settings.volumeMountPath } : {}),
      ...(cluster.spec.vcpus !== undefined ? { minVcpuCount: Math.ceil(cluster.spec.vcpus) } : {}),
      ...(cluster.spec.memoryGb !== undefined ? { minMemoryInGb: Math.ceil(cluster.spec.memoryGb) } : {}),
      ports: "22/tcp",
      startSsh: true,
      supportPublicIp: true,
      dockerArgs: "",
      env: Object.entries(env).map(([key, value]) => ({ key, value })),
      ...(cluster.specific.dataCenterId ? { dataCenterId: cluster.specific.dataCenterId } : {}),
      ...(spot ? { bidPerGpu: specific.bidPerGpu } : {}),
    };
    const field = spot ? "podRentInterruptable" : "podFindAndDeployOnDemand";
    const purpose = spot ? "renting an interruptible pod" : "deploying an on-demand pod";
    const result = await graphql(http, {
      query: spot ? DEPLOY_INTERRUPTIBLE_MUTATION : DEPLOY_ON_DEMAND_MUTATION,
      variables: { input },
      purpose,
      idempotent: false,
      signal,
    });
    if (result.error !== undefined && isCapacityMessage(result.error)) return { noCapacity: result.error };
    const data = requireData(result, purpose);
    if (data[field] === null || data[field] === undefined) return { noCapacity: `${field} returned no pod` };
    return parseAnswer(podSchema, data[field], purpose);
  }

  async function listPods(signal: AbortSignal): Promise<Pod[]> {
    const data = await query(MY_PODS_QUERY, "listing pods", signal);
    return parseAnswer(answers.myPods, data, "listing pods").myself?.pods ?? [];
  }

  async function terminatePod(id: string, signal: AbortSignal): Promise<void> {
    const purpose = `terminating pod ${id}`;
    const result = await graphql(http, {
      query: TERMINATE_MUTATION,
      variables: { input: { podId: id } },
      purpose,
      idempotent: true,
      signal,
    });
    if (result.error === undefined || isNotFoundMessage(result.error)) return;
    // Whatever the wording, a pod that is gone (or going) needs nothing more.
    const pod = await lookUpPod(id, signal);
    if (pod !== null && (pod.desiredStatus ?? "").toUpperCase() !== "TERMINATED")
      requireData(result, purpose);
  }

  async function lookUpPod(id: string, signal: AbortSignal): Promise<Pod | null> {
    const purpose = `looking up pod ${id}`;
    const result = await graphql(http, {
      query: POD_QUERY,
      variables: { podId: id },
      purpose,
      idempotent: true,
      signal,
    });
    if (result.error !== undefined && isNotFoundMessage(result.error)) return null;
    return parseAnswer(answers.pod, requireData(result, purpose), purpose).pod ?? null;
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    capabilities: Object.freeze({ spot: true, volumes: false, images: true, offerCache: "marketplace" }),
    cacheKey: `${settings.cloudType}`,

    async offers({ query, signal }) {
      if (query.architecture === "arm64") return [];
      const offers = query.accelerator
        ? await gpuOffers(query, query.accelerator, signal)
        : await cpuOffers(query, signal);
      return filterOffers(offers, query);
    },

    async prepare({ spec, offer, poolId }) {
      requireOwnOffer(offer, NAME, "RunPod");
      // Fail before creating anything when no key is set.
      runpodApi.resolveApiKey(settings.apiKey);
      const keys = await ensureSshKeyPair(keysDirectory(), "runpod_ed25519");
      const dataCenterId = spec.region ?? settings.dataCenterId;
      return Object.freeze({
        id: createClusterId(),
        provider: NAME,
        poolId: poolId ?? "",
        region: dataCenterId ?? offer.region,
        spec,
        offer,
        ssh: Object.freeze({ user: "root", identityFile: keys.identityFile, sudo: false }),
        specific: Object.freeze({
          publicKey: keys.publicKey,
          identityFile: keys.identityFile,
          image: settings.containerImage,
          containerDiskGb: Math.max(settings.containerDiskGb, Math.ceil(spec.diskGb ?? 0)),
          dataCenterId,
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      // Spot and on-demand in the allocation's order; a market without capacity gives way to the next.
      const markets = marketsFor(cluster.spec.allocation, cluster.offer);
      const created: Instance[] = [];
      const reasons: string[] = [];
      while (created.length < count && markets.length > 0) {
        const spot = markets[0] === "spot";
        let outcome: Pod | { noCapacity: string };
        try {
          outcome = await deployPod(cluster, spot, signal);
        } catch (error) {
          // Pods already created are handed back (the pool asks again), never left unknown.
          if (created.length > 0 && !signal.aborted) break;
          throw error;
        }
        if ("noCapacity" in outcome) {
          reasons.push(`${spot ? "spot" : "on-demand"}: ${outcome.noCapacity}`);
          markets.shift();
          continue;
        }
        created.push(instanceFromPod(outcome, cluster.specific.identityFile));
      }
      if (created.length === 0) {
        throw new NoCapacityError({
          attempts: reasons.map((reason) => ({ provider: NAME, offer: cluster.offer.instanceType, reason })),
        });
      }
      return created;
    },

    async getInstance({ cluster, id, signal }) {
      const pod = await lookUpPod(id, signal);
      // A cluster rebuilt from an instance's tags (`skyward down`) has no specific data.
      return pod ? instanceFromPod(pod, cluster.specific?.identityFile) : null;
    },

    launchWorker: launchSshWorker,

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) await terminatePod(id, signal);
    },

    async teardown({ cluster, signal }) {
      const left = (await listPods(signal)).filter(
        (pod) =>
          tagsOf(pod)[SKYWARD_TAGS.cluster] === cluster.id &&
          (pod.desiredStatus ?? "").toUpperCase() !== "TERMINATED",
      );
      for (const pod of left) await terminatePod(pod.id, signal);
      podCounters.delete(cluster.id);
    },

    selfDestruct({ instance }) {
      // runpodctl comes with every pod and uses the pod-scoped RUNPOD_API_KEY; an SSH session does not
      // inherit the container's environment, so the key is read from PID 1's.
      return (
        `for kv in $(tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -E '^RUNPOD_API_KEY='); do export "$kv"; done; ` +
        `runpodctl remove pod ${shellQuote(instance.id)}`
      );
    },

    async listInstances({ signal }) {
      // Listing only reads: the key pair is made by `prepare`, when a machine is about to be created.
      const identityFile = await findSshIdentityFile(keysDirectory(), "runpod_ed25519");
      return (await listPods(signal))
        .filter((pod) => tagsOf(pod)[SKYWARD_TAGS.cluster] !== undefined)
        .map((pod) => instanceFromPod(pod, identityFile));
    },
  };
}

/**
 * The RunPod provider: `RunPod()` with default settings, or `RunPod({ cloudType: "secure",
 * containerDiskGb: 100 })`. Throws {@link ConfigurationError} for bad settings; the API key is looked
 * up on the first API call.
 */
export function RunPod(settings: RunPodSettings = {}): ProviderV1<RunPodClusterData> {
  return build(parseSettings(settings, "RunPod"));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "runpod"`), its keys
 * already camelCased by the core: `cloud_type = "secure"` arrives as `cloudType`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<RunPodClusterData> {
  return build(parseSettings(settings as RunPodSettings, ""));
}
