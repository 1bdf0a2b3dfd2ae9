/**
 * The RunPod provider: GPU pods in the secure and community clouds, on demand (REST API v2) or
 * interruptible (GraphQL's `podRentInterruptable`, bidding a margin above the minimum), and CPU pods,
 * reached over SSH as root on the address and port RunPod publishes for 22; the public half of a key
 * pair made here goes to the pod as `PUBLIC_KEY`, which RunPod's images install. An adapter on
 * provider-utils' machine-provider base; Skyward's tags travel in the pod's environment.
 */
import { NoCapacityError } from "@skyward/core";
import type { Offer, PoolSpec, ProviderV1 } from "@skyward/core/contract";
import {
  type CudaConstraint,
  containerMarketplace,
  cudaConstrained,
  type MachineAdapter,
  type MachineClusterData,
  machineProviderFactories,
  refuseSetting,
  skywardTagsFromEnvironment,
  skywardTagsToEnvironment,
} from "@skyward/provider-utils";
import {
  answers,
  type Pod,
  podSchema,
  RENT_INTERRUPTIBLE,
  RunPodApiError,
  runpodApi,
  runpodClient,
} from "./runpod-api.js";
import { selfDestructCommand, watchedStartCommand } from "./runpod-boot.js";
import { NAME, type RunPodOfferData, runpodOffers } from "./runpod-offers.js";
import { type RunPodSettings, settingsSchema, withCuda } from "./runpod-settings.js";

/** What a RunPod cluster keeps in `Cluster.specific`. */
export interface RunPodClusterData extends MachineClusterData {
  /** The container image and disk (GB) of the pods. */
  readonly image: string;
  readonly containerDiskGb: number;
  /** The data centers pods may be placed in; empty: any. A pool of several GPU pods has exactly one. */
  readonly dataCenterIds: readonly string[];
  /** Whether pods join global networking (a multi-node GPU pool): their private addresses reach one another. */
  readonly globalNetworking: boolean;
  /** Interruptible pods may be rented (not when the pods must join global networking, which they cannot). */
  readonly spotAllowed: boolean;
  /** The CUDA versions the host must run. */
  readonly cuda: CudaConstraint;
}

/** The address and port RunPod publishes for a pod's port 22, once it does. */
function directSsh(pod: Pod) {
  const port22 = pod.runtime?.ports?.find((port) => port.private === 22 && port.ip && port.public);
  const host = pod.ssh?.direct?.host ?? port22?.ip;
  const port = pod.ssh?.direct?.port ?? port22?.public;
  return host && port ? { host, port } : undefined;
}

