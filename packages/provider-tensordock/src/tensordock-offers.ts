/**
 * TensorDock's locations as Skyward offers: one per location and GPU model that can hold the count
 * asked, sized to TensorDock's resource steps and priced per resource.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { acceleratorFromNames, type NamedAccelerator, roundPrice } from "@skyward/provider-utils";
import type { Location, LocationGpu } from "./tensordock-api.js";
import type { ParsedSettings } from "./tensordock-settings.js";

/** The provider's name in offers and tags. */
export const NAME = "tensordock";

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

/**
 * TensorDock's resource steps: "CPU cores must be in steps of 2, RAM in steps of 8GB, Storage in steps
 * of 50GB (min 100GB)" ("Modify Instance", https://dashboard.tensordock.com/api/docs/instance-management).
 * A size off its step is refused, so every size asked is rounded up to its step.
 */
export const RESOURCE_STEPS = Object.freeze({ vcpus: 2, ramGb: 8, storageGb: 50 });

/** `value` rounded up to a multiple of `step`. */
export function roundUpToStep(value: number, step: number): number {
  return Math.ceil(value / step) * step;
}

/** The vCPUs, RAM and storage of a VM for the query: the settings' least, the query's, rounded up to the steps. */
export function sizeFor(
  settings: Pick<ParsedSettings, "minVcpus" | "minRamGb" | "storageGb">,
  query: Pick<OfferQuery, "vcpus" | "memoryGb" | "diskGb">,
): { vcpus: number; ramGb: number; storageGb: number } {
  return {
    vcpus: roundUpToStep(Math.max(settings.minVcpus, query.vcpus ?? 0), RESOURCE_STEPS.vcpus),
    ramGb: roundUpToStep(Math.max(settings.minRamGb, query.memoryGb ?? 0), RESOURCE_STEPS.ramGb),
    storageGb: roundUpToStep(Math.max(settings.storageGb, query.diskGb ?? 0), RESOURCE_STEPS.storageGb),
  };
}

/**
 * The canonical accelerator, its memory and its form factor (when the name says it: `H100 SXM5 80GB`,
 * `A100 PCIe 80GB`) of a TensorDock GPU, or undefined.
 */
export function acceleratorOfGpu(
  gpu: Pick<LocationGpu, "v0Name" | "displayName">,
): NamedAccelerator | undefined {
  return acceleratorFromNames([gpu.displayName, gpu.v0Name.replaceAll("-", " ")]);
}

/** Whether a location is the one a setting or a spec's region names (its id, country, city or state). */
export function locationMatches(location: Location, wanted: string): boolean {
  const needle = wanted.trim().toLowerCase();
  return [location.id, location.country, location.city, location.stateprovince].some(
    (field) => field.toLowerCase() === needle,
  );
}

function regionOf(location: Location): string {
  return [location.city, location.country].filter(Boolean).join(", ") || location.id;
}

/** The id of the offer of `count` GPUs of `model` at a location. */
export function offerIdOf(locationId: string, model: string, count: number): string {
  return `tensordock:${locationId}:${model}:x${count}`;
}

/** The offer of a location's GPU for the query, or undefined when it cannot serve it. */
export function toOffer(
  settings: Pick<ParsedSettings, "minVcpus" | "minRamGb" | "storageGb">,
  location: Location,
  gpu: LocationGpu,
  query: OfferQuery,
  pricesAsOf: string,
): Offer | undefined {
  const accelerator = query.accelerator;
  // Skyward reaches a VM on port 22 of its own address: only locations with dedicated IPs.
  if (!accelerator || gpu.network_features?.dedicated_ip_available === false) return undefined;
  const model = acceleratorOfGpu(gpu);
  if (!model || model.name !== accelerator.name) return undefined;
  const count = accelerator.count;
  if ((gpu.max_count ?? 0) < count || gpu.price_per_hr === null) return undefined;
  const { vcpus, ramGb, storageGb } = sizeFor(settings, query);
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
