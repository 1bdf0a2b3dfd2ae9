/**
 * Prices and markets: rounding prices as offers quote them, and which markets (spot, on-demand) to
 * ask, in which order, for an offer under an allocation strategy.
 */
import type { AllocationStrategy } from "@skyward/core";
import type { Offer } from "@skyward/core/contract";

/** A price rounded to 4 decimals, as offers quote USD per hour (`0.34000000001` → `0.34`). */
export function roundPrice(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}

/** How one instance is bought. */
export type Market = "spot" | "on-demand";

/**
 * The markets to ask for an offer under an allocation, in order; a market the offer has no price in
 * is left out (a null price means there is no such option), except the allocation's only one:
 * - `spot`: spot only; `on-demand`: on-demand only;
 * - `spot-if-available`: spot, then on-demand when spot has no capacity;
 * - `cheapest`: the cheaper of the two first (spot on a tie), then the other.
 *
 * @example
 * ```ts
 * import { marketsFor } from "@skyward/provider-utils";
 *
 * marketsFor("cheapest", { spotPrice: 1.5, onDemandPrice: 1 }); // ["on-demand", "spot"]
 * marketsFor("spot-if-available", { spotPrice: null, onDemandPrice: 1 }); // ["on-demand"]
 * ```
 */
export function marketsFor(
  allocation: AllocationStrategy,
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
): Market[] {
  if (allocation === "spot") return ["spot"];
  if (allocation === "on-demand") return ["on-demand"];
  const { spotPrice, onDemandPrice } = offer;
  if (spotPrice === null) return ["on-demand"];
  if (onDemandPrice === null) return ["spot"];
  if (allocation === "cheapest" && onDemandPrice < spotPrice) return ["on-demand", "spot"];
  return ["spot", "on-demand"];
}
