/**
 * TensorDock's locations as Skyward offers: one per location and GPU model that can hold the count
 * asked, sized to TensorDock's resource steps and priced per resource.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { acceleratorFromNames, machineOffer, roundPrice } from "@skyward/provider-utils";
import type { Location, LocationGpu } from "./tensordock-api.js";
import type { ParsedSettings } from "./tensordock-settings.js";

/** The provider's name in offers and tags. */
export const NAME = "tensordock";

/** What an offer of this provider carries in {@link Offer.specific}: where, which GPU model (`geforcertx4090-pcie-24gb`), how many, and the VM's size. */
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
 * The vCPUs, RAM and storage of a VM: the least set, raised by the query's, rounded up to TensorDock's
 * steps — "CPU cores must be in steps of 2, RAM in steps of 8GB, Storage in steps of 50GB (min 100GB)"
 * ("Modify Instance", https://dashboard.tensordock.com/api/docs/instance-management); a size off its
 * step is refused.
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

/** Whether a location is the one a setting or a spec's region names (its id, country, city or state). */
export function locationMatches(location: Location, wanted: string): boolean {
  const needle = wanted.trim().toLowerCase();
  return [location.id, location.country, location.city, location.stateprovince].some(
    (field) => field.toLowerCase() === needle,
  );
}

/** The id of the offer of `count` GPUs of `model` at a location. */
export function offerIdOf(locationId: string, model: string, count: number): string {
  return `tensordock:${locationId}:${model}:x${count}`;
}

/** The offer of a location's GPU for the query, or undefined when it cannot serve it. */
export function toOffer(
  settings: Sizes,
  location: Location,
  gpu: LocationGpu,
  query: OfferQuery,
  pricesAsOf: string,
): Offer | undefined {
  const accelerator = query.accelerator;
  // Skyward reaches a VM on port 22 of its own address: only locations with dedicated IPs.
  if (!accelerator || gpu.network_features?.dedicated_ip_available === false) return undefined;
  const model = acceleratorFromNames([gpu.displayName, gpu.v0Name.replaceAll("-", " ")]);
  const count = accelerator.count;
  if (model?.name !== accelerator.name || (gpu.max_count ?? 0) < count || gpu.price_per_hr === null)
    return undefined;
  const { vcpus, ramGb, storageGb } = sizeFor(settings, query);
  const { resources: most, pricing } = gpu;
  const fits = (limit: number | null | undefined, size: number) =>
    (limit ?? Number.POSITIVE_INFINITY) >= size;
  if (
    !fits(most?.max_vcpus, vcpus) ||
    !fits(most?.max_ram_gb, ramGb) ||
    !fits(most?.max_storage_gb, storageGb)
  )
    return undefined;
  const hourly =
    gpu.price_per_hr * count +
    (pricing?.per_vcpu_hr ?? 0) * vcpus +
    (pricing?.per_gb_ram_hr ?? 0) * ramGb +
    (pricing?.per_gb_storage_hr ?? 0) * storageGb;
  const specific: TensorDockOfferData = {
    locationId: location.id,
    gpuModel: gpu.v0Name,
    gpuCount: count,
    vcpus,
    ramGb,
    storageGb,
  };
  return machineOffer({
    id: offerIdOf(location.id, gpu.v0Name, count),
    provider: NAME,
    instanceType: `${count > 1 ? `${count}x ` : ""}${gpu.displayName || gpu.v0Name}`,
    accelerator: { ...model, count },
    vcpus,
    memoryGb: ramGb,
    diskGb: storageGb,
    region: [location.city, location.country].filter(Boolean).join(", ") || location.id,
    spotPrice: null,
    onDemandPrice: roundPrice(hourly),
    billingUnit: "second" as const,
    pricesAsOf,
    specific,
  });
}
