/** `skyward offers`: every provider's offers for an accelerator, cheapest first. */
import { ConfigurationError } from "@skyward/core";
import {
  acceleratorFromName,
  type Offer,
  type OfferQuery,
  offerFormFactorFit,
  offerPrice,
} from "@skyward/core/contract";
import { type CommandContext, inAskedOrder, reportSkipped, useProviders } from "./command-context.js";
import { formatAccelerator, formatGb, formatPrice } from "./format.js";
import { describeError, type SkippedProvider } from "./providers.js";
import { renderTable } from "./table.js";
import { UsageError } from "./usage-error.js";

/** The flags of `skyward offers`, parsed. */
export interface OffersFlags {
  readonly accelerator: string | undefined;
  readonly providers: readonly string[] | undefined;
  readonly spot: boolean;
  readonly maxPrice: number | undefined;
  readonly region: string | undefined;
  readonly json: boolean;
}

/** The help text of `skyward offers`. */
export const OFFERS_HELP = `Usage: skyward offers [--accelerator NAME] [--provider A,B] [--spot] [--max-price USD] [--region R] [--json]

Lists the offers of every provider (or those given), cheapest first.

  --accelerator NAME   e.g. A100, "A100-80GB", H100:8 (a count per node); omit for CPU-only machines
  --provider A,B       providers to ask: [providers.NAME] entries of skyward.toml or aws, gcp, hyperstack, novita, runpod, tensordock, vastai, verda
  --spot               only offers with a spot price, ranked by it
  --max-price USD      only offers at or under this price per machine-hour
  --region R           the region to look in (default: each provider's own)
  --json               print the offers as JSON
  --timeout SECONDS    give up after this long (default 60)
`;

interface Row {
  readonly provider: string;
  readonly offer: Offer;
  readonly price: number;
}

/**
 * Whether the user wrote the memory (`A100-40GB`) rather than taking the catalog's default variant: only
 * a memory written out filters offers, so `--accelerator A100` lists the 40 GB and 80 GB ones alike.
 */
function namesMemory(text: string, memoryGb: number): boolean {
  return [...text.matchAll(/(\d+)\s*GB?\b/gi)].some((match) => Number(match[1]) === memoryGb);
}

function buildQuery(flags: OffersFlags): OfferQuery {
  let accelerator: OfferQuery["accelerator"] = null;
  if (flags.accelerator !== undefined) {
    try {
      const parsed = acceleratorFromName(flags.accelerator, "--accelerator");
      accelerator = {
        name: parsed.name,
        count: parsed.count,
        ...(parsed.memoryGb !== undefined && namesMemory(flags.accelerator, parsed.memoryGb)
          ? { memoryGb: parsed.memoryGb }
          : {}),
        ...(parsed.formFactor !== undefined ? { formFactor: parsed.formFactor } : {}),
      };
    } catch (error) {
      if (ConfigurationError.isInstance(error)) throw new UsageError(describeError(error));
      throw error;
    }
  }
  return {
    accelerator,
    allocation: flags.spot ? "spot" : "cheapest",
    ...(flags.region !== undefined ? { region: flags.region } : {}),
    ...(flags.maxPrice !== undefined ? { maxHourlyCost: flags.maxPrice } : {}),
  };
}

/** Whether an offer answers the query; providers filter themselves, this keeps a careless one honest. */
function matches(offer: Offer, query: OfferQuery, price: number | null): price is number {
  if (price === null) return false;
  if (query.maxHourlyCost !== undefined && price > query.maxHourlyCost) return false;
  if (query.accelerator === null) return offer.accelerator === null;
  const wanted = query.accelerator;
  return (
    offer.accelerator?.name === wanted.name &&
    offer.accelerator.count >= wanted.count &&
    (wanted.memoryGb === undefined || offer.accelerator.memoryGb >= wanted.memoryGb) &&
    offerFormFactorFit(offer, query) !== "differs"
  );
}

/** Runs `skyward offers`; resolves with the exit code. */
export async function offersCommand(context: CommandContext, flags: OffersFlags): Promise<number> {
  const query = buildQuery(flags);
  const { loaded, skipped, order } = await useProviders(context, flags.providers);
  const failed: SkippedProvider[] = [...skipped];
  const answers = await Promise.all(
    loaded.map(async ({ name, provider }) => {
      try {
        return { name, offers: await provider.offers({ query, signal: context.signal }) };
      } catch (error) {
        failed.push({ name, reason: describeError(error) });
        return { name, offers: [] as readonly Offer[] };
      }
    }),
  );
  reportSkipped(context, inAskedOrder(order, failed));
  const asked = answers.length - (failed.length - skipped.length);
  if (asked === 0) {
    context.err("skyward: no provider could be asked for offers\n");
    return 1;
  }
  const rows: Row[] = [];
  for (const { name, offers } of answers) {
    for (const offer of offers) {
      const price = offerPrice(offer, query.allocation);
      if (matches(offer, query, price)) rows.push({ provider: name, offer, price });
    }
  }
  rows.sort(
    (a, b) =>
      a.price - b.price ||
      a.provider.localeCompare(b.provider) ||
      a.offer.instanceType.localeCompare(b.offer.instanceType),
  );
  if (flags.json) {
    context.out(
      `${JSON.stringify(
        rows.map((row) => row.offer),
        null,
        2,
      )}\n`,
    );
    return 0;
  }
  if (rows.length === 0) {
    context.out("No offers match.\n");
    return 0;
  }
  const unlabelled = rows.filter((row) => offerFormFactorFit(row.offer, query) === "unknown").length;
  if (unlabelled > 0)
    context.err(
      `skyward: ${unlabelled} offer${unlabelled === 1 ? " does" : "s do"} not say ${unlabelled === 1 ? "its" : "their"} form factor (marked ${query.accelerator?.formFactor}?); listed, not checked\n`,
    );
  context.out(
    `${renderTable(
      [
        { header: "PROVIDER", cell: (row: Row) => row.provider },
        { header: "INSTANCE TYPE", cell: (row) => row.offer.instanceType },
        {
          header: "ACCELERATOR",
          cell: (row) =>
            formatAccelerator(
              row.offer.accelerator,
              offerFormFactorFit(row.offer, query) === "unknown" ? query.accelerator?.formFactor : undefined,
            ),
        },
        { header: "VCPUS", cell: (row) => String(row.offer.vcpus), align: "right" },
        { header: "MEMORY", cell: (row) => formatGb(row.offer.memoryGb), align: "right" },
        { header: "SPOT $/H", cell: (row) => formatPrice(row.offer.spotPrice), align: "right" },
        { header: "ON-DEMAND $/H", cell: (row) => formatPrice(row.offer.onDemandPrice), align: "right" },
        { header: "REGION", cell: (row) => row.offer.region },
      ],
      rows,
    )}\n`,
  );
  return 0;
}
