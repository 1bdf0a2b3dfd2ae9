/**
 * How an allocation strategy becomes launches: which markets to try in which order, and the loop
 * that asks each market in each subnet (zone) until enough instances are running, moving on when
 * AWS has no capacity there.
 */
import { type AllocationStrategy, NoCapacityError, type Offer, type ProvisionAttempt } from "@skyward/core";
import { awsErrorCode, isCapacityError, PROVIDER_NAME } from "./aws-api.js";

/** How one instance is bought. */
export type Market = "spot" | "on-demand";

/**
 * The markets to try, in order:
 * - `spot`: spot only;
 * - `on-demand`: on-demand only;
 * - `spot-if-available`: spot, then on-demand when spot has no capacity — straight to on-demand when
 *   the offer has no spot price;
 * - `cheapest`: the cheaper of the two first (spot on a tie), then the other.
 */
export function marketsFor(
  allocation: AllocationStrategy,
  offer: Pick<Offer, "spotPrice" | "onDemandPrice">,
): Market[] {
  switch (allocation) {
    case "spot":
      return ["spot"];
    case "on-demand":
      return ["on-demand"];
    case "spot-if-available":
      return offer.spotPrice === null ? ["on-demand"] : ["spot", "on-demand"];
    case "cheapest": {
      if (offer.spotPrice === null) return ["on-demand"];
      if (offer.onDemandPrice === null) return ["spot", "on-demand"];
      return offer.spotPrice <= offer.onDemandPrice ? ["spot", "on-demand"] : ["on-demand", "spot"];
    }
  }
}

/** One launch request: a market, a subnet and how many instances at most. */
export interface LaunchRequest {
  readonly market: Market;
  readonly subnetId: string;
  readonly count: number;
}

/** Instances launched by one request. */
export interface Launched<T> {
  readonly market: Market;
  readonly items: readonly T[];
}

/**
 * Launches up to `count` instances: for each market in order, for each subnet in order, asks for what
 * is still missing (again in the same subnet after a short answer). A capacity error (see `isCapacityError`) moves on to the next subnet, then the next
 * market; any other error is thrown at once (the caller's `launch` keeps track of what it created, to
 * clean up). Throws `NoCapacityError` listing every attempt when nothing at all could be launched.
 */
export async function launchAcrossMarkets<T>(options: {
  readonly count: number;
  readonly markets: readonly Market[];
  readonly subnetIds: readonly string[];
  readonly instanceType: string;
  readonly launch: (request: LaunchRequest) => Promise<readonly T[]>;
}): Promise<Launched<T>[]> {
  const launched: Launched<T>[] = [];
  const attempts: ProvisionAttempt[] = [];
  let missing = options.count;
  for (const market of options.markets) {
    for (const subnetId of options.subnetIds) {
      if (missing <= 0) break;
      // A short answer (fewer than asked, no error) is asked again in the same subnet: the nodes stay
      // in one zone while it has room, and the next request says whether it still has any.
      while (missing > 0) {
        let items: readonly T[];
        try {
          items = await options.launch({ market, subnetId, count: missing });
        } catch (error) {
          if (!isCapacityError(error)) throw error;
          attempts.push({
            provider: PROVIDER_NAME,
            offer: options.instanceType,
            reason: `${market} in ${subnetId}: ${awsErrorCode(error)}: ${(error as Error).message}`,
          });
          break;
        }
        if (items.length === 0) break;
        launched.push({ market, items });
        missing -= items.length;
      }
    }
  }
  if (launched.length === 0) throw new NoCapacityError({ attempts });
  return launched;
}
