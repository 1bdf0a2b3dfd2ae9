/**
 * From instance types and prices to Skyward offers: the hardware filter (`matchesHardware` of
 * `@skyward/provider-utils`), the latest spot price per type and zone (`DescribeSpotPriceHistory`),
 * and on-demand prices from the built-in table (or the provider's `onDemandPrices`).
 */
import { type _InstanceType, DescribeSpotPriceHistoryCommand, type EC2Client } from "@aws-sdk/client-ec2";
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { matchesHardware } from "@skyward/provider-utils";
import { awsCall, PROVIDER_NAME } from "./aws-api.js";
import type { InstanceType } from "./instance-types.js";
import { BUILT_IN_ON_DEMAND_PRICES, ON_DEMAND_PRICES_AS_OF } from "./on-demand-prices.js";

/** What {@link Offer.specific} holds for an AWS offer. */
export interface AwsOfferData {
  /** The zone with the lowest spot price, or null without spot prices. */
  readonly availabilityZone: string | null;
  /** The latest spot price in every zone that has one. */
  readonly spotPriceByZone: Readonly<Record<string, number>>;
  /** Where the on-demand price comes from: the built-in table, the `onDemandPrices` setting, or nowhere. */
  readonly onDemandPriceSource: "built-in" | "setting" | null;
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
  /** When the spot prices were read. */
  readonly now: Date;
}

/** The on-demand price of a type and where it comes from. */
export function onDemandPriceOf(
  instanceType: string,
  overrides: Readonly<Record<string, number>>,
): { price: number | null; source: AwsOfferData["onDemandPriceSource"] } {
  const override = overrides[instanceType];
  if (override !== undefined) return { price: override, source: "setting" };
  const builtIn = BUILT_IN_ON_DEMAND_PRICES[instanceType];
  return builtIn !== undefined ? { price: builtIn, source: "built-in" } : { price: null, source: null };
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
  const onDemand = onDemandPriceOf(type.instanceType, prices.onDemandOverrides);
  // The offer is as old as its oldest price: the table's date when it supplied the on-demand price.
  const pricesAsOf =
    onDemand.source === "built-in" ? ON_DEMAND_PRICES_AS_OF : prices.now.toISOString().slice(0, 10);
  const accelerator = type.accelerator;
  const specific: AwsOfferData = {
    availabilityZone: cheapest?.availabilityZone ?? null,
    spotPriceByZone: Object.freeze(spotPriceByZone),
    onDemandPriceSource: onDemand.source,
    ...(accelerator
      ? { acceleratorAwsName: accelerator.awsName, acceleratorManufacturer: accelerator.manufacturer }
      : {}),
  };
  return Object.freeze({
    id: `aws:${prices.region}:${type.instanceType}`,
    provider: PROVIDER_NAME,
    instanceType: type.instanceType,
    accelerator: accelerator
      ? Object.freeze({ name: accelerator.name, count: accelerator.count, memoryGb: accelerator.memoryGb })
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
