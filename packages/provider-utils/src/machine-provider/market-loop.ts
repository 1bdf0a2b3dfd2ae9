/**
 * The market loop, written once for every machine provider: the markets the pool's allocation asks,
 * each in every zone it may launch in, asked in order until enough machines are made. The places come
 * from the base's price rule ({@link launchableMarketsByZone}: each market at its own price in that
 * zone, within `maxHourlyCost`, never at an unknown price); what a launch is, is the provider's. A
 * launch may make several machines in one call — EC2's `RunInstances` with `MinCount`/`MaxCount`, a
 * burst of Compute Engine inserts — or one (a marketplace's create, {@link provisionAcrossMarkets}).
 * Refusals are read through the base's error taxonomy ({@link MachineErrorKind}): capacity and price
 * move on to the next zone, then the next market; a quota (an account's limit, not a zone's) skips the
 * market's other zones; any other error stops the loop.
 */
import { NoCapacityError, type ProvisionAttempt } from "@skyward/core/contract";
import type { Market } from "../offers/prices.js";
import { type MachineErrorKind, machineErrorKind } from "./errors.js";
import type { ZonalMarket } from "./zonal-markets.js";

/** One launch the loop asks for: a market in a zone, for up to `count` machines. */
export interface MarketLaunch {
  readonly market: Market;
  readonly spot: boolean;
  /** The zone, as the places name it (an EC2 subnet); "" for a provider without zones. */
  readonly zone: string;
  /** The market's hourly price in this zone, already checked against `maxHourlyCost`. */
  readonly price: number;
  /** The machines still missing: the most this launch may make. */
  readonly count: number;
}

/** What one launch made. */
export interface MarketLaunchAnswer<T> {
  /** The machines made: all asked, fewer (partial capacity), or none. */
  readonly items: readonly T[];
  /**
   * Why the rest were not made (an error of kind capacity, quota or price, or a plain `Error` whose
   * message says why): the loop moves on from this zone as for a refusal thrown. Absent, a short
   * answer is asked again in the same zone, and an empty one moves on to the next zone.
   */
  readonly refused?: unknown;
}

/** Machines made by one launch, with the market and zone they run in. */
export interface MarketLaunched<T> {
  readonly market: Market;
  readonly zone: string;
  readonly items: readonly T[];
}

/** A refusal the loop met: the error and the launch it answered. */
export interface MarketRefusal {
  readonly error: unknown;
  readonly request: MarketLaunch;
}

/** What {@link launchAcrossMarkets} needs. */
export interface MarketLoopOptions<T> {
  /** The provider's name, for the {@link NoCapacityError}'s attempts. */
  readonly provider: string;
  /** What was launched (the offer's instance type), for the same. */
  readonly offer: string;
  /** How many machines to make. */
  readonly count: number;
  /** The markets in the allocation's order, each in every zone in order (`launchableMarketsByZone`); a refused place is never launched, its reason is listed. */
  readonly places: readonly ZonalMarket[];
  /** Launches up to `request.count` machines; throws the API's error when refused. */
  readonly launch: (request: MarketLaunch) => Promise<MarketLaunchAnswer<T>>;
  readonly signal: AbortSignal;
  /** The kind of a launch's error; default {@link machineErrorKind} (an SDK's errors have their own). */
  readonly kindOf?: (error: unknown) => MachineErrorKind | undefined;
  /** The line a refusal adds to the {@link NoCapacityError}; default `market[ in zone]: message`. */
  readonly describeRefusal?: (
    error: unknown,
    request: MarketLaunch,
    kind: MachineErrorKind | undefined,
  ) => string;
  /**
   * The error to throw when nothing was made and every launch asked met a quota (only a quota increase
   * helps, not another offer); absent, a {@link NoCapacityError} as for capacity.
   */
  readonly quotaFailure?: (refusals: readonly MarketRefusal[]) => Error;
  /** The most launches of one call; default no bound. */
  readonly maxLaunches?: number;
  /** What a launch is called in the reason given when `maxLaunches` is reached (`"RunInstances calls"`). */
  readonly launchesName?: string;
  /**
   * After an error that is no refusal: `"hand-back"` returns the machines already made (the pool asks
   * again), throwing only when there are none; `"throw"` throws it (the caller removes what was made).
   * Default `"hand-back"`.
   */
  readonly onFailure?: "hand-back" | "throw";
}

