/** TensorDock's locations as Skyward offers (README: Offers). */
import type { OfferQuery } from "@skyward/core/contract";
import { acceleratorFromNames, machineOffer, roundPrice } from "@skyward/provider-utils";
import type { TensorDockCalls } from "./tensordock-api.js";
import type { ParsedSettings } from "./tensordock-settings.js";

/** What an offer carries in `Offer.specific`: where, which GPU model (`geforcertx4090-pcie-24gb`), how many, and the VM's size. */
export interface TensorDockOfferData {
  readonly locationId: string;
  readonly gpuModel: string;
  readonly gpuCount: number;
  readonly vcpus: number;
  readonly ramGb: number;
  readonly storageGb: number;
}

type Sizes = Pick<ParsedSettings, "minVcpus" | "minRamGb" | "storageGb">;

/**
 * The vCPUs, RAM and storage of a VM: the least set, raised by the query's, rounded up to TensorDock's steps
 * ("Modify Instance", https://dashboard.tensordock.com/api/docs/instance-management: a size off its step is refused).
 */
export function sizeFor(least: Sizes, query: Pick<OfferQuery, "vcpus" | "memoryGb" | "diskGb">) {
  const step = (least: number, asked: number | undefined, by: number) =>
    Math.ceil(Math.max(least, asked ?? 0) / by) * by;
  return {
    vcpus: step(least.minVcpus, query.vcpus, 2),
    ramGb: step(least.minRamGb, query.memoryGb, 8),
    storageGb: step(least.storageGb, query.diskGb, 50),
  };
}

/** The id of the offer of `count` GPUs of `model` at a location. */
export const offerIdOf = (locationId: string, model: string, count: number) =>
  `tensordock:${locationId}:${model}:x${count}`;

/** The offers for `query`: one per location (as the settings and query name it) and GPU model that can serve it. */
export async function tensordockOffers(
  calls: TensorDockCalls,
  settings: ParsedSettings,
  query: OfferQuery,
  signal: AbortSignal,
) {
  const asked = query.accelerator;
  // TensorDock deploys by location only with a GPU, and only x86_64 machines, never spot.
  if (!asked || query.architecture === "arm64" || query.allocation === "spot") return [];
  const { name: accelerator, count } = asked;
  const wanted = [query.region, settings.location].flatMap((value) => value?.trim().toLowerCase() ?? []);
  const { data } = await calls.locations({}, signal);
  const size = sizeFor(settings, query);
  const amounts = [size.vcpus, size.ramGb, size.storageGb];
  return data.locations.flatMap((location) => {
    // A location is named by its id, country, city or state.
    const names = [location.id, location.country, location.city, location.stateprovince];
    if (!wanted.every((name) => names.some((field) => field.toLowerCase() === name))) return [];
    return location.gpus.flatMap((gpu) => {
      const model = acceleratorFromNames([gpu.displayName, gpu.v0Name.replaceAll("-", " ")]);
      const { resources: most, pricing: per, price_per_hr: perGpu } = gpu;
      const limits = [most?.max_vcpus, most?.max_ram_gb, most?.max_storage_gb];
      if (!amounts.every((amount, at) => (limits[at] ?? amount) >= amount)) return [];
      // Skyward reaches a VM on port 22 of its own address: only locations with dedicated IPs.
      if (gpu.network_features?.dedicated_ip_available === false) return [];
      if (model?.name !== accelerator || (gpu.max_count ?? 0) < count || perGpu === null) return [];
      // A rate left out is a price not known (never a free resource): no offer, no cap could hold it.
      const rates = [per?.per_vcpu_hr, per?.per_gb_ram_hr, per?.per_gb_storage_hr];
      if (rates.some((rate) => rate == null)) return [];
      const hourly = amounts.reduce((sum, amount, at) => sum + rates[at]! * amount, perGpu * count);
      const specific: TensorDockOfferData = {
        locationId: location.id,
        gpuModel: gpu.v0Name,
        gpuCount: count,
        ...size,
      };
      return machineOffer({
        id: offerIdOf(location.id, gpu.v0Name, count),
        provider: "tensordock",
        instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.displayName || gpu.v0Name}`,
        accelerator: { ...model, count },
        vcpus: size.vcpus,
        memoryGb: size.ramGb,
        diskGb: size.storageGb,
        region: [location.city, location.country].filter(Boolean).join(", ") || location.id,
        spotPrice: null,
        onDemandPrice: roundPrice(hourly),
        billingUnit: "second",
        specific,
      });
    });
  });
}
