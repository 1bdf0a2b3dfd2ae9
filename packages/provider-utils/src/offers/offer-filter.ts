/**
 * The checks every provider's `offers` applies to what its API returns: the hardware the query asks
 * for, and a price under the query's allocation within its cap.
 */
import { ConfigurationError } from "@skyward/core";
import { type Offer, type OfferQuery, offerFormFactorFit, offerPrice } from "@skyward/core/contract";

/** The hardware of an offer (or of a machine type before it is priced), as {@link matchesHardware} reads it. */
export interface OfferHardware {
  /** The accelerators per node, or null for CPU-only. */
  readonly accelerator: {
    readonly name: string;
    readonly count: number;
    readonly memoryGb: number;
    /** The form factor when known (`SXM`, `PCIe`); undefined when the provider's data does not say. */
    readonly formFactor?: string;
  } | null;
  /** vCPUs per node. */
  readonly vcpus: number;
  /** Memory per node, GB. */
  readonly memoryGb: number;
  /** Disk per node, GB, when fixed (a disk sized to the spec is not checked). */
  readonly diskGb?: number;
  /** The CPU architecture, or every one the machine type comes in. */
  readonly architecture: Offer["architecture"] | readonly Offer["architecture"][];
}

/**
 * True when `hardware` has what `query` asks for: the accelerator by canonical name (case aside) and
 * exact count (machine types come in fixed sizes; asking for 1 should not buy 8; a fractional count
 * matches a GPU partition of that size), accelerator memory, vCPUs, memory and a fixed disk at least
 * as asked, and the architecture when asked. A CPU-only query matches only CPU-only hardware. A form
 * factor asked for excludes hardware labelled with another one; unlabelled hardware is kept (the pool
 * reports it), see `offerFormFactorFit` of `@skyward/core/contract`.
 */
export function matchesHardware(hardware: OfferHardware, query: OfferQuery): boolean {
  if (query.architecture !== undefined) {
    const architectures: readonly string[] =
      typeof hardware.architecture === "string" ? [hardware.architecture] : hardware.architecture;
    if (!architectures.includes(query.architecture)) return false;
  }
  if (query.vcpus !== undefined && hardware.vcpus < query.vcpus) return false;
  if (query.memoryGb !== undefined && hardware.memoryGb < query.memoryGb) return false;
  if (query.diskGb !== undefined && hardware.diskGb !== undefined && hardware.diskGb < query.diskGb)
    return false;
  const wanted = query.accelerator;
  const have = hardware.accelerator;
  if (wanted === null) return have === null;
  if (!have || have.name.toUpperCase() !== wanted.name.toUpperCase()) return false;
  if (Math.abs(have.count - wanted.count) > 1e-9) return false;
  if (offerFormFactorFit(hardware, query) === "differs") return false;
  return wanted.memoryGb === undefined || have.memoryGb >= wanted.memoryGb;
}

/**
 * True when `offer` can be bought under the query's allocation (a spot price for `"spot"`, an
 * on-demand price for `"on-demand"`, either otherwise) at no more than its `maxHourlyCost`.
 */
export function fitsAllocationAndBudget(
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
  query: Pick<OfferQuery, "allocation" | "maxHourlyCost">,
): boolean {
  const price = offerPrice(offer, query.allocation);
  if (price === null) return false;
  return query.maxHourlyCost === undefined || price <= query.maxHourlyCost;
}

/**
 * The offers that answer `query`: {@link matchesHardware} and {@link fitsAllocationAndBudget}. What
 * `offers` returns after turning the API's answer into offers.
 *
 * @example
 * ```ts
 * import type { Offer, OfferQuery } from "@skyward/core/contract";
 * import { filterOffers } from "@skyward/provider-utils";
 *
 * declare const fromApi: Offer[];
 * declare const query: OfferQuery;
 * const offers: Offer[] = filterOffers(fromApi, query);
 * ```
 */
export function filterOffers<T extends Offer>(offers: readonly T[], query: OfferQuery): T[] {
  return offers.filter((offer) => matchesHardware(offer, query) && fitsAllocationAndBudget(offer, query));
}

/**
 * Throws a `ConfigurationError` at `offer` unless `offer` comes from the provider `name` — what
 * `prepare` checks first. `label` names the provider as people write it (`"RunPod"`).
 */
export function requireOwnOffer(offer: Offer, name: string, label: string): void {
  if (offer.provider === name) return;
  throw new ConfigurationError({
    issues: [{ path: "offer", message: `expected a ${label} offer, received one from "${offer.provider}"` }],
  });
}
