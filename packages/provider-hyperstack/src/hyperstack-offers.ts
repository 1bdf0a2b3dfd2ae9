/** Hyperstack's flavors as Skyward offers, priced from its pricebook (README: Offers, Spot). */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  type NamedAccelerator,
  pricedOffer,
  roundPrice,
} from "@skyward/provider-utils";
import type { Flavor, HyperstackCalls } from "./hyperstack-api.js";
import type { ParsedSettings } from "./hyperstack-settings.js";

/** What an offer carries in {@link Offer.specific}: the flavor (`n3-A100x1`), its region and GPU model (`""` for CPU-only). */
export interface HyperstackOfferData {
  readonly flavorName: string;
  readonly region: string;
  readonly gpu: string;
}

/** The canonical accelerator of a Hyperstack GPU name (`A100-80G-PCIe-w-NVLink`: PCIe boards with an NVLink bridge). */
export function acceleratorOfGpu(gpu: string): NamedAccelerator | undefined {
  return acceleratorFromNames([gpu.replace(/-spot$/i, "").replace(/-(?:w-)?NVLink$/i, "")]);
}

function toOffers(flavor: Flavor, prices: ReadonlyMap<string, number>): Offer[] {
  const { gpu, name, region_name: region } = flavor;
  const count = flavor.gpu_count ?? 0;
  const spot = /-spot$/i.test(gpu);
  const model = gpu !== "" && count > 0 ? acceleratorOfGpu(gpu) : null;
  if (model === undefined) return [];
  const perGpu = prices.get(gpu.toUpperCase()) ?? prices.get(gpu.replace(/-spot$/i, "").toUpperCase());
  const hourly = model ? (perGpu === undefined ? undefined : perGpu * count) : prices.get(name.toUpperCase());
  // An unknown price is never offered (`pricedOffer`): the pool could not hold it to a cap.
  const price = hourly === undefined ? null : roundPrice(hourly);
  const specific: HyperstackOfferData = { flavorName: name, region, gpu };
  return pricedOffer({
    id: `hyperstack:${region}:${name}`,
    provider: "hyperstack",
    instanceType: name,
    accelerator: model ? { ...model, count } : null,
    vcpus: flavor.cpu ?? 0,
    memoryGb: flavor.ram ?? 0,
    diskGb: (flavor.disk ?? 0) + (flavor.ephemeral ?? 0),
    region,
    spotPrice: spot ? price : null,
    onDemandPrice: spot ? null : price,
    billingUnit: "minute",
    specific,
  });
}

/** The offers for `query`: flavors in stock in the regions allowed (the settings', narrowed by the query's). */
export async function hyperstackOffers(
  calls: HyperstackCalls,
  settings: ParsedSettings,
  query: OfferQuery,
  signal: AbortSignal,
) {
  if (query.architecture === "arm64") return [];
  const allowed = settings.regions;
  const wanted = query.region ? [query.region.toUpperCase()] : allowed;
  if (wanted && allowed && !wanted.every((region) => allowed.includes(region))) return [];
  const inRegion = wanted?.length === 1 ? { query: { region: wanted[0] as string } } : {};
  const [flavorGroups, pricebook] = await Promise.all([
    calls.flavors(inRegion, signal),
    calls.pricebook({}, signal),
  ]);
  const prices = new Map<string, number>();
  for (const { name, value } of pricebook)
    if (value != null && value > 0) prices.set(name.toUpperCase(), value);
  return flavorGroups.data
    .flatMap((group) => group.flavors)
    .filter((flavor) => flavor.stock_available !== false)
    .filter((flavor) => wanted === undefined || wanted.includes(flavor.region_name.toUpperCase()))
    .flatMap((flavor) => toOffers(flavor, prices));
}
