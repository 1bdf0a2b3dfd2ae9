/**
 * The RunPod provider: GPU pods in the secure and community clouds, on demand (REST API v2) or
 * interruptible (GraphQL's `podRentInterruptable`, at a bid per GPU a margin above the minimum: v2 has
 * no interruptible pods), and CPU pods. Pods are reached over SSH as root on the address and port
 * RunPod publishes for 22 (`ssh.direct`); the public half of a key pair generated here goes to the pod
 * as `PUBLIC_KEY`, which RunPod's images install for root. GPU pods ask for a host whose CUDA version
 * runs the image; the pods of a multi-node GPU pool join RunPod's global networking.
 */
import { ConfigurationError, type DockerImage, NoCapacityError } from "@skyward/core";
import {
  acceleratorFormFactor,
  type Cluster,
  canonicalAcceleratorName,
  containerImageSchema,
  type Instance,
  type Offer,
  type OfferQuery,
  type PoolSpec,
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
  type Market,
  marketsFor,
  refuseVolumesWithoutFuse,
  requireOwnOffer,
  roundPrice,
  SKYWARD_TAGS,
  skywardKeysDirectory,
  skywardTags,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
  sshReachableStatus,
} from "@skyward/provider-utils";
import {
  ensureSshKeyPair,
  findSshIdentityFile,
  launchSshWorker,
  reconnectThroughGetInstance,
} from "@skyward/ssh";
import { z } from "zod";
import {
  answers,
  type CatalogCpu,
  type CatalogGpu,
  cudaAtLeast,
  DEPLOY_INTERRUPTIBLE_MUTATION,
  graphql,
  type Pod,
  parseAnswer,
  podSchema,
  RUNPOD_API_URL,
  RUNPOD_CUDA_VERSIONS,
  RunPodApiError,
  requireData,
  runpodApi,
  spotPricesQuery,
} from "./runpod-api.js";

/** The container image pods run when none is set: CUDA 12.9 on Ubuntu with OpenSSH, from RunPod. */
export const DEFAULT_RUNPOD_IMAGE = "runpod/base:1.0.3-cuda1290-ubuntu2204";

/**
 * How long a pod may take to be running with its SSH port when the pool's options leave
 * `provisionTimeout` unset: RunPod pulls the image before the container starts, and a large CUDA image
 * on a host that has not cached it takes 20–30 minutes (issue 19).
 */
export const RUNPOD_PROVISION_TIMEOUT_SECONDS = 1800;

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
  /**
   * The lowest CUDA version a GPU pod's host must run (`"12.8"`): a host with an older driver cannot
   * start a newer CUDA image. Default: the version in the image's tag (a `DockerImage` from `sky.containers` names it) (`cuda1290` → `"12.9"`,
   * `cu1281` → `"12.8"`, `cuda:12.4.1` → `"12.4"`), else none.
   */
  minCudaVersion?: string;
  /** Exactly these CUDA versions (`["12.8", "12.9"]`), instead of a minimum; not with `minCudaVersion`. */
  allowedCudaVersions?: readonly string[];
  /**
   * An interruptible pod's bid per GPU above RunPod's minimum bid, as a fraction: 0.05 bids 5 % more.
   * A bid at the exact minimum loses to the next renter at once. Default 0.05, at least 0.01.
   */
  spotBidMargin?: number;
  /** Container disk per pod, GB; a spec's `diskGb` raises it. Default 50. */
  containerDiskGb?: number;
  /** A pod volume, GB (kept while the pod lives, removed with it); 0 or at least 10. GPU pods only. Default 0: none. */
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
  /**
   * Skyward's directory on each pod (environment, runtime, code); `{id}` in it becomes the pod's id.
   * Default `/opt/skyward`.
   */
  root?: string;
}

/** What an offer of this provider carries in {@link Offer.specific}. */
export type RunPodOfferData =
  | {
      readonly kind: "gpu";
      readonly gpuTypeId: string;
      readonly gpuCount: number;
      readonly cloudType: "SECURE" | "COMMUNITY";
      /** The bid per GPU for an interruptible pod: the minimum bid plus the margin; null when none. */
      readonly bidPerGpu: number | null;
      /** The data centers with the type in stock, as the catalog listed them (empty: not listed). */
      readonly dataCenterIds: readonly string[];
    }
  | {
      readonly kind: "cpu";
      readonly flavorId: string;
      readonly instanceId: string;
      readonly vcpuCount: number;
      readonly memoryGb: number;
    };

