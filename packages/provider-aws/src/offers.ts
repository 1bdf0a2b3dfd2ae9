/**
 * From instance types and prices to Skyward offers: the hardware filter (`matchesHardware` of
 * `@skyward/provider-utils`), the latest spot price per type and zone (`DescribeSpotPriceHistory`),
 * and on-demand prices of the region from the Price List API (`pricing.ts`), the provider's
 * `onDemandPrices`, or — in us-east-1 only, when the Price List API cannot be read — the dated
 * built-in table.
 */
import { type _InstanceType, DescribeSpotPriceHistoryCommand, type EC2Client } from "@aws-sdk/client-ec2";
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { matchesHardware } from "@skyward/provider-utils";
import { awsCall, PROVIDER_NAME } from "./aws-api.js";
import type { InstanceType } from "./instance-types.js";
import { BUILT_IN_ON_DEMAND_PRICES, ON_DEMAND_PRICES_AS_OF } from "./on-demand-prices.js";
import type { RegionPrices } from "./pricing.js";

/** What {@link Offer.specific} holds for an AWS offer. */
export interface AwsOfferData {
  /** The zone with the lowest spot price, or null without spot prices. */
  readonly availabilityZone: string | null;
  /** The latest spot price in every zone that has one. */
  readonly spotPriceByZone: Readonly<Record<string, number>>;
  /**
   * Where the on-demand price comes from: the Price List API (`pricing-api`), the `onDemandPrices`
   * setting, the built-in us-east-1 table (only when the Price List API could not be read), or nowhere.
   */
  readonly onDemandPriceSource: "pricing-api" | "built-in" | "setting" | null;
  /** Why there is no on-demand price, when there is none. */
  readonly onDemandPriceMissing?: string;
  /** AWS's own name for the accelerator, when there is one. */
  readonly acceleratorAwsName?: string;
  /** The accelerator's maker as AWS says (`NVIDIA`…), when there is one. */
  readonly acceleratorManufacturer?: string;
}

/** The latest spot price of one type in one zone. */
export interface SpotPrice {
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly price: number;
  readonly timestamp: Date;
}

/**
 * True when an instance type has the hardware `query` asks for, and can be bought under its
 * allocation (a spot-capable type for `"spot"`, an on-demand one for `"on-demand"`). Disk is not a
 * filter: the root volume is sized to the spec.
 */
export function instanceTypeMatches(type: InstanceType, query: OfferQuery): boolean {
  if (query.allocation === "spot" && !type.spot) return false;
  if (query.allocation === "on-demand" && !type.onDemand) return false;
  return matchesHardware({ ...type, architecture: type.architectures }, query);
}

/** Keeps the latest price per type and zone from spot price history records. */
export function latestSpotPrices(records: readonly SpotPrice[]): Map<string, Map<string, SpotPrice>> {
  const byType = new Map<string, Map<string, SpotPrice>>();
  for (const record of records) {
    let zones = byType.get(record.instanceType);
    if (!zones) {
      zones = new Map();
      byType.set(record.instanceType, zones);
    }
    const known = zones.get(record.availabilityZone);
    if (!known || known.timestamp < record.timestamp) zones.set(record.availabilityZone, record);
  }
  return byType;
}

/** The current spot prices (Linux) of `instanceTypes`, asked in batches; latest per type and zone. */
export async function fetchSpotPrices(
  ec2: EC2Client,
  instanceTypes: readonly string[],
  signal: AbortSignal,
): Promise<Map<string, Map<string, SpotPrice>>> {
  const records: SpotPrice[] = [];
  const now = new Date();
  for (let start = 0; start < instanceTypes.length; start += 100) {
    const batch = instanceTypes.slice(start, start + 100);
    let nextToken: string | undefined;
    do {
      const page = await awsCall("DescribeSpotPriceHistory", signal, () =>
        ec2.send(
          new DescribeSpotPriceHistoryCommand({
            InstanceTypes: batch as _InstanceType[],
            ProductDescriptions: ["Linux/UNIX"],
            // A start time of now returns the price in force now, one record per type and zone.
            StartTime: now,
            MaxResults: 1000,
            NextToken: nextToken,
          }),
          { abortSignal: signal },
        ),
      );
      for (const entry of page.SpotPriceHistory ?? []) {
        const price = Number(entry.SpotPrice);
        if (!entry.InstanceType || !entry.AvailabilityZone || !Number.isFinite(price) || price <= 0) continue;
        if (entry.ProductDescription && !entry.ProductDescription.startsWith("Linux/UNIX")) continue;
        records.push({
          instanceType: entry.InstanceType,
          availabilityZone: entry.AvailabilityZone,
          price,
          timestamp: entry.Timestamp ?? now,
        });
      }
      nextToken = page.NextToken || undefined;
    } while (nextToken);
  }
  return latestSpotPrices(records);
}

