/**
 * Offer ranking: every spec's offers, filtered to those that can run it and ranked by the pool's
 * `selection`; the pool tries them in that order until one provisions.
 */
import {
  type Offer,
  offerFormFactorFit,
  offerPrice,
  offerQuery,
  type Provider,
} from "../contract/provider.js";
import { ConfigurationError, NoOffersError, type ProvisionAttempt } from "../errors/errors.js";
import type { Options } from "../spec/options.js";
import type { PoolSpec } from "../spec/spec.js";
import { cachedOffers } from "./offer-cache.js";
import { abortError } from "./pool-context.js";

/** One offer the pool may provision from, with the spec and provider it came from. */
export interface OfferCandidate {
  readonly spec: PoolSpec;
  readonly provider: Provider;
  readonly offer: Offer;
  readonly price: number;
}

/** What ranking found: the candidates, best first, and why specs gave none. */
export interface RankedOffers {
  readonly candidates: OfferCandidate[];
  readonly attempts: ProvisionAttempt[];
}

/**
 * The offers of every spec, best first (at most three per spec); `defaultProvider` makes the provider of
 * a spec that names none. Throws a `NoOffersError` when no spec has a usable offer, and a provider's
 * `ConfigurationError` as it is.
 */
export async function rankOffers(
  specs: readonly PoolSpec[],
  settings: { readonly defaultProvider: () => Provider; readonly selection: Options["selection"] },
  signal: AbortSignal,
): Promise<RankedOffers> {
  const attempts: ProvisionAttempt[] = [];
  const candidates: (OfferCandidate & { order: number; unverified: boolean })[] = [];
  for (const [order, spec] of specs.entries()) {
    const provider = spec.provider ?? settings.defaultProvider();
    if (spec.allocation === "spot" && !provider.capabilities.spot) {
      attempts.push({
        provider: provider.name,
        reason: `allocation "spot" asks for spot instances, which ${provider.name} does not have (capabilities.spot is false)`,
      });
      continue;
    }
    const query = offerQuery(spec);
    let offers: readonly Offer[];
    try {
      offers = await cachedOffers(provider, query, { signal });
    } catch (error) {
      if (signal.aborted) throw abortError(signal, "Looking for offers");
      // The user's settings are wrong (a field the provider refuses): said as such, before anything
      // starts, rather than as "no offers" or by falling back to another spec's provider.
      if (ConfigurationError.isInstance(error)) throw error;
      attempts.push({ provider: provider.name, reason: `offers failed: ${(error as Error).message}` });
      continue;
    }
    // A known form factor other than the one asked for never runs; an unknown one is kept, tried
    // after every offer known to fit, and reported when provisioned (node.provisioned's
    // unverifiedFormFactor).
    const usable = offers
      .map((offer) => ({ offer, fit: offerFormFactorFit(offer, query) }))
      .filter((entry) => entry.fit !== "differs")
      .map(({ offer, fit }) => ({
        offer,
        unverified: fit === "unknown",
        price: offerPrice(offer, spec.allocation),
      }))
      .filter((entry): entry is { offer: Offer; unverified: boolean; price: number } => entry.price !== null)
      .filter((entry) => spec.maxHourlyCost === undefined || entry.price <= spec.maxHourlyCost)
      .sort((a, b) => Number(a.unverified) - Number(b.unverified) || a.price - b.price)
      .slice(0, 3);
    if (usable.length === 0) {
      const wanted = spec.accelerator
        ? `${spec.accelerator.count}x ${spec.accelerator.name}${spec.accelerator.formFactor === undefined ? "" : ` ${spec.accelerator.formFactor}`}`
        : "CPU nodes";
      attempts.push({
        provider: provider.name,
        reason: `no offer for ${wanted}${spec.maxHourlyCost !== undefined ? ` under $${spec.maxHourlyCost}/h` : ""} (${spec.allocation})`,
      });
      continue;
    }
    for (const entry of usable) candidates.push({ spec, provider, ...entry, order });
  }
  if (candidates.length === 0) throw new NoOffersError({ attempts });
  // "cheapest": the lowest price first, across specs; "first": the specs in the order given. Within
  // either, offers known to have the form factor asked for come before those that do not say.
  candidates.sort((a, b) =>
    settings.selection === "first"
      ? a.order - b.order || Number(a.unverified) - Number(b.unverified) || a.price - b.price
      : Number(a.unverified) - Number(b.unverified) || a.price - b.price,
  );
  return { candidates, attempts };
}
