/**
 * A marketplace's two markets, listed apart (on demand and spot, as `marketListings` reads them), paired
 * by what they list: each item once, with its listing in each market — absent where that market does not
 * list it — so that each market's price is read from its own listing. The on-demand order first, then the
 * items listed on spot alone, in theirs.
 */

/** One item's listing in each market; either may be absent. */
export interface PairedListing<Listing> {
  readonly onDemand: Listing | undefined;
  readonly spot: Listing | undefined;
}

/** The listings of both markets paired by `keyOf`; see the module comment. */
export function pairedListings<Listing>(
  listings: { readonly onDemand: readonly Listing[]; readonly spot: readonly Listing[] },
  keyOf: (listing: Listing) => unknown,
): PairedListing<Listing>[] {
  const spot = new Map(listings.spot.map((listing) => [keyOf(listing), listing]));
  const onDemand = new Set(listings.onDemand.map(keyOf));
  return [
    ...listings.onDemand.map((listing) => ({ onDemand: listing, spot: spot.get(keyOf(listing)) })),
    ...listings.spot
      .filter((listing) => !onDemand.has(keyOf(listing)))
      .map((listing) => ({ onDemand: undefined, spot: listing })),
  ];
}
