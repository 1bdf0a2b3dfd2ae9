/**
 * TensorDock's locations as Skyward offers: one per location and GPU model that can hold the count
 * asked, sized to TensorDock's resource steps and priced per resource.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  type MachineJsonClient,
  machineOffer,
  roundPrice,
} from "@skyward/provider-utils";
import { type Location, type LocationGpu, locationsAnswerSchema } from "./tensordock-api.js";
import type { ParsedSettings } from "./tensordock-settings.js";

/** What an offer carries in {@link Offer.specific}: where, which GPU model (`geforcertx4090-pcie-24gb`), how many, and the VM's size. */
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

/** The id of the offer of `count` GPUs of `model` at a location. */
export const offerIdOf = (locationId: string, model: string, count: number) =>
  `tensordock:${locationId}:${model}:x${count}`;

function toOffer(
  settings: Sizes,
  location: Location,
  gpu: LocationGpu,
  query: OfferQuery,
  pricesAsOf: string,
) {
  const accelerator = query.accelerator;
  // Skyward reaches a VM on port 22 of its own address: only locations with dedicated IPs.
  if (!accelerator || gpu.network_features?.dedicated_ip_available === false) return undefined;
  const model = acceleratorFromNames([gpu.displayName, gpu.v0Name.replaceAll("-", " ")]);
  const count = accelerator.count;
  if (model?.name !== accelerator.name || (gpu.max_count ?? 0) < count || gpu.price_per_hr === null) return;
  const size = sizeFor(settings, query);
  const { resources: most, pricing: per } = gpu;
  const fits = (limit: number | null | undefined, asked: number) =>
    (limit ?? Number.POSITIVE_INFINITY) >= asked;
  if (!fits(most?.max_vcpus, size.vcpus) || !fits(most?.max_ram_gb, size.ramGb)) return undefined;
  if (!fits(most?.max_storage_gb, size.storageGb)) return undefined;
  const hourly =
    gpu.price_per_hr * count +
    (per?.per_vcpu_hr ?? 0) * size.vcpus +
    (per?.per_gb_ram_hr ?? 0) * size.ramGb +
    (per?.per_gb_storage_hr ?? 0) * size.storageGb;
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
    pricesAsOf,
    specific,
  });
}

/** The offers for `query`: every location's GPUs that can serve it, in the location the settings and query name. */
export async function tensordockOffers(
  client: MachineJsonClient,
  settings: ParsedSettings,
  query: OfferQuery,
  signal: AbortSignal,
): Promise<Offer[]> {
  // TensorDock deploys by location only with a GPU, and only x86_64 machines, never spot.
  if (!query.accelerator || query.architecture === "arm64" || query.allocation === "spot") return [];
  // A location is named by its id, country, city or state.
  const wanted = [query.region, settings.location].flatMap((value) => value?.trim().toLowerCase() ?? []);
  const answer = await client.read(
    "offers",
    "/locations",
    locationsAnswerSchema,
    "listing locations",
    signal,
  );
  const asOf = new Date().toISOString();
  return answer.data.locations
    .filter(({ id, country, city, stateprovince }) => {
      const names = [id, country, city, stateprovince].map((name) => name.toLowerCase());
      return wanted.every((name) => names.includes(name));
    })
    .flatMap((location) =>
      location.gpus.flatMap((gpu) => toOffer(settings, location, gpu, query, asOf) ?? []),
    );
}