/** Everything {@link buildOffer} needs besides the type. */
export interface OfferPrices {
  readonly region: string;
  /** Latest spot price per zone for this type; empty without spot. */
  readonly spotByZone: ReadonlyMap<string, SpotPrice>;
  /** The provider's `onDemandPrices` setting. */
  readonly onDemandOverrides: Readonly<Record<string, number>>;
  /** The region's prices from the Price List API, or why they could not be read. */
  readonly regional?: RegionPrices | { readonly error: string };
  /** When the spot prices were read. */
  readonly now: Date;
}

/** The on-demand price of a type and where it comes from (and how old it is). */
export function onDemandPriceOf(
  instanceType: string,
  overrides: Readonly<Record<string, number>>,
  regional?: OfferPrices["regional"],
  region = "us-east-1",
): {
  price: number | null;
  source: AwsOfferData["onDemandPriceSource"];
  asOf?: string;
  missing?: string;
} {
  const override = overrides[instanceType];
  if (override !== undefined) return { price: override, source: "setting" };
  if (regional !== undefined && !("error" in regional)) {
    const price = regional.prices[instanceType];
    return price !== undefined
      ? { price, source: "pricing-api", asOf: regional.fetchedAt.slice(0, 10) }
      : {
          price: null,
          source: null,
          missing: `the Price List API has no on-demand Linux price for ${instanceType} in ${region}`,
        };
  }
  // The built-in table holds us-east-1 list prices: never applied to another region.
  const builtIn = region === "us-east-1" ? BUILT_IN_ON_DEMAND_PRICES[instanceType] : undefined;
  if (builtIn !== undefined) return { price: builtIn, source: "built-in", asOf: ON_DEMAND_PRICES_AS_OF };
  const why =
    regional !== undefined && "error" in regional ? regional.error : "the Price List API was not asked";
  return {
    price: null,
    source: null,
    missing: `no on-demand price known for ${instanceType} in ${region} (${why}); set onDemandPrices or allow pricing:GetProducts`,
  };
}

/** One offer for an instance type in a region, priced. */
export function buildOffer(
  type: InstanceType,
  prices: OfferPrices,
  architecture?: OfferQuery["architecture"],
): Offer {
  let cheapest: SpotPrice | undefined;
  const spotPriceByZone: Record<string, number> = {};
  for (const [zone, spot] of prices.spotByZone) {
    spotPriceByZone[zone] = spot.price;
    if (!cheapest || spot.price < cheapest.price) cheapest = spot;
  }
  const onDemand = onDemandPriceOf(
    type.instanceType,
    prices.onDemandOverrides,
    prices.regional,
    prices.region,
  );
  // The offer is as old as its oldest price: the Price List API's or the table's date when one of them
  // supplied the on-demand price.
  const pricesAsOf = onDemand.asOf ?? prices.now.toISOString().slice(0, 10);
  const accelerator = type.accelerator;
  const specific: AwsOfferData = {
    availabilityZone: cheapest?.availabilityZone ?? null,
    spotPriceByZone: Object.freeze(spotPriceByZone),
    onDemandPriceSource: onDemand.source,
    ...(onDemand.missing !== undefined && type.onDemand ? { onDemandPriceMissing: onDemand.missing } : {}),
    ...(accelerator
      ? { acceleratorAwsName: accelerator.awsName, acceleratorManufacturer: accelerator.manufacturer }
      : {}),
  };
  return Object.freeze({
    id: `aws:${prices.region}:${type.instanceType}`,
    provider: PROVIDER_NAME,
    instanceType: type.instanceType,
    accelerator: accelerator
      ? Object.freeze({
          name: accelerator.name,
          count: accelerator.count,
          memoryGb: accelerator.memoryGb,
          ...(accelerator.formFactor === undefined ? {} : { formFactor: accelerator.formFactor }),
        })
      : null,
    vcpus: type.vcpus,
    memoryGb: type.memoryGb,
    architecture:
      architecture !== undefined && type.architectures.includes(architecture)
        ? architecture
        : (type.architectures[0] ?? "x86_64"),
    region: prices.region,
    spotPrice: type.spot && cheapest ? cheapest.price : null,
    onDemandPrice: type.onDemand ? onDemand.price : null,
    billingUnit: "second" as const,
    pricesAsOf,
    specific: Object.freeze(specific),
  });
}
