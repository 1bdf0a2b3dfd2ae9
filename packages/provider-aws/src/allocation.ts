/**
 * How the markets an allocation strategy asks (`marketsFor` of `@skyward/provider-utils`) become
 * launches: the loop that asks each market in each subnet (zone) until enough instances are running,
 * moving on when AWS has no capacity there.
 */
import { NoCapacityError, type ProvisionAttempt } from "@skyward/core";
import type { Market } from "@skyward/provider-utils";
import { awsErrorCode, isCapacityError, PROVIDER_NAME } from "./aws-api.js";

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
