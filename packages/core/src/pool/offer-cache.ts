/**
 * Offers cached on disk under `~/.skyward/offers/`, so that pools and the CLI do not ask a provider's
 * API again for every pool: an hour for marketplaces (whose prices move), a day for catalogues.
 * Providers say which they are with `capabilities.offerCache`; without it nothing is cached.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { skywardHome } from "../config/home.js";
import type { Offer, OfferQuery, Provider, ProviderCallOptions } from "../contract/provider.js";

/** How long cached offers stay fresh, by kind of provider. */
export const OFFER_CACHE_SECONDS = Object.freeze({ marketplace: 3600, catalogue: 86_400 });

interface CachedOffers {
  readonly storedAt: number;
  readonly offers: readonly Offer[];
}

function cacheFile(provider: Provider, query: OfferQuery): string {
  const key = createHash("sha256")
    .update(JSON.stringify([provider.name, provider.cacheKey ?? "", query]))
    .digest("hex")
    .slice(0, 32);
  return join(skywardHome(), "offers", `${provider.name}-${key}.json`);
}

/**
 * The provider's offers for `query`, from the disk cache when fresh, else asked for and stored —
 * as pools and `skyward offers` get them. A cache that cannot be read or written is ignored: the
 * provider is asked. Exported for providers' tests: two providers whose settings give different
 * offers must not share cached ones (their `cacheKey` differs).
 */
export async function cachedOffers(
  provider: Provider,
  query: OfferQuery,
  options: ProviderCallOptions,
  now: number = Date.now(),
): Promise<readonly Offer[]> {
  const kind = provider.capabilities.offerCache;
  if (kind !== "marketplace" && kind !== "catalogue") return provider.offers({ ...options, query });
  const file = cacheFile(provider, query);
  try {
    const cached = JSON.parse(await readFile(file, "utf8")) as CachedOffers;
    if (now - cached.storedAt < OFFER_CACHE_SECONDS[kind] * 1000 && Array.isArray(cached.offers))
      return cached.offers;
  } catch {
    // no cache yet, or unreadable: ask the provider
  }
  const offers = await provider.offers({ ...options, query });
  try {
    await mkdir(join(skywardHome(), "offers"), { recursive: true });
    const temporary = `${file}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify({ storedAt: now, offers } satisfies CachedOffers));
    await rename(temporary, file);
  } catch {
    // a read-only home: work without the cache
  }
  return offers;
}
