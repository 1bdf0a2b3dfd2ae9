/**
 * Novita's offers: one per GPU product that can be deployed, for the GPU count asked. `GET /products`
 * gives prices per GPU (as its `cpuPerGpu` and `memoryPerGpu`), in 1/100,000 USD an hour, under the
 * `gpuNum` asked; an offer's prices are for the whole instance, per GPU times the count. What an
 * instance then bills (`instancePrice`) is checked against the cap again by the machine-provider base.
 */
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { acceleratorFromNames, machineOffer, roundPrice } from "@skyward/provider-utils";
import { NOVITA_PRICE_UNITS_PER_USD, type NovitaProduct } from "./novita-api.js";

export const NAME = "novita";

/** What an offer of this provider carries in {@link Offer.specific}. */
export interface NovitaOfferData {
  /** Novita's product id. */
  readonly productId: string;
  /** Novita's product name (`A100 SXM 80GB`). */
  readonly productName: string;
  readonly gpuNum: number;
  /** The product's root filesystem bounds, GB, when it states them. */
  readonly minRootFS?: number | undefined;
  readonly maxRootFS?: number | undefined;
}

/** `A100 SXM 80GB` → its canonical accelerator, memory per GPU and form factor (when the name says it). */
function acceleratorOf(product: NovitaProduct) {
  const model = product.name.replace(/\s+\d+\s*GB.*$/i, "").trim();
  const short = model.split(/\s+/).slice(0, model.startsWith("RTX") ? 2 : 1);
  return acceleratorFromNames([model, short.join(" "), product.name]);
}

/**
 * The offers of the products listed per market (`onDemand`, `spot`) for the query's accelerator; a
 * product whose `maxRootFS` is below the root filesystem wanted is left out (Novita would refuse it).
 */
export function toOffers(
  listed: { onDemand: readonly NovitaProduct[]; spot: readonly NovitaProduct[] },
  query: OfferQuery,
  region: string | undefined,
  rootfsGb: number,
): Offer[] {
  const accelerator = query.accelerator;
  if (!accelerator) return [];
  const count = accelerator.count;
  const perInstance = (price: number | null | undefined) =>
    price ? roundPrice((price / NOVITA_PRICE_UNITS_PER_USD) * count) : null;
  const products = new Map<string, NovitaProduct>();
  for (const product of [...listed.onDemand, ...listed.spot]) products.set(product.id, product);
  const asOf = new Date().toISOString();
  return [...products.values()].flatMap((product) => {
    const gpu = acceleratorOf(product);
    if (product.availableDeploy === false || gpu?.name !== accelerator.name) return [];
    if (product.maxRootFS != null && product.maxRootFS < rootfsGb) return [];
    // A market's price is the one its own listing gives; an empty `spotPrice` ("") means none.
    const onDemandPrice = perInstance(listed.onDemand.find((entry) => entry.id === product.id)?.price);
    const spotPrice = perInstance(listed.spot.find((entry) => entry.id === product.id)?.spotPrice);
    if (onDemandPrice === null && spotPrice === null) return [];
    const specific: NovitaOfferData = {
      productId: product.id,
      productName: product.name,
      gpuNum: count,
      minRootFS: product.minRootFS ?? undefined,
      maxRootFS: product.maxRootFS ?? undefined,
    };
    return [
      machineOffer({
        id: `novita:${product.id}:x${count}`,
        provider: NAME,
        instanceType: `${count > 1 ? `${count}x ` : ""}${product.name}`,
        accelerator: { ...gpu, count },
        vcpus: (product.cpuPerGpu ?? 0) * count,
        memoryGb: (product.memoryPerGpu ?? 0) * count,
        region: region ?? "any",
        spotPrice,
        onDemandPrice,
        pricesAsOf: asOf,
        specific,
      }),
    ];
  });
}
