/**
 * RunPod's offers: one per GPU type and cloud from the v2 catalog (on demand) and GraphQL's minimum bids
 * (spot), and one per CPU flavor at the smallest power-of-two size meeting the query.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  cudaConstrained,
  cudaFits,
  machineErrorKind,
  perGpuOffer,
  pricedOffer,
  refuseSetting,
  roundPrice,
} from "@skyward/provider-utils";
import { answers, type CatalogGpu, type RunPodClient, spotPricesQuery } from "./runpod-api.js";
import type { ParsedSettings } from "./runpod-settings.js";

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

/** Sold out, for the pod stock the v2 catalog reports (`NONE`), overall or in the pinned data center. */
function soldOut(entry: Pick<CatalogGpu, "availability" | "dataCenters">, dataCenterId?: string): boolean {
  if (entry.availability === "NONE") return true;
  const there = entry.dataCenters?.find((center) => center.id === dataCenterId);
  return dataCenterId !== undefined && !!entry.dataCenters && (!there || there.availability === "NONE");
}

/** A bid per GPU a margin above `minimum`, in tenths of a cent, and never the minimum itself. */
export function bidAbove(minimum: number, margin: number): number {
  const bid = Math.ceil(minimum * (1 + margin) * 1000 - 1e-9) / 1000;
  return bid > minimum ? bid : Math.round((minimum + 0.001) * 1000) / 1000;
}

/** The minimum bid of a cloud's lowest price; null where the type is out of stock. */
const inStock = (lowest?: { minimumBidPrice: number | null; stockStatus?: string | null } | null) =>
  lowest && !/^(|none|out of stock)$/i.test(lowest.stockStatus ?? "") ? lowest.minimumBidPrice : null;

