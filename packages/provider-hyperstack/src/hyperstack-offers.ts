/**
 * Hyperstack's flavors as Skyward offers: `GET /core/flavors` (in stock, in the allowed regions) priced
 * by `GET /pricebook` (per GPU for GPU flavors, per flavor for CPU-only ones). A flavor whose GPU ends
 * in `-spot` is a spot flavor: offered at a spot price only.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import {
  acceleratorFromNames,
  type MachineJsonClient,
  machineOffer,
  type NamedAccelerator,
  roundPrice,
} from "@skyward/provider-utils";
import { type Flavor, flavorsAnswerSchema, pricebookAnswerSchema } from "./hyperstack-api.js";
import type { ParsedSettings } from "./hyperstack-settings.js";

/** The provider's name in offers and tags. */
export const NAME = "hyperstack";

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface HyperstackOfferData {
  /** The flavor to create VMs of (`n3-A100x1`). */
  readonly flavorName: string;
  /** Its region (`CANADA-1`). */
  readonly region: string;
  /** Hyperstack's GPU model name (`A100-80G-PCIe`), or `""` for CPU-only flavors. */
  readonly gpu: string;
}

/**
 * The canonical accelerator, its memory and its form factor (when the name says it) of a Hyperstack
 * GPU name (`A100-80G-PCIe-w-NVLink`: PCIe boards with an NVLink bridge; `H100-80G-SXM5`: SXM), or
 * undefined.
 */
export function acceleratorOfGpu(gpu: string): NamedAccelerator | undefined {
  return acceleratorFromNames([gpu.replace(/-spot$/i, "").replace(/-(?:w-)?NVLink$/i, "")]);
}

function toOffer(flavor: Flavor, prices: ReadonlyMap<string, number>, pricesAsOf: string): Offer | undefined {
  const gpuCount = flavor.gpu_count ?? 0;
  const spot = /-spot$/i.test(flavor.gpu);
  let accelerator: (NamedAccelerator & { count: number }) | null = null;
  let hourly: number | undefined;
  if (flavor.gpu !== "" && gpuCount > 0) {
    const model = acceleratorOfGpu(flavor.gpu);
    if (!model) return undefined;
    accelerator = { ...model, count: gpuCount };
    const perGpu =
      prices.get(flavor.gpu.toUpperCase()) ?? prices.get(flavor.gpu.replace(/-spot$/i, "").toUpperCase());
    hourly = perGpu === undefined ? undefined : perGpu * gpuCount;
  } else {
    hourly = prices.get(flavor.name.toUpperCase());
  }
  // An unknown price is never offered: the pool could not hold it to a cap.
  if (hourly === undefined) return undefined;
  const price = roundPrice(hourly);
  return machineOffer({
    id: `hyperstack:${flavor.region_name}:${flavor.name}`,
    provider: NAME,
    instanceType: flavor.name,
    accelerator,
    vcpus: flavor.cpu ?? 0,
    memoryGb: flavor.ram ?? 0,
    diskGb: (flavor.disk ?? 0) + (flavor.ephemeral ?? 0),
    region: flavor.region_name,
    spotPrice: spot ? price : null,
    onDemandPrice: spot ? null : price,
    billingUnit: "minute" as const,
    pricesAsOf,
    specific: {
      flavorName: flavor.name,
      region: flavor.region_name,
      gpu: flavor.gpu,
    } satisfies HyperstackOfferData,
  });
}

/** The offers for `query`: flavors in stock in the regions allowed (the settings', narrowed by the query's). */
export async function hyperstackOffers(
  client: MachineJsonClient,
  settings: ParsedSettings,
  query: OfferQuery,
  signal: AbortSignal,
): Promise<Offer[]> {
  if (query.architecture === "arm64") return [];
  const allowed = settings.regions;
  const wanted = query.region ? [query.region.toUpperCase()] : allowed;
  if (wanted && allowed && !wanted.every((region) => allowed.includes(region))) return [];
  const region = wanted?.length === 1 ? wanted[0] : undefined;
  const [flavorGroups, pricebook] = await Promise.all([
    client.read(
      "offers",
      "/core/flavors",
      flavorsAnswerSchema,
      "listing flavors",
      signal,
      region ? { region } : undefined,
    ),
    client.read("offers", "/pricebook", pricebookAnswerSchema, "reading the pricebook", signal),
  ]);
  const flavors = flavorGroups.data.flatMap((group) => group.flavors);
  const prices = new Map<string, number>();
  for (const entry of pricebook) {
    if (entry.value !== null && entry.value > 0) prices.set(entry.name.toUpperCase(), entry.value);
  }
  const asOf = new Date().toISOString();
  return flavors
    .filter((flavor) => flavor.stock_available !== false)
    .filter((flavor) => wanted === undefined || wanted.includes(flavor.region_name.toUpperCase()))
    .flatMap((flavor) => toOffer(flavor, prices, asOf) ?? []);
}
