/**
 * AWS on the machine-provider base's market loop (`launchAcrossMarkets` of `@skyward/provider-utils`):
 * which (market, subnet) pairs may be asked is the base's price rule, zone by zone
 * (`launchableMarketsByZone`); the loop asks them in order, a whole batch a call (`RunInstances` with
 * `MinCount = count`), moving on when AWS has no capacity there, for a bounded number of calls. What
 * is AWS's own is here: its errors read by the base's taxonomy (`kindOfAwsError`), a quota named with
 * the Service Quotas entry to raise, and how each refusal reads.
 */
import { launchAcrossMarkets, type Market, type ZonalMarket } from "@skyward/provider-utils";
import { awsErrorCode, kindOfAwsError, PROVIDER_NAME, quotaError } from "./aws-api.js";

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
 * Launches up to `count` instances through the base's market loop: for each market in order, for each
 * subnet in order, asks for what is still missing (again in the same subnet after a short answer).
 *
 * - `launches` are the (market, subnet) pairs the base's price rule gave (`launchableMarketsByZone` of
 *   `@skyward/provider-utils`: the market's price in that zone known and within `maxHourlyCost`); one
 *   it refused is never asked, and its reason is listed in the `NoCapacityError`.
 * - Once an instance runs in a subnet, the rest go to that subnet only: a pool's nodes share a zone.
 * - A capacity error (kind `capacity`: `InsufficientInstanceCapacity`, `UnfulfillableCapacity`…) moves
 *   on to the next subnet, then the next market; a quota error (kind `quota`, regional) skips the
 *   market's other subnets; any other error is thrown at once (the caller's `launch` keeps track of
 *   what it created, to clean up).
 * - At most `maxAttempts` launches. When nothing at all could be launched, throws the quota's
 *   `ProvisionError` when every launch met a quota, else `NoCapacityError` listing every attempt.
 */
export async function runInstancesAcrossMarkets<T>(options: {
  readonly count: number;
  /** The markets in the allocation's order, each in every subnet in order (`zone`: the subnet id). */
  readonly launches: readonly ZonalMarket[];
  readonly instanceType: string;
  readonly region?: string;
  readonly maxAttempts?: number;
  readonly signal?: AbortSignal;
  readonly launch: (request: LaunchRequest) => Promise<readonly T[]>;
}): Promise<Launched<T>[]> {
  const region = options.region ?? "the region";
  const quota = (error: unknown, market: Market) =>
    quotaError(error, { instanceType: options.instanceType, market, region });
  const launched = await launchAcrossMarkets<T>({
    provider: PROVIDER_NAME,
    offer: options.instanceType,
    count: options.count,
    places: options.launches,
    signal: options.signal ?? new AbortController().signal,
    kindOf: kindOfAwsError,
    // A quota is the region's, not the subnet's: named without it.
    describeRefusal: (error, request, kind) =>
      kind === "quota"
        ? `${request.market}: ${quota(error, request.market).message}`
        : `${request.market} in ${request.zone}: ${awsErrorCode(error)}: ${(error as Error).message}`,
    quotaFailure: ([first]) => quota(first?.error, first?.request.market ?? "on-demand"),
    maxLaunches: options.maxAttempts ?? MAX_LAUNCH_ATTEMPTS,
    launchesName: "RunInstances calls",
    onFailure: "throw",
    launch: async ({ market, zone, count }) => ({
      items: await options.launch({ market, subnetId: zone, count }),
    }),
  });
  return launched.map(({ market, zone, items }) => ({ market, subnetId: zone, items }));
}