function adapterFor(...parsed: Parameters<typeof withCuda>): MachineAdapter<Pod, RunPodClusterData> {
  const settings = withCuda(...parsed);
  const client = runpodClient(settings);
  const volume = settings.volumeGb > 0;
  const { cloudType, cuda, spotBidMargin, dataCenterId, cpuFlavorIds } = settings;

  /**
   * Where a pool's pods go and whether they join global networking, refused before anything starts. A
   * pool of several GPU pods is pinned to one data center with global networking: across data centers
   * it carries at most 100 Mbps (https://docs.runpod.io/pods/networking).
   */
  async function placement(spec: PoolSpec, offer: Offer, signal: AbortSignal) {
    const pinned = spec.region ?? dataCenterId;
    const specific = offer.specific as RunPodOfferData;
    const peer = spec.plugins.find((plugin) => plugin.peerNetwork === true)?.name;
    const placed = (centers: string[], globalNetworking = false) => ({
      dataCenterIds: Object.freeze(centers),
      globalNetworking,
      spotAllowed: !globalNetworking || peer === undefined,
    });
    if (specific.kind !== "gpu" || spec.nodes.max <= 1) return placed(pinned ? [pinned] : []);
    const needs = `plugin "${peer}" needs for the pool's pods to reach one another`;
    if (peer !== undefined && spec.allocation === "spot")
      refuseSetting(
        "allocation",
        `plugin "${peer}" needs the pool's ${spec.nodes.max} pods to reach one another through RunPod's global networking, which interruptible pods cannot join: use allocation "on-demand" (or "spot-if-available", which then rents on demand)`,
      );
    const { dataCenters } = await client.dataCenters({}, signal);
    const networked = dataCenters.filter((center) => center.globalNetwork !== false).map(({ id }) => id);
    // The pinned one, else where the type is in stock: an offer stocked only outside them cannot join.
    const wanted = pinned !== undefined ? [pinned] : specific.dataCenterIds;
    const [center] = wanted.length > 0 ? networked.filter((id) => wanted.includes(id)) : networked;
    // One data center for every pod (the catalog lists the best-stocked first); interruptible pods
    // cannot join the network, so a pool that needs it rents on demand.
    if (center !== undefined) return placed([center], true);
    if (peer === undefined) return placed(pinned ? [pinned] : []);
    if (pinned !== undefined)
      refuseSetting(
        spec.region !== undefined ? "region" : "dataCenterId",
        `data center ${pinned} has no global networking, which ${needs}: use one of ${networked.join(", ")}`,
      );
    const reason = `in stock only in data centers without global networking (${specific.dataCenterIds.join(", ")}), which ${needs}`;
    throw new NoCapacityError({ attempts: [{ provider: NAME, offer: offer.instanceType, reason }] });
  }

  // A marketplace: the core caches its offers for an hour at most. GPU pods of one pool join global
  // networking (CPU pods cannot); image pulls take long. Neither v2 nor GraphQL takes an idempotency
  // token: a create whose answer was lost is found by name.
  return {
    ...containerMarketplace({
      name: NAME,
      label: "RunPod",
      settings,
      clusterIdPrefix: "skyward",
      peerNetwork: "accelerated",
      containers: "pods",
      // A pod runs, with SSH coordinates, once RunPod publishes the public address and port mapped to 22.
      mapping: {
        statuses: { running: ["RUNNING"], terminated: ["TERMINATED", "EXITED", "ERROR"] },
        deleting: ["TERMINATED"],
        nameTag: "runpod:name",
        tags: (pod) => skywardTagsFromEnvironment(pod.env ?? {}),
        address: directSsh,
        publicIp: (pod, status) => (status === "running" ? (directSsh(pod)?.host ?? null) : null),
        privateIp: (pod, _standIn, publicIp) => pod.globalNetworking?.ip ?? publicIp,
        hourlyPrice: (pod) => pod.cost,
        createdAt: (pod) => pod.createdAt,
        root: settings.root,
      },
    }),
    // Every setting the offers depend on, so that a provider set otherwise is never handed offers cached
    // for another; not the disks, env, root or key, which shape the pod, not the offers.
    cacheKey: JSON.stringify([cloudType, cuda, spotBidMargin, dataCenterId ?? null, cpuFlavorIds ?? null]),

    checkCredentials: () => void runpodApi.resolveApiKey(settings.apiKey),
    offers: runpodOffers(settings, client),

    async prepare({ spec, offer, keys, signal }) {
      const gpu = (offer.specific as RunPodOfferData).kind === "gpu";
      const noVolume =
        "RunPod CPU pods take no pod volume (a persistent mount is GPU-only): set volumeGb to 0";
      if (!gpu && volume) refuseSetting("volumeGb", noVolume);
      const containerDiskGb = Math.max(settings.containerDiskGb, Math.ceil(spec.diskGb ?? 0));
      const where = await placement(spec, offer, signal);
      return { ...keys, ...where, image: settings.containerImage, containerDiskGb, cuda: gpu ? cuda : {} };
    },

    spotAllowed: (cluster) => cluster.specific.spotAllowed,

    async create({ cluster, spot, name, tags, watchdogSeconds, signal }) {
      const offer = cluster.offer.specific as RunPodOfferData;
      const { image, containerDiskGb: disk, dataCenterIds, cuda, publicKey } = cluster.specific;
      const env = { ...settings.env, PUBLIC_KEY: publicKey, ...skywardTagsToEnvironment(tags) };
      const args = watchedStartCommand({ ...settings, seconds: watchdogSeconds });
      if (spot && offer.kind === "gpu") {
        // An interruptible GPU pod through GraphQL (v2 has none), at the offer's bid per GPU.
        const input = {
          name,
          imageName: image,
          gpuTypeId: offer.gpuTypeId,
          gpuCount: offer.gpuCount,
          cloudType: offer.cloudType,
          containerDiskInGb: disk,
          volumeInGb: settings.volumeGb,
          ...(volume ? { volumeMountPath: settings.volumeMountPath } : {}),
          ports: "22/tcp",
          startSsh: true,
          // A pod without a public IP has no direct SSH port.
          supportPublicIp: true,
          dockerArgs: args,
          env: Object.entries(env).map(([key, value]) => ({ key, value })),
          // GraphQL takes an exact list: the catalog's versions of free hosts that run the image.
          ...(cudaConstrained(cuda) ? { allowedCudaVersions: [...offer.cudaVersions] } : {}),
          ...(dataCenterIds.length === 1 ? { dataCenterId: dataCenterIds[0] } : {}),
          bidPerGpu: offer.bidPerGpu,
        };
        const purpose = "renting an interruptible pod";
        const request = { query: RENT_INTERRUPTIBLE, variables: { input }, purpose, idempotent: false };
        const { podRentInterruptable: rented } = await client.graphql(answers.rented, { ...request, signal });
        const message = "RunPod's podRentInterruptable returned no pod";
        if (!rented) throw new RunPodApiError({ kind: "capacity", message });
        return podSchema.parse({ id: rented.id, name, status: "PROVISIONING", env });
      }
      const gpu = offer.kind === "gpu";
      const mounts = { persistent: { size: settings.volumeGb, path: settings.volumeMountPath } };
      const body = {
        name,
        image,
        args,
        cloud: gpu ? offer.cloudType : "SECURE",
        disk,
        env,
        ports: ["22/tcp"],
        ...(dataCenterIds.length > 0 ? { dataCenterIds: [...dataCenterIds] } : {}),
        ...(gpu
          ? {
              gpu: { id: offer.gpuTypeId, count: offer.gpuCount, ...cuda },
              ...(cluster.specific.globalNetworking ? { globalNetworking: true } : {}),
              ...(volume ? { mounts } : {}),
            }
          : { cpu: { id: offer.flavorId, vcpuCount: offer.vcpuCount } }),
      };
      return client.create({ body, purpose: gpu ? "creating a GPU pod" : "creating a CPU pod" }, signal);
    },

    get: (id, signal) => client.get({ id }, signal),
    listPage: client.list.page,
    delete: { one: async (id, signal) => void (await client.delete({ id }, signal)) },
    selfDestruct: (instance) => selfDestructCommand(instance.id),
  };
}

const factories = machineProviderFactories<RunPodSettings>()("RunPod", settingsSchema, adapterFor);

/**
 * The RunPod provider: `RunPod()` with default settings, or `RunPod({ cloudType: "secure",
 * containerDiskGb: 100 })`. Throws `ConfigurationError` for bad settings; the API key is looked up on
 * the first API call.
 */
export const RunPod: (settings?: RunPodSettings) => ProviderV1<RunPodClusterData> = factories.provider;

/** The provider from a `[providers.NAME]` table of `skyward.toml` (`type = "runpod"`), keys camelCased: `cloud_type` → `cloudType`. */
export const createProviderFromConfig = factories.fromConfig;
