/**
 * RunPod's offers: one per GPU type and cloud from the v2 catalog (on demand) and GraphQL's minimum
 * bids (spot), and one per CPU flavor at the smallest power-of-two size meeting the query.
 */
import {
  acceleratorFormFactor,
  canonicalAcceleratorName,
  type Offer,
  type OfferQuery,
} from "@skyward/core/contract";
import {
  type JsonCall,
  machineErrorKind,
  machineOffer,
  refuseSetting,
  roundPrice,
} from "@skyward/provider-utils";
import {
  answers,
  type CatalogCpu,
  type CatalogGpu,
  graphql,
  parseAnswer,
  requireData,
  spotPricesQuery,
} from "./runpod-api.js";
import { cudaFits, type ParsedSettings } from "./runpod-settings.js";

export const NAME = "runpod";

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
      /** The CUDA versions of hosts with the type free that run the image, as the catalog listed them. */
      readonly cudaVersions: readonly string[];
    }
  | {
      readonly kind: "cpu";
      readonly flavorId: string;
      readonly instanceId: string;
      readonly vcpuCount: number;
      readonly memoryGb: number;
    };

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
function soldOut(entry: CatalogGpu | CatalogCpu, dataCenterId: string | undefined): boolean {
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

/** RunPod's offers for the settings, from its catalog and its minimum bids. */
export function runpodOffers(settings: ParsedSettings, calls: JsonCall, http: Parameters<typeof graphql>[0]) {
  const { cuda } = settings;

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
    return (await calls("GET", "/catalog/gpus", { schema: answers.gpus, params, purpose, signal })).gpus;
  }

  /**
   * The minimum bid per GPU of each type, by cloud (GraphQL); undefined once RunPod no longer serves
   * GraphQL (retired in early 2027: 404/410) and the allocation can do without spot.
   */
  async function minimumBids(query: OfferQuery, count: number, signal: AbortSignal) {
    const purpose = "pricing interruptible pods";
    let gpuTypes: (typeof answers.spotPrices)["_zod"]["output"]["gpuTypes"];
    try {
      const result = await graphql(http, {
        query: spotPricesQuery(count),
        purpose,
        idempotent: true,
        signal,
      });
      gpuTypes = parseAnswer(answers.spotPrices, requireData(result, purpose), purpose).gpuTypes;
    } catch (error) {
      if (machineErrorKind(error) === "gone" && query.allocation !== "spot") return undefined;
      throw error;
    }
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

  async function gpuOffers(
    query: OfferQuery,
    accelerator: NonNullable<OfferQuery["accelerator"]>,
    signal: AbortSignal,
  ): Promise<Offer[]> {
    if (query.vcpus !== undefined || query.memoryGb !== undefined) {
      // v2 places a GPU pod with its GPU type's own share of vCPUs and memory; nothing asks for more.
      refuseSetting(
        query.vcpus !== undefined ? "vcpus" : "memoryGb",
        "RunPod's pod API (v2) cannot ask a GPU pod for a vCPU or memory minimum (each GPU type comes with its own share): leave vcpus and memoryGb unset for RunPod GPU pods, or ask for more GPUs",
      );
    }
    const dataCenterId = query.region ?? settings.dataCenterId;
    const clouds = (["SECURE", "COMMUNITY"] as const).filter(
      (cloud) => settings.cloudType === "all" || settings.cloudType === cloud.toLowerCase(),
    );
    const bids =
      query.allocation !== "on-demand" ? await minimumBids(query, accelerator.count, signal) : undefined;
    const asOf = new Date().toISOString();
    const count = accelerator.count;
    const offers: Offer[] = [];
    for (const cloud of clouds) {
      for (const gpu of await catalogGpus(count, cloud, signal)) {
        const canonical = canonicalAcceleratorName(gpu.id) ?? canonicalAcceleratorName(gpu.name ?? "");
        if (canonical !== accelerator.name) continue;
        const memoryGb = gpu.memory ?? 0;
        if (accelerator.memoryGb !== undefined && memoryGb < accelerator.memoryGb) continue;
        const secure = cloud === "SECURE";
        if (!(secure ? gpu.secure : gpu.community)) continue;
        const maxCount = secure ? gpu.maxCount?.secure : gpu.maxCount?.community;
        if (typeof maxCount === "number" && count > maxCount) continue;
        // The versions RunPod has free hosts on (the catalog's, never a list kept here that ages).
        const cudaVersions = (gpu.cudaVersions ?? [])
          .filter((entry) => entry.available && cudaFits(cuda, entry.version))
          .map((entry) => entry.version);
        const constrained = "minCudaVersion" in cuda || "allowedCudaVersions" in cuda;
        // Sold out, or no host with a CUDA version the image runs on: not offered.
        if (soldOut(gpu, dataCenterId) || (constrained && cudaVersions.length === 0)) continue;
        // v2 cannot ask a community pod for a public IP, and without one it has no direct SSH port: the
        // pool would wait out the provisioning timeout for nothing. Community pods are rented
        // interruptible only (GraphQL's `supportPublicIp`).
        const onDemandPerGpu = secure ? (gpu.price?.secure ?? null) : null;
        const minimumBid = bids?.get(gpu.id)?.[cloud] ?? null;
        const bidPerGpu = minimumBid === null ? null : bidAbove(minimumBid, settings.spotBidMargin);
        if (onDemandPerGpu === null && bidPerGpu === null) continue;
        // The type id or its display name says the board ("NVIDIA A100-SXM4-80GB", "H100 SXM",
        // "NVIDIA H100 NVL"); "NVIDIA H100 80GB HBM3" alone does not, its name "H100 SXM" does.
        const formFactor = acceleratorFormFactor(gpu.id) ?? acceleratorFormFactor(gpu.name ?? "");
        const specific: RunPodOfferData = {
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
          cudaVersions: Object.freeze(cudaVersions),
        };
        offers.push(
          machineOffer({
            id: `runpod:${cloud.toLowerCase()}:${gpu.id}:x${count}`,
            provider: NAME,
            instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.id} (${cloud.toLowerCase()} cloud)`,
            accelerator: {
              name: canonical,
              count,
              memoryGb,
              ...(formFactor === undefined ? {} : { formFactor }),
            },
            vcpus: 0,
            memoryGb: 0,
            region: dataCenterId ?? "any",
            spotPrice: bidPerGpu === null ? null : roundPrice(bidPerGpu * count),
            onDemandPrice: onDemandPerGpu === null ? null : roundPrice(onDemandPerGpu * count),
            pricesAsOf: asOf,
            specific,
          }),
        );
      }
    }
    return offers;
  }

  async function cpuOffers(query: OfferQuery, signal: AbortSignal): Promise<Offer[]> {
    if (settings.cloudType === "community" || query.allocation === "spot") return [];
    const purpose = "listing CPU flavors";
    const params = { include: "AVAILABILITY", product: "POD" };
    const { cpus } = await calls("GET", "/catalog/cpus", { schema: answers.cpus, params, purpose, signal });
    const dataCenterId = query.region ?? settings.dataCenterId;
    const asOf = new Date().toISOString();
    return cpus.flatMap((flavor): Offer[] => {
      if (settings.cpuFlavorIds !== undefined && !settings.cpuFlavorIds.includes(flavor.id)) return [];
      if (soldOut(flavor, dataCenterId) || flavor.price.securePerVcpu === null) return [];
      const size = cpuSize(flavor, query);
      if (!size) return [];
      const instanceId = `${flavor.id}-${size.vcpus}-${size.memoryGb}`;
      const specific: RunPodOfferData = {
        kind: "cpu",
        flavorId: flavor.id,
        instanceId,
        vcpuCount: size.vcpus,
        memoryGb: size.memoryGb,
      };
      return [
        machineOffer({
          id: `runpod:cpu:${instanceId}`,
          provider: NAME,
          instanceType: instanceId,
          accelerator: null,
          vcpus: size.vcpus,
          memoryGb: size.memoryGb,
          region: dataCenterId ?? "any",
          spotPrice: null,
          onDemandPrice: roundPrice(flavor.price.securePerVcpu * size.vcpus),
          pricesAsOf: asOf,
          specific,
        }),
      ];
    });
  }

  return async (query: OfferQuery, signal: AbortSignal): Promise<Offer[]> => {
    if (query.architecture === "arm64") return [];
    return query.accelerator ? gpuOffers(query, query.accelerator, signal) : cpuOffers(query, signal);
  };
}
