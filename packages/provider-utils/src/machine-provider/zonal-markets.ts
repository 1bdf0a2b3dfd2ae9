/**
 * The base's market rule: which market an offer may be launched on, at its own price, known and within
 * `maxHourlyCost` ({@link launchableMarkets}); and the same zone by zone for a cloud whose prices differ
 * by zone (EC2's spot price is set per Availability Zone, {@link launchableMarketsByZone}), so that a
 * launch in a zone whose spot price is over the cap is never asked even when the offer's cheapest zone
 * is within it. The market loop (`market-loop.ts`) launches on the places listed here, and lists the
 * reason for each one refused.
 */
import type { Cluster, Offer } from "@skyward/core/contract";
import { type Market, marketsFor } from "../offers/prices.js";

/** A market an offer may be launched on, at its price in the offer. */
export interface LaunchableMarket {
  readonly market: Market;
  readonly spot: boolean;
  readonly price: number;
}

/**
 * The markets a cluster's offer may be launched on, in the allocation's order ({@link marketsFor}):
 * each with a known price within `maxHourlyCost` — the price of that very market, not the cheaper one
 * the pool ranked the offer by. `refused` says why each other market was left out. For providers not
 * on the base (AWS, GCP), the same rule.
 */
export function launchableMarkets(
  cluster: Pick<Cluster, "spec" | "offer">,
  spotAllowed: boolean,
): { launchable: LaunchableMarket[]; refused: string[] } {
  const cap = cluster.spec.maxHourlyCost;
  const launchable: LaunchableMarket[] = [];
  const refused: string[] = [];
  for (const market of marketsFor(cluster.spec.allocation, cluster.offer)) {
    const spot = market === "spot";
    const price = spot ? cluster.offer.spotPrice : cluster.offer.onDemandPrice;
    if (spot && !spotAllowed) refused.push("spot: not allowed for this pool");
    else if (price === null) refused.push(`${market}: no known price, never launched`);
    else if (cap !== undefined && price > cap)
      refused.push(`${market}: $${price}/h is over maxHourlyCost $${cap}/h`);
    else launchable.push({ market, spot, price });
  }
  return { launchable, refused };
}

/** One market in one zone: its price there, or why the base's rule leaves it out. */
export interface ZonalMarket {
  readonly market: Market;
  /** The zone (or whatever the provider launches into by zone: an EC2 subnet). */
  readonly zone: string;
  /** The hourly price of one machine of this market in this zone, or null when unknown. */
  readonly price: number | null;
  /** Why the market is not launched in this zone (unknown price, over the cap, spot not allowed); undefined when it may be. */
  readonly refused?: string;
}

/**
 * Every market the pool's allocation asks, in its order ({@link marketsFor}), each in every zone of
 * `zones` in the order given: the zone's own prices (`pricesIn`; a price it leaves out is the offer's)
 * judged by {@link launchableMarkets} — known, and within `maxHourlyCost` on the market launched. A
 * market with no known price is listed too, refused with that reason, so that the error a pool ends
 * with says why it was not tried. A refusal names its zone where the zone had a price of its own.
 */
export function launchableMarketsByZone(
  cluster: Pick<Cluster, "spec" | "offer">,
  zones: readonly string[],
  pricesIn: (zone: string) => Partial<Pick<Offer, "spotPrice" | "onDemandPrice">>,
  spotAllowed = true,
): ZonalMarket[] {
  const { offer, spec } = cluster;
  // Listed even at an unknown on-demand price: refused below with its reason, never launched.
  const markets = marketsFor(spec.allocation, {
    spotPrice: offer.spotPrice,
    onDemandPrice: offer.onDemandPrice ?? Number.POSITIVE_INFINITY,
  });
  const judged = zones.map((zone) => {
    const own = pricesIn(zone);
    const here = { ...offer, ...own };
    return { zone, own, here, ...launchableMarkets({ spec, offer: here }, spotAllowed) };
  });
  return markets.flatMap((market) =>
    judged.map(({ zone, own, here, launchable, refused }): ZonalMarket => {
      const price = (market === "spot" ? here.spotPrice : here.onDemandPrice) ?? null;
      if (launchable.some((entry) => entry.market === market)) return { market, zone, price };
      const reason =
        refused.find((text) => text.startsWith(`${market}:`)) ?? `${market}: no known price, never launched`;
      const zonal = (market === "spot" ? own.spotPrice : own.onDemandPrice) !== undefined;
      return {
        market,
        zone,
        price,
        refused: zonal ? `${market} in ${zone}${reason.slice(market.length)}` : reason,
      };
    }),
  );
}