/** The CUDA constraint on a GPU pod's host. */
export type RunPodCudaConstraint =
  | { readonly minCudaVersion: string }
  | { readonly allowedCudaVersions: readonly string[] }
  | Record<string, never>;

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
  /** The data centers pods may be placed in; empty: any. */
  readonly dataCenterIds: readonly string[];
  /** Whether pods join global networking (a multi-node GPU pool): their private addresses reach one another. */
  readonly globalNetworking: boolean;
  /** Interruptible pods may be rented (not when the pods must join global networking, which they cannot). */
  readonly spotAllowed: boolean;
  /** The CUDA versions the host must run. */
  readonly cuda: RunPodCudaConstraint;
}

const positiveInteger = (what: string) =>
  z
    .number({ error: `expected ${what} as a whole number` })
    .int({ message: `expected ${what} as a whole number` });

const cudaVersion = z
  .string()
  .regex(/^\d+\.\d+$/, { message: 'expected a CUDA version as "major.minor" (e.g. "12.8")' });

const settingsSchema = z
  .strictObject({
    ...httpSettingsShape,
    cloudType: z
      .enum(["secure", "community", "all"], { message: 'expected "secure", "community" or "all"' })
      .default("all"),
    containerImage: containerImageSchema.default(DEFAULT_RUNPOD_IMAGE),
    minCudaVersion: cudaVersion.optional(),
    allowedCudaVersions: z
      .array(cudaVersion)
      .min(1, { message: "expected at least one CUDA version" })
      .optional(),
    spotBidMargin: z
      .number({ error: "expected a fraction such as 0.05" })
      .min(0.01, { message: "expected at least 0.01: a bid at the exact minimum is outbid at once" })
      .max(1, { message: "expected at most 1 (twice the minimum bid)" })
      .default(0.05),
    containerDiskGb: positiveInteger("the container disk size in GB").min(1).default(50),
    volumeGb: positiveInteger("the volume size in GB")
      .min(0)
      .refine((value) => value === 0 || value >= 10, {
        message: "expected 0 or at least 10 GB (RunPod's floor)",
      })
      .default(0),
    volumeMountPath: z
      .string()
      .refine((value) => value.startsWith("/"), { message: "expected an absolute path" })
      .default("/workspace"),
    dataCenterId: z.string().min(1).optional(),
    cpuFlavorIds: z
      .array(z.string().min(1))
      .min(1, { message: "expected at least one CPU flavor" })
      .optional(),
    env: environmentVariablesSchema.default({}),
    keysDirectory: keysDirectorySchema,
    root: z
      .string()
      .refine((value) => value.startsWith("/"), { message: "expected an absolute path" })
      .optional(),
  })
  .superRefine((value, context) => {
    if (value.minCudaVersion !== undefined && value.allowedCudaVersions !== undefined)
      context.addIssue({
        code: "custom",
        path: ["allowedCudaVersions"],
        message: "expected either minCudaVersion or allowedCudaVersions, not both",
      });
  });

type ParsedSettings = z.output<typeof settingsSchema>;

const NAME = "runpod";

/**
 * The CUDA version an image's tag names, as `major.minor`: RunPod's `cuda1290` and `cu1281`, NVIDIA's
 * `cuda:12.4.1` and `cuda12.8.0`; undefined when the tag names none.
 */
export function imageCudaVersion(image: string): string | undefined {
  const dotted = /cuda[:\-_]?(\d{1,2})\.(\d{1,2})/i.exec(image);
  if (dotted) return `${Number(dotted[1])}.${Number(dotted[2])}`;
  const packed = /cuda(\d{2})(\d)\d(?!\d)/i.exec(image);
  if (packed) return `${Number(packed[1])}.${Number(packed[2])}`;
  const short = /(?:^|[^a-z])cu(\d{2})(\d)\d?(?!\d)/i.exec(image);
  if (short) return `${Number(short[1])}.${Number(short[2])}`;
  return undefined;
}

/** The CUDA constraint of the settings: the versions listed, else the minimum set or named by the image. */
function cudaConstraint(settings: ParsedSettings, imageCuda: string | undefined): RunPodCudaConstraint {
  if (settings.allowedCudaVersions) return { allowedCudaVersions: [...settings.allowedCudaVersions] };
  const minimum = settings.minCudaVersion ?? imageCuda ?? imageCudaVersion(settings.containerImage);
  return minimum ? { minCudaVersion: minimum } : {};
}

/** Skyward's tags of a pod, carried in its environment (`SKYWARD_CLUSTER`, `SKYWARD_POOL`…). */
function tagsOf(pod: Pod): Record<string, string> {
  return skywardTagsFromEnvironment(pod.env);
}

/**
 * The instance a pod is: `running`, with SSH coordinates, once RunPod publishes its direct SSH endpoint
 * (the public address and port mapped to 22); its private address is its global-networking one when it
 * has one, else the public one.
 */
