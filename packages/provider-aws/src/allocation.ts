/**
 * How the markets an allocation strategy asks (`marketsFor` of `@skyward/provider-utils`) become
 * launches: the loop that asks each market in each subnet (zone) until enough instances are running,
 * moving on when AWS has no capacity there — within the pool's budget on the market actually asked,
 * in one zone, for a bounded number of calls.
 */
import { NoCapacityError, type ProvisionAttempt, type ProvisionError } from "@skyward/core/contract";
import type { Market } from "@skyward/provider-utils";
import { awsErrorCode, isCapacityError, isQuotaError, PROVIDER_NAME, quotaError } from "./aws-api.js";

/** One launch request: a market, a subnet and how many instances (all or none: `MinCount = count`). */
export interface LaunchRequest {
  readonly market: Market;
  readonly subnetId: string;
  readonly count: number;
}

/** Instances launched by one request. */
export interface Launched<T> {
  readonly market: Market;
  readonly subnetId: string;
  readonly items: readonly T[];
}

/** The most `RunInstances` calls one `provision` makes before giving up (each names its market and zone). */
export const MAX_LAUNCH_ATTEMPTS = 8;

/**
 * Launches up to `count` instances: for each market in order, for each subnet in order, asks for what
 * is still missing (again in the same subnet after a short answer).
 *
 * - A market is asked only at a known hourly price within `maxHourlyCost`: the budget is checked on
 *   the market launched, not on the one the offer was chosen by, and a market whose price is unknown
 *   is never launched (the documented rule: no launch at an unknown price).
 * - Once an instance runs in a subnet, the rest go to that subnet only: a pool's nodes share a zone.
 * - A capacity error (see `isCapacityError`) moves on to the next subnet, then the next market; a
 *   quota error (`isQuotaError`, regional) skips the market's other subnets; any other error is
 *   thrown at once (the caller's `launch` keeps track of what it created, to clean up).
 * - At most `maxAttempts` launches. When nothing at all could be launched, throws the quota's
 *   `ProvisionError` when every market met a quota, else `NoCapacityError` listing every attempt.
 */
export async function launchAcrossMarkets<T>(options: {
  readonly count: number;
  readonly markets: readonly Market[];
  readonly subnetIds: readonly string[];
  readonly instanceType: string;
  readonly region?: string;
  /** The hourly price of one instance in a market and subnet (spot prices differ by zone), or null when unknown. */
  readonly priceOf?: (market: Market, subnetId: string) => number | null;
  readonly maxHourlyCost?: number;
  readonly maxAttempts?: number;
  readonly launch: (request: LaunchRequest) => Promise<readonly T[]>;
}): Promise<Launched<T>[]> {
  const launched: Launched<T>[] = [];
  const attempts: ProvisionAttempt[] = [];
  const quotaErrors: ProvisionError[] = [];
  const maxAttempts = options.maxAttempts ?? MAX_LAUNCH_ATTEMPTS;
  const region = options.region ?? "the region";
  let calls = 0;
  let capacityErrors = 0;
  let missing = options.count;
  let zone: string | undefined;
  const note = (reason: string) => {
    if (!attempts.some((attempt) => attempt.reason === reason))
      attempts.push({ provider: PROVIDER_NAME, offer: options.instanceType, reason });
  };
  /** Why `market` is not asked in `subnetId` (price unknown, or over the cap), or undefined. */
  const refused = (market: Market, subnetId: string): string | undefined => {
    if (!options.priceOf) return undefined;
    const price = options.priceOf(market, subnetId);
    if (price === null)
      return `${market}: no ${market} price known for ${options.instanceType} in ${region}; not launched at an unknown price`;
    if (options.maxHourlyCost !== undefined && price > options.maxHourlyCost)
      return `${market}${market === "spot" ? ` in ${subnetId}` : ""}: $${price}/h is over maxHourlyCost $${options.maxHourlyCost}/h`;
    return undefined;
  };
  markets: for (const market of options.markets) {
    if (missing <= 0) break;
    for (const subnetId of zone !== undefined ? [zone] : options.subnetIds) {
      if (missing <= 0) break;
      if (zone !== undefined && subnetId !== zone) continue; // the nodes share the first one's zone
      const why = refused(market, subnetId);
      if (why !== undefined) {
        note(why);
        continue;
      }
      // A short answer (fewer than asked, no error) is asked again in the same subnet: the nodes stay
      // in one zone while it has room, and the next request says whether it still has any.
      while (missing > 0) {
        if (calls >= maxAttempts) {
          note(`gave up after ${calls} RunInstances calls (at most ${maxAttempts} per provision)`);
          break markets;
        }
        calls += 1;
        let items: readonly T[];
        try {
          items = await options.launch({ market, subnetId, count: missing });
        } catch (error) {
          if (isQuotaError(error)) {
            const quota = quotaError(error, { instanceType: options.instanceType, market, region });
            quotaErrors.push(quota);
            note(`${market}: ${quota.message}`);
            continue markets; // a regional quota: no other subnet of this market helps
          }
          if (!isCapacityError(error)) throw error;
          capacityErrors += 1;
          note(`${market} in ${subnetId}: ${awsErrorCode(error)}: ${(error as Error).message}`);
          break;
        }
        if (items.length === 0) break;
        launched.push({ market, subnetId, items });
        zone = subnetId;
        missing -= items.length;
      }
    }
  }
  if (launched.length === 0) {
    const [quota] = quotaErrors;
    if (quota && capacityErrors === 0) throw quota;
    throw new NoCapacityError({ attempts });
  }
  return launched;
}