/** RunPod's offers for the settings, from its catalog and its minimum bids. */
export function runpodOffers(settings: ParsedSettings, client: RunPodClient) {
  const { cuda } = settings;

  async function cpuOffers(query: OfferQuery, dataCenterId: string | undefined, signal: AbortSignal) {
    if (settings.cloudType === "community" || query.allocation === "spot") return [];
    const { cpus } = await client.cpus({}, signal);
    return cpus.flatMap((flavor): Offer[] => {
      const perVcpu = flavor.price.securePerVcpu;
      const listed = settings.cpuFlavorIds?.includes(flavor.id) !== false;
      if (!listed || soldOut(flavor, dataCenterId) || perVcpu === null) return [];
      // The smallest power-of-two vCPU count (RunPod's create rule) the flavor allows that meets the query.
      const ramGb = flavor.ramGbPerVcpu;
      const wanted = Math.max(query.vcpus ?? 2, flavor.vcpu.min, Math.ceil((query.memoryGb ?? 0) / ramGb));
      const vcpus = [2, 4, 8, 16, 32, 64, 128].find((size) => size >= wanted && size <= flavor.vcpu.max);
      if (vcpus === undefined) return [];
      const memoryGb = Number((vcpus * ramGb).toFixed(4));
      const instanceId = `${flavor.id}-${vcpus}-${memoryGb}`;
      return pricedOffer({
        id: `runpod:cpu:${instanceId}`,
        provider: NAME,
        instanceType: instanceId,
        accelerator: null,
        vcpus,
        memoryGb,
        region: dataCenterId ?? "any",
        spotPrice: null,
        onDemandPrice: roundPrice(perVcpu * vcpus),
        specific: { kind: "cpu", flavorId: flavor.id, instanceId, vcpuCount: vcpus, memoryGb } as const,
      });
    });
  }

  return async (query: OfferQuery, signal: AbortSignal): Promise<Offer[]> => {
    const wanted = query.accelerator;
    const dataCenterId = query.region ?? settings.dataCenterId;
    if (query.architecture === "arm64") return [];
    if (!wanted) return cpuOffers(query, dataCenterId, signal);
    // v2 places a GPU pod with its GPU type's own share of vCPUs and memory; nothing asks for more.
    if (query.vcpus !== undefined || query.memoryGb !== undefined)
      refuseSetting(
        query.vcpus !== undefined ? "vcpus" : "memoryGb",
        "RunPod's pod API (v2) cannot ask a GPU pod for a vCPU or memory minimum (each GPU type comes with its own share): leave vcpus and memoryGb unset for RunPod GPU pods, or ask for more GPUs",
      );
    const { count } = wanted;
    // The minimum bids per GPU (GraphQL); none once RunPod no longer serves GraphQL (retired in early
    // 2027: 404/410) and the allocation can do without spot.
    const prices = { query: spotPricesQuery(count), purpose: "pricing interruptible pods", idempotent: true };
    const bids =
      query.allocation === "on-demand"
        ? undefined
        : await client.graphql(answers.spotPrices, { ...prices, signal }).catch((error: unknown) => {
            if (machineErrorKind(error) === "gone" && query.allocation !== "spot") return undefined;
            throw error;
          });
    const offers: Offer[] = [];
    for (const name of ["secure", "community"] as const) {
      if (settings.cloudType !== "all" && settings.cloudType !== name) continue;
      const cloud = name === "secure" ? "SECURE" : "COMMUNITY";
      const params: Record<string, string> = { count: String(Math.trunc(count)), cloud };
      if ("minCudaVersion" in cuda) params.minCudaVersion = cuda.minCudaVersion;
      if ("allowedCudaVersions" in cuda) params.cudaVersions = cuda.allowedCudaVersions.join(",");
      const purpose = `listing GPU types (${name} cloud)`;
      const { gpus } = await client.gpus({ query: params, purpose }, signal);
      for (const gpu of gpus) {
        // The type id or its display name says the board ("NVIDIA A100-SXM4-80GB", "H100 SXM").
        const accelerator = acceleratorFromNames([gpu.id, gpu.name], gpu.memory ?? 0);
        if (
          accelerator?.name !== wanted.name ||
          (wanted.memoryGb !== undefined && accelerator.memoryGb < wanted.memoryGb) ||
          !gpu[name] ||
          count > (gpu.maxCount?.[name] ?? count)
        )
          continue;
        // The versions RunPod has free hosts on (the catalog's, never a list kept here that ages).
        const cudaVersions = (gpu.cudaVersions ?? [])
          .filter((entry) => entry.available && cudaFits(cuda, entry.version))
          .map((entry) => entry.version);
        if (soldOut(gpu, dataCenterId) || (cudaConstrained(cuda) && cudaVersions.length === 0)) continue;
        // v2 cannot ask a community pod for a public IP, and without one it has no direct SSH port: the
        // pool would wait out the provisioning timeout for nothing. Community pods are rented
        // interruptible only (GraphQL's `supportPublicIp`).
        const onDemandPrice = name === "secure" ? (gpu.price?.secure ?? null) : null;
        const minimumBid = inStock(bids?.gpuTypes.find((type) => type.id === gpu.id)?.[`${name}Lowest`]);
        const bidPerGpu = minimumBid === null ? null : bidAbove(minimumBid, settings.spotBidMargin);
        const stocked = (gpu.dataCenters ?? []).filter((center) => center.availability !== "NONE");
        offers.push(
          ...perGpuOffer({
            provider: NAME,
            key: `${name}:${gpu.id}`,
            typeName: `${gpu.id} (${name} cloud)`,
            accelerator,
            count,
            region: dataCenterId,
            perGpu: { spotPrice: bidPerGpu, onDemandPrice },
            specific: {
              kind: "gpu",
              gpuTypeId: gpu.id,
              gpuCount: count,
              cloudType: cloud,
              bidPerGpu,
              dataCenterIds: Object.freeze(stocked.map((center) => center.id)),
              cudaVersions: Object.freeze(cudaVersions),
            } satisfies RunPodOfferData,
          }),
        );
      }
    }
    return offers;
  };
}