export function instanceFromPod(
  pod: Pod,
  identityFile: string | undefined,
  now = Date.now(),
  root?: string,
): Instance {
  const tags = tagsOf(pod);
  const status = (pod.status ?? "").toUpperCase();
  const direct = pod.ssh?.direct;
  const port22 = pod.runtime?.ports?.find((port) => port.private === 22 && port.ip && port.public);
  const running = status === "RUNNING";
  const host = direct?.host ?? port22?.ip ?? null;
  const port = direct?.port ?? port22?.public ?? null;
  const ssh =
    running && host !== null && port !== null
      ? Object.freeze({
          host,
          port,
          user: "root",
          ...(identityFile !== undefined ? { identityFile } : {}),
          ...(root !== undefined ? { root: root.replaceAll("{id}", pod.id) } : {}),
        })
      : null;
  const state =
    status === "TERMINATED" || status === "EXITED" || status === "ERROR"
      ? "terminated"
      : running
        ? "running"
        : "pending";
  if (pod.name) tags["runpod:name"] = pod.name;
  const created = pod.createdAt ? Date.parse(pod.createdAt) : Number.NaN;
  const publicIp = running ? host : null;
  return Object.freeze({
    id: pod.id,
    status: sshReachableStatus(state, ssh),
    publicIp,
    privateIp: pod.globalNetworking?.ip ?? publicIp,
    ssh,
    spot: tags[SKYWARD_TAGS.spot] === "1",
    hourlyPrice: pod.cost,
    offerId: tags[SKYWARD_TAGS.offer] ?? "",
    createdAt: Number.isFinite(created) ? created : now,
    tags: Object.freeze(tags),
  });
}

function isCapacityMessage(message: string): boolean {
  return /no longer any instances available|does not have the resources|not enough (free )?gpus|no (gpus?|instances?|machines?)( \w+)? (is |are )?available|out of stock|insufficient capacity|could not be placed|bid (price )?(is )?too low/i.test(
    message,
  );
}

/** vCPU counts a CPU pod may have: powers of two (RunPod's create rule). */
const CPU_SIZES = [2, 4, 8, 16, 32, 64, 128];

/** The vCPU count and memory of the smallest size of `flavor` meeting the query, or undefined. */
function cpuSize(flavor: CatalogCpu, query: OfferQuery): { vcpus: number; memoryGb: number } | undefined {
  const perVcpu = flavor.ramGbPerVcpu;
  const wanted = Math.max(query.vcpus ?? 2, flavor.vcpu.min, Math.ceil((query.memoryGb ?? 0) / perVcpu));
  const vcpus = CPU_SIZES.find((size) => size >= wanted && size <= flavor.vcpu.max);
  return vcpus === undefined ? undefined : { vcpus, memoryGb: Number((vcpus * perVcpu).toFixed(4)) };
}

/** Sold out, for the pod stock the v2 catalog reports (`NONE`), overall or in the pinned data center. */
function soldOut(
  entry: {
    availability?: string | null;
    dataCenters?: readonly { id: string; availability?: string | null }[] | null;
  },
  dataCenterId: string | undefined,
): boolean {
  if (entry.availability === "NONE") return true;
  if (dataCenterId === undefined || !entry.dataCenters) return false;
  const there = entry.dataCenters.find((center) => center.id === dataCenterId);
  return !there || there.availability === "NONE";
}

/** A bid per GPU a margin above `minimum`, in tenths of a cent, and never the minimum itself. */
export function bidAbove(minimum: number, margin: number): number {
  const bid = Math.ceil(minimum * (1 + margin) * 1000 - 1e-9) / 1000;
  return bid > minimum ? bid : Math.round((minimum + 0.001) * 1000) / 1000;
}

function parseSettings(settings: RunPodSettings | undefined, prefix: string): ParsedSettings {
  return parseInput(settingsSchema, settings ?? {}, prefix);
}

function refuse(path: string, message: string): never {
  throw new ConfigurationError({ issues: [{ path, message }] });
}

/** The CUDA version a `DockerImage` says it was built for (`sky.containers.cuda("12.9")`), if any. */
function dockerImageCuda(image: unknown): string | undefined {
  const cuda = typeof image === "object" && image !== null ? (image as { cuda?: unknown }).cuda : undefined;
  return typeof cuda === "string" ? cuda : undefined;
}