/** The refusals that move on to another zone or market. */
const REFUSALS = new Set<MachineErrorKind | undefined>(["capacity", "quota", "price"]);

/** True for an error kind the loop moves on from (capacity, quota, price); any other stops it. */
export function isMarketRefusal(kind: MachineErrorKind | undefined): boolean {
  return REFUSALS.has(kind);
}

/** `spot`, or `spot in subnet-a`: where a launch was asked. */
const placeOf = (request: Pick<MarketLaunch, "market" | "zone">) =>
  request.zone === "" ? request.market : `${request.market} in ${request.zone}`;

function defaultRefusal(error: unknown, request: MarketLaunch): string {
  return `${placeOf(request)}: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * Makes up to `count` machines across `places`: for each market in order, for each zone in order, asks
 * for what is still missing — again in the same zone after a short answer. Once a machine is made in a
 * zone, the rest go to that zone only: a pool's nodes share one. Resolves with what each launch made
 * (fewer than `count` when the places ran out); with nothing made, throws `quotaFailure`'s error when
 * every launch met a quota, else a {@link NoCapacityError} naming every place tried and why.
 */
export async function launchAcrossMarkets<T>(options: MarketLoopOptions<T>): Promise<MarketLaunched<T>[]> {
  const kindOf = options.kindOf ?? machineErrorKind;
  const describe = options.describeRefusal ?? defaultRefusal;
  const maxLaunches = options.maxLaunches ?? Number.POSITIVE_INFINITY;
  const launched: MarketLaunched<T>[] = [];
  const attempts: ProvisionAttempt[] = [];
  const quotas: MarketRefusal[] = [];
  let otherRefusals = 0;
  let launches = 0;
  let missing = options.count;
  let zone: string | undefined;
  const note = (reason: string) => {
    if (!attempts.some((attempt) => attempt.reason === reason))
      attempts.push({ provider: options.provider, offer: options.offer, reason });
  };
  /** Records a refusal; true when it is a quota (the market's other zones are skipped). */
  const refusal = (error: unknown, request: MarketLaunch): boolean => {
    const kind = kindOf(error);
    note(describe(error, request, kind));
    if (kind === "quota") quotas.push({ error, request });
    else otherRefusals += 1;
    return kind === "quota";
  };
  // What the price rule left out comes first: the places never asked, then what the asked ones said.
  for (const place of options.places)
    if (place.refused !== undefined || place.price === null)
      note(place.refused ?? `${place.market}: no known price, never launched`);
  const marketOrder = [...new Set(options.places.map((place) => place.market))];
  markets: for (const market of marketOrder) {
    for (const place of options.places.filter((entry) => entry.market === market)) {
      if (missing <= 0) break markets;
      if (zone !== undefined && place.zone !== zone) continue;
      if (place.refused !== undefined || place.price === null) continue;
      while (missing > 0) {
        if (launches >= maxLaunches) {
          note(
            `gave up after ${launches} ${options.launchesName ?? "launches"} (at most ${maxLaunches} per provision)`,
          );
          break markets;
        }
        launches += 1;
        const request: MarketLaunch = {
          market,
          spot: market === "spot",
          zone: place.zone,
          price: place.price,
          count: missing,
        };
        let answer: MarketLaunchAnswer<T>;
        try {
          answer = await options.launch(request);
        } catch (error) {
          options.signal.throwIfAborted();
          const kind = kindOf(error);
          if (isMarketRefusal(kind)) {
            if (refusal(error, request)) continue markets;
            break;
          }
          if (options.onFailure !== "throw" && launched.length > 0) break markets;
          throw error;
        }
        if (answer.items.length > 0) {
          launched.push({ market, zone: place.zone, items: answer.items });
          zone = place.zone;
          missing -= answer.items.length;
        }
        if (answer.refused !== undefined) {
          if (refusal(answer.refused, request)) continue markets;
          break;
        }
        if (answer.items.length === 0) {
          note(`${placeOf(request)}: the launch made no machine`);
          break;
        }
      }
    }
  }
  if (launched.length === 0) {
    if (options.quotaFailure && quotas.length > 0 && otherRefusals === 0) throw options.quotaFailure(quotas);
    throw new NoCapacityError({
      attempts:
        attempts.length > 0
          ? attempts
          : [{ provider: options.provider, offer: options.offer, reason: "no market to launch on" }],
    });
  }
  return launched;
}
