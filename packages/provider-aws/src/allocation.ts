/**
 * How the markets an allocation strategy asks (`marketsFor` of `@skyward/provider-utils`) become
 * launches: the loop that asks each market in each subnet (zone) until enough instances are running,
 * moving on when AWS has no capacity there — in one zone, for a bounded number of calls. Which
 * (market, zone) pairs may be asked at all is the machine-provider base's price rule, per zone
 * (`launchableMarketsByZone`); the loop stays AWS's own because EC2 launches a whole batch in one
 * zone (`MinCount = count`) and tells capacity, quota and zone apart in ways the base's one-machine
 * loop (`provisionAcrossMarkets`) does not.
 */
import { NoCapacityError, type ProvisionAttempt, type ProvisionError } from "@skyward/core/contract";
import type { Market, ZonalMarket } from "@skyward/provider-utils";
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
 * - `launches` are the (market, subnet) pairs the base's price rule gave (`launchableMarketsByZone` of
 *   `@skyward/provider-utils`: the market's price in that zone known and within `maxHourlyCost`); one
 *   it refused is never asked, and its reason is listed in the `NoCapacityError`.
 * - Once an instance runs in a subnet, the rest go to that subnet only: a pool's nodes share a zone.
 * - A capacity error (see `isCapacityError`) moves on to the next subnet, then the next market; a
 *   quota error (`isQuotaError`, regional) skips the market's other subnets; any other error is
 *   thrown at once (the caller's `launch` keeps track of what it created, to clean up).
 * - At most `maxAttempts` launches. When nothing at all could be launched, throws the quota's
 *   `ProvisionError` when every market met a quota, else `NoCapacityError` listing every attempt.
 */
export async function launchAcrossMarkets<T>(options: {
  readonly count: number;
  /** The markets in the allocation's order, each in every subnet in order (`zone`: the subnet id). */
  readonly launches: readonly ZonalMarket[];
  readonly instanceType: string;
  readonly region?: string;
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
  const marketOrder = [...new Set(options.launches.map((entry) => entry.market))];
  markets: for (const market of marketOrder) {
    if (missing <= 0) break;
    for (const { zone: subnetId, refused } of options.launches.filter((entry) => entry.market === market)) {
      if (missing <= 0) break;
      if (zone !== undefined && subnetId !== zone) continue; // the nodes share the first one's zone
      if (refused !== undefined) {
        note(refused);
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