function build(settings: ParsedSettings, imageCuda?: string): ProviderV1<RunPodClusterData> {
  const http = runpodApi.createClient(settings);
  const keysDirectory = () => settings.keysDirectory ?? skywardKeysDirectory();
  const podCounters = new Map<string, number>();
  const cuda = cudaConstraint(settings, imageCuda);

  async function get(path: string, params: Record<string, string>, purpose: string, signal: AbortSignal) {
    const { data } = await http.send({
      method: "GET",
      url: `${RUNPOD_API_URL}${path}`,
      params,
      idempotent: true,
      purpose,
      signal,
    });
    return data;
  }

  async function catalogGpus(count: number, cloud: "SECURE" | "COMMUNITY", signal: AbortSignal) {
    const params: Record<string, string> = {
      include: "AVAILABILITY",
      product: "POD",
      count: String(Math.trunc(count)),
      cloud,
    };
    if ("minCudaVersion" in cuda) params.minCudaVersion = cuda.minCudaVersion;
    if ("allowedCudaVersions" in cuda) params.cudaVersions = cuda.allowedCudaVersions.join(",");
    const purpose = `listing GPU types (${cloud.toLowerCase()} cloud)`;
    return parseAnswer(answers.gpus, await get("/catalog/gpus", params, purpose, signal), purpose).gpus;
  }

  /** The minimum bid per GPU and stock of an interruptible pod of each GPU type, by cloud (GraphQL). */
  async function spotPrices(count: number, signal: AbortSignal) {
    const purpose = "pricing interruptible pods";
    const result = await graphql(http, { query: spotPricesQuery(count), purpose, idempotent: true, signal });
    const { gpuTypes } = parseAnswer(answers.spotPrices, requireData(result, purpose), purpose);
    const inStock = (
      lowest: { minimumBidPrice: number | null; stockStatus?: string | null } | null | undefined,
    ) =>
      lowest && lowest.minimumBidPrice !== null && !/^(|none|out of stock)$/i.test(lowest.stockStatus ?? "")
        ? lowest.minimumBidPrice
        : null;
    return new Map(
      gpuTypes.map((entry) => [
        entry.id,
        { SECURE: inStock(entry.secureLowest), COMMUNITY: inStock(entry.communityLowest) },
      ]),
    );
  }

  /**
   * Spot prices, or none when RunPod no longer serves GraphQL (retired in early 2027: HTTP 404/410) and
   * the allocation can do without spot; with `allocation: "spot"` the failure stands.
   */
  async function spotPricesIfServed(query: OfferQuery, count: number, signal: AbortSignal) {
    try {
      return await spotPrices(count, signal);
    } catch (error) {
      const retired =
        RunPodApiError.isInstance(error) && (error.statusCode === 404 || error.statusCode === 410);
      if (retired && query.allocation !== "spot") return undefined;
      throw error;
    }
  }

  /** The CUDA constraint leaves this GPU type a host with free capacity (or the catalog says nothing). */
  function cudaAvailable(gpu: CatalogGpu): boolean {
    if (!("minCudaVersion" in cuda) && !("allowedCudaVersions" in cuda)) return true;
    const fits = (version: string) =>
      "minCudaVersion" in cuda
        ? cudaAtLeast(version, cuda.minCudaVersion)
        : cuda.allowedCudaVersions.includes(version);
    return (gpu.cudaVersions ?? []).some((entry) => entry.available && fits(entry.version));
  }

  async function gpuOffers(
    query: OfferQuery,
    accelerator: NonNullable<OfferQuery["accelerator"]>,
    signal: AbortSignal,
  ): Promise<Offer[]> {
    if (query.vcpus !== undefined || query.memoryGb !== undefined) {
      // v2 places a GPU pod with its GPU type's own share of vCPUs and memory; nothing asks for more.
      refuse(
        query.vcpus !== undefined ? "vcpus" : "memoryGb",
        "RunPod's pod API (v2) cannot ask a GPU pod for a vCPU or memory minimum (each GPU type comes with its own share): leave vcpus and memoryGb unset for RunPod GPU pods, or ask for more GPUs",
      );
    }
    const dataCenterId = query.region ?? settings.dataCenterId;
    const clouds = (["SECURE", "COMMUNITY"] as const).filter(
      (cloud) => settings.cloudType === "all" || settings.cloudType === cloud.toLowerCase(),
    );
    const spot =
      query.allocation !== "on-demand"
        ? await spotPricesIfServed(query, accelerator.count, signal)
        : undefined;
    const asOf = new Date().toISOString();
    const offers: Offer[] = [];
    for (const cloud of clouds) {
      for (const gpu of await catalogGpus(accelerator.count, cloud, signal)) {
        const canonical = canonicalAcceleratorName(gpu.id) ?? canonicalAcceleratorName(gpu.name ?? "");
        if (canonical !== accelerator.name) continue;
        const memoryGb = gpu.memory ?? 0;
        if (accelerator.memoryGb !== undefined && memoryGb < accelerator.memoryGb) continue;
        const secure = cloud === "SECURE";
        if (!(secure ? gpu.secure : gpu.community)) continue;
        const maxCount = secure ? gpu.maxCount?.secure : gpu.maxCount?.community;
        if (typeof maxCount === "number" && accelerator.count > maxCount) continue;
        // Sold out, or no host with a CUDA version the image runs on: not offered.
        if (soldOut(gpu, dataCenterId) || !cudaAvailable(gpu)) continue;
        const onDemandPerGpu = (secure ? gpu.price?.secure : gpu.price?.community) ?? null;
        const minimumBid = spot?.get(gpu.id)?.[cloud] ?? null;
        const bidPerGpu = minimumBid === null ? null : bidAbove(minimumBid, settings.spotBidMargin);
        if (onDemandPerGpu === null && bidPerGpu === null) continue;
        const count = accelerator.count;
        // The type id or its display name says the board ("NVIDIA A100-SXM4-80GB", "H100 SXM",
        // "NVIDIA H100 NVL"); "NVIDIA H100 80GB HBM3" alone does not, its name "H100 SXM" does.
        const formFactor = acceleratorFormFactor(gpu.id) ?? acceleratorFormFactor(gpu.name ?? "");
        offers.push(
          Object.freeze({
            id: `runpod:${cloud.toLowerCase()}:${gpu.id}:x${count}`,
            provider: NAME,
            instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.id} (${cloud.toLowerCase()} cloud)`,
            accelerator: Object.freeze({
              name: canonical,
              count,
              memoryGb,
              ...(formFactor === undefined ? {} : { formFactor }),
            }),
            vcpus: 0,
            memoryGb: 0,
            architecture: "x86_64" as const,
            region: dataCenterId ?? "any",
            spotPrice: bidPerGpu === null ? null : roundPrice(bidPerGpu * count),
            onDemandPrice: onDemandPerGpu === null ? null : roundPrice(onDemandPerGpu * count),
            pricesAsOf: asOf,
            specific: Object.freeze({
              kind: "gpu",
              gpuTypeId: gpu.id,
              gpuCount: count,
              cloudType: cloud,
              bidPerGpu,
              dataCenterIds: Object.freeze(
                (gpu.dataCenters ?? [])
                  .filter((center) => center.availability !== "NONE")
                  .map((center) => center.id),
              ),
            } satisfies RunPodOfferData),
          }),
        );
      }
    }
    return offers;
  }

  async function cpuOffers(query: OfferQuery, signal: AbortSignal): Promise<Offer[]> {
    if (settings.cloudType === "community" || query.allocation === "spot") return [];
    const purpose = "listing CPU flavors";
    const { cpus } = parseAnswer(
      answers.cpus,
      await get("/catalog/cpus", { include: "AVAILABILITY", product: "POD" }, purpose, signal),
      purpose,
    );
    const dataCenterId = query.region ?? settings.dataCenterId;
    const asOf = new Date().toISOString();
    return cpus.flatMap((flavor): Offer[] => {
      if (settings.cpuFlavorIds !== undefined && !settings.cpuFlavorIds.includes(flavor.id)) return [];
      if (soldOut(flavor, dataCenterId) || flavor.price.securePerVcpu === null) return [];
      const size = cpuSize(flavor, query);
      if (!size) return [];
      const instanceId = `${flavor.id}-${size.vcpus}-${size.memoryGb}`;
      return [
        Object.freeze({
          id: `runpod:cpu:${instanceId}`,
          provider: NAME,
          instanceType: instanceId,
          accelerator: null,
          vcpus: size.vcpus,
          memoryGb: size.memoryGb,
          architecture: "x86_64" as const,
          region: dataCenterId ?? "any",
          spotPrice: null,
          onDemandPrice: roundPrice(flavor.price.securePerVcpu * size.vcpus),
          pricesAsOf: asOf,
          specific: Object.freeze({
            kind: "cpu",
            flavorId: flavor.id,
            instanceId,
            vcpuCount: size.vcpus,
            memoryGb: size.memoryGb,
          } satisfies RunPodOfferData),
        }),
      ];
    });
  }

  /** The data centers with global networking (RunPod's catalog). */
  async function globalNetworkDataCenters(signal: AbortSignal): Promise<string[]> {
    const purpose = "listing data centers with global networking";
    const { dataCenters } = parseAnswer(
      answers.dataCenters,
      await get("/catalog/datacenters", { globalNetwork: "true" }, purpose, signal),
      purpose,
    );
    return dataCenters.filter((center) => center.globalNetwork !== false).map((center) => center.id);
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

  /** Creates one on-demand GPU pod or CPU pod through v2; resolves with it, or with the capacity problem. */
  async function createPod(
    cluster: Cluster<RunPodClusterData>,
    signal: AbortSignal,
  ): Promise<Pod | { noCapacity: string }> {
    const specific = cluster.offer.specific as RunPodOfferData;
    const { dataCenterIds } = cluster.specific;
    const body: Record<string, unknown> = {
      name: podName(cluster),
      image: cluster.specific.image,
      cloud: specific.kind === "gpu" ? specific.cloudType : "SECURE",
      disk: cluster.specific.containerDiskGb,
      env: podEnv(cluster, false),
      ports: ["22/tcp"],
      ...(dataCenterIds.length > 0 ? { dataCenterIds: [...dataCenterIds] } : {}),
    };
    if (specific.kind === "gpu") {
      body.gpu = { id: specific.gpuTypeId, count: specific.gpuCount, ...cluster.specific.cuda };
      if (cluster.specific.globalNetworking) body.globalNetworking = true;
      if (settings.volumeGb > 0)
        body.mounts = { persistent: { size: settings.volumeGb, path: settings.volumeMountPath } };
    } else {
      body.cpu = { id: specific.flavorId, vcpuCount: specific.vcpuCount };
    }
    const purpose = specific.kind === "gpu" ? "creating a GPU pod" : "creating a CPU pod";
    try {
      const { data } = await http.send({
        method: "POST",
        url: `${RUNPOD_API_URL}/pods`,
        data: body,
        idempotent: false,
        purpose,
        signal,
      });
      return parseAnswer(podSchema, data, purpose);
    } catch (error) {
      // v2: a 400 is "this GPU and data center could not be placed" (or a broken rule, said in its detail).
      if (RunPodApiError.isInstance(error) && (error.statusCode === 400 || isCapacityMessage(error.message)))
        return { noCapacity: error.message };
      throw error;
    }
  }

  /** Rents one interruptible GPU pod through GraphQL (v2 has none); resolves with it, or with the capacity problem. */
  async function rentInterruptible(
    cluster: Cluster<RunPodClusterData>,
    signal: AbortSignal,
  ): Promise<Pod | { noCapacity: string }> {
    const specific = cluster.offer.specific as Extract<RunPodOfferData, { kind: "gpu" }>;
    const { cuda: constraint, dataCenterIds } = cluster.specific;
    // GraphQL takes an exact list: the versions RunPod lists at or above the minimum.
    const allowed =
      "allowedCudaVersions" in constraint
        ? [...constraint.allowedCudaVersions]
        : "minCudaVersion" in constraint
          ? RUNPOD_CUDA_VERSIONS.filter((version) => cudaAtLeast(version, constraint.minCudaVersion))
          : undefined;
    const env = podEnv(cluster, true);
    const input: Record<string, unknown> = {
      name: podName(cluster),
      imageName: cluster.specific.image,
      gpuTypeId: specific.gpuTypeId,
      gpuCount: specific.gpuCount,
      cloudType: specific.cloudType,
      containerDiskInGb: cluster.specific.containerDiskGb,
      volumeInGb: settings.volumeGb,
      ...(settings.volumeGb > 0 ? { volumeMountPath: settings.volumeMountPath } : {}),
      ports: "22/tcp",
      startSsh: true,
      supportPublicIp: true,
      dockerArgs: "",
      env: Object.entries(env).map(([key, value]) => ({ key, value })),
      ...(allowed ? { allowedCudaVersions: allowed } : {}),
      ...(dataCenterIds.length === 1 ? { dataCenterId: dataCenterIds[0] } : {}),
      bidPerGpu: specific.bidPerGpu,
    };
    const purpose = "renting an interruptible pod";
    const result = await graphql(http, {
      query: DEPLOY_INTERRUPTIBLE_MUTATION,
      variables: { input },
      purpose,
      idempotent: false,
      signal,
    });
    if (result.error !== undefined && isCapacityMessage(result.error)) return { noCapacity: result.error };
    const rented = parseAnswer(answers.rented, requireData(result, purpose), purpose).podRentInterruptable;
    if (!rented) return { noCapacity: "podRentInterruptable returned no pod" };
    return parseAnswer(podSchema, { id: rented.id, name: input.name, status: "PROVISIONING", env }, purpose);
  }

  async function listPods(signal: AbortSignal): Promise<Pod[]> {
    return parseAnswer(answers.pods, await get("/pods", {}, "listing pods", signal), "listing pods").pods;
  }

  async function terminatePod(id: string, signal: AbortSignal): Promise<void> {
    try {
      await http.send({
        method: "DELETE",
        url: `${RUNPOD_API_URL}/pods/${encodeURIComponent(id)}`,
        idempotent: true,
        purpose: `terminating pod ${id}`,
        signal,
      });
    } catch (error) {
      if (!(RunPodApiError.isInstance(error) && error.statusCode === 404)) throw error;
    }
  }

  async function lookUpPod(id: string, signal: AbortSignal): Promise<Pod | null> {
    const purpose = `looking up pod ${id}`;
    try {
      return parseAnswer(
        podSchema,
        await get(`/pods/${encodeURIComponent(id)}`, {}, purpose, signal),
        purpose,
      );
    } catch (error) {
      if (RunPodApiError.isInstance(error) && error.statusCode === 404) return null;
      throw error;
    }
  }

  /** Where the pool's pods go and whether they join global networking: refused here, before anything starts. */
  async function placement(spec: PoolSpec, offer: Offer, signal: AbortSignal) {
    const pinned = spec.region ?? settings.dataCenterId;
    const gpu = (offer.specific as RunPodOfferData).kind === "gpu";
    const severalNodes = spec.nodes.max > 1;
    const peers = spec.plugins.filter((plugin) => plugin.peerNetwork === true).map((plugin) => plugin.name);
    if (!gpu || !severalNodes)
      return { dataCenterIds: pinned ? [pinned] : [], globalNetworking: false, spotAllowed: true };
    if (peers.length > 0 && spec.allocation === "spot") {
      refuse(
        "allocation",
        `plugin "${peers[0]}" needs the pool's ${spec.nodes.max} pods to reach one another through RunPod's global networking, which interruptible pods cannot join: use allocation "on-demand" (or "spot-if-available", which then rents on demand)`,
      );
    }
    const networked = await globalNetworkDataCenters(signal);
    // Only where the type is in stock: an offer stocked only outside them cannot join the network.
    const stocked = (offer.specific as Extract<RunPodOfferData, { kind: "gpu" }>).dataCenterIds ?? [];
    const usable = stocked.length > 0 ? networked.filter((id) => stocked.includes(id)) : networked;
    if (pinned === undefined && usable.length === 0) {
      if (peers.length > 0)
        throw new NoCapacityError({
          attempts: [
            {
              provider: NAME,
              offer: offer.instanceType,
              reason: `in stock only in data centers without global networking (${stocked.join(", ")}), which plugin "${peers[0]}" needs for the pool's pods to reach one another`,
            },
          ],
        });
      return { dataCenterIds: [], globalNetworking: false, spotAllowed: true };
    }
    if (pinned !== undefined && !networked.includes(pinned)) {
      if (peers.length > 0)
        refuse(
          spec.region !== undefined ? "region" : "dataCenterId",
          `data center ${pinned} has no global networking, which plugin "${peers[0]}" needs for the pool's pods to reach one another: use one of ${networked.join(", ")}`,
        );
      return { dataCenterIds: [pinned], globalNetworking: false, spotAllowed: true };
    }
    return {
      dataCenterIds: pinned ? [pinned] : usable,
      globalNetworking: true,
      // Interruptible pods cannot join: a pool that needs the network rents on demand.
      spotAllowed: peers.length === 0,
    };
  }

  return {
    specificationVersion: "v1",
    name: NAME,
    // A marketplace: prices and availability move, so the core caches its offers for an hour at most.
    // GPU pods of one pool join global networking (CPU pods cannot); image pulls take long.
    capabilities: Object.freeze({
      spot: true,
      volumes: false,
      images: true,
      offerCache: "marketplace",
      peerNetwork: "accelerated",
      provisionTimeout: RUNPOD_PROVISION_TIMEOUT_SECONDS,
    }),
    // Every setting the offers depend on (the clouds, the CUDA versions asked for, the bid, the pinned
    // data center, the CPU flavors allowed), so that a provider set otherwise is never handed offers the
    // core cached for another. Not the disks, env, root or key: they shape the pod, not the offers.
    cacheKey: JSON.stringify([
      settings.cloudType,
      cuda,
      settings.spotBidMargin,
      settings.dataCenterId ?? null,
      settings.cpuFlavorIds ?? null,
    ]),

    async offers({ query, signal }) {
      if (query.architecture === "arm64") return [];
      const offers = query.accelerator
        ? await gpuOffers(query, query.accelerator, signal)
        : await cpuOffers(query, signal);
      return filterOffers(offers, query);
    },

    async prepare({ spec, offer, poolId, signal }) {
      requireOwnOffer(offer, NAME, "RunPod");
      // Its pods are containers without FUSE: volumes are refused before anything is created.
      refuseVolumesWithoutFuse(spec.volumes, { provider: "RunPod", machines: "pods" });
      // Fail before creating anything when no key is set.
      runpodApi.resolveApiKey(settings.apiKey);
      if ((offer.specific as RunPodOfferData).kind === "cpu" && settings.volumeGb > 0)
        refuse(
          "volumeGb",
          "RunPod CPU pods take no pod volume (a persistent mount is GPU-only): set volumeGb to 0",
        );
      const where = await placement(spec, offer, signal);
      const keys = await ensureSshKeyPair(keysDirectory(), "runpod_ed25519");
      return Object.freeze({
        id: createClusterId(),
        provider: NAME,
        poolId: poolId ?? "",
        region: where.dataCenterIds.length === 1 ? (where.dataCenterIds[0] as string) : offer.region,
        spec,
        offer,
        ssh: Object.freeze({ user: "root", identityFile: keys.identityFile, sudo: false }),
        specific: Object.freeze({
          publicKey: keys.publicKey,
          identityFile: keys.identityFile,
          image: settings.containerImage,
          containerDiskGb: Math.max(settings.containerDiskGb, Math.ceil(spec.diskGb ?? 0)),
          dataCenterIds: Object.freeze(where.dataCenterIds),
          globalNetworking: where.globalNetworking,
          spotAllowed: where.spotAllowed,
          cuda: (offer.specific as RunPodOfferData).kind === "gpu" ? cuda : {},
        }),
      });
    },

    async provision({ cluster, count, signal }) {
      // Spot and on-demand in the allocation's order; a market without capacity gives way to the next.
      const markets: Market[] = marketsFor(cluster.spec.allocation, cluster.offer).filter(
        (market) => market === "on-demand" || cluster.specific.spotAllowed,
      );
      const cap = cluster.spec.maxHourlyCost;
      const created: Instance[] = [];
      const reasons: string[] = [];
      while (created.length < count && markets.length > 0) {
        const spot = markets[0] === "spot";
        // The budget is checked on the market actually rented.
        const price = spot ? cluster.offer.spotPrice : cluster.offer.onDemandPrice;
        if (price === null || (cap !== undefined && price > cap)) {
          reasons.push(
            `${spot ? "spot" : "on-demand"}: ${price === null ? "no price" : `$${price}/h is over maxHourlyCost $${cap}/h`}`,
          );
          markets.shift();
          continue;
        }
        let outcome: Pod | { noCapacity: string };
        try {
          outcome = spot ? await rentInterruptible(cluster, signal) : await createPod(cluster, signal);
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
        created.push(
          instanceFromPod(
            { ...outcome, cost: outcome.cost ?? price },
            cluster.specific.identityFile,
            Date.now(),
            settings.root,
          ),
        );
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
      return pod ? instanceFromPod(pod, cluster.specific?.identityFile, Date.now(), settings.root) : null;
    },

    launchWorker: launchSshWorker,

    reconnectWorker(options) {
      // A detached pool's node: found again by its id, with the key file its cluster data records.
      return reconnectThroughGetInstance(options, (lookup) => this.getInstance(lookup));
    },

    async terminate({ ids, signal }) {
      for (const id of new Set(ids)) await terminatePod(id, signal);
    },

    async teardown({ cluster, signal }) {
      const left = (await listPods(signal)).filter(
        (pod) =>
          tagsOf(pod)[SKYWARD_TAGS.cluster] === cluster.id &&
          (pod.status ?? "").toUpperCase() !== "TERMINATED",
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
        .map((pod) => instanceFromPod(pod, identityFile, Date.now(), settings.root));
    },
  };
}

/**
 * The RunPod provider: `RunPod()` with default settings, or `RunPod({ cloudType: "secure",
 * containerDiskGb: 100 })`. Throws {@link ConfigurationError} for bad settings; the API key is looked
 * up on the first API call.
 */
export function RunPod(settings: RunPodSettings = {}): ProviderV1<RunPodClusterData> {
  return build(parseSettings(settings, "RunPod"), dockerImageCuda(settings.containerImage));
}

/**
 * Creates the provider from a `[providers.NAME]` table of `skyward.toml` (`type = "runpod"`), its keys
 * already camelCased by the core: `cloud_type = "secure"` arrives as `cloudType`.
 */
export function createProviderFromConfig(settings: Record<string, unknown>): ProviderV1<RunPodClusterData> {
  return build(parseSettings(settings as RunPodSettings, ""), dockerImageCuda(settings.containerImage));
}
