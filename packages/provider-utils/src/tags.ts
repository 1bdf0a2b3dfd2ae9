/**
 * Skyward's tags: the keys it puts on what it creates at a provider (as tags, labels, or environment
 * variables of a container), so instances are found again (`listInstances`, `skyward down`) and a
 * cluster can be rebuilt from an instance (`clusterFromInstance` of `@skyward/core/contract`).
 */
import { randomBytes } from "node:crypto";
import { hostname, userInfo } from "node:os";

/** The tag keys Skyward uses. Instances carry at least `cluster`; `clusterFromInstance` reads `cluster`, `pool` and `region`. */
export const SKYWARD_TAGS = Object.freeze({
  /** The cluster (`Cluster.id`) the resource belongs to. */
  cluster: "skyward:cluster",
  /** The pool (`Cluster.poolId`). */
  pool: "skyward:pool",
  /** The region the cluster is in. */
  region: "skyward:region",
  /** Who created it: `user@host` ({@link ownerTag}). */
  owner: "skyward:owner",
  /** The offer (`Offer.id`) an instance was created from. */
  offer: "skyward:offer",
  /** What an instance costs, USD per hour, as a decimal string. */
  hourlyPrice: "skyward:hourly-price",
  /** `"1"` on a spot instance, where the provider does not say. */
  spot: "skyward:spot",
} as const);

/** What {@link skywardTags} is given; fields left out (or empty) are not tagged. */
export interface SkywardTagValues {
  /** The cluster id. */
  readonly cluster: string;
  /** The pool id. */
  readonly pool?: string;
  /** The region. */
  readonly region?: string;
  /** Who created it; see {@link ownerTag}. */
  readonly owner?: string;
  /** The offer id. */
  readonly offer?: string;
  /** The hourly price, USD. */
  readonly hourlyPrice?: number | null;
  /** Whether it is a spot instance. */
  readonly spot?: boolean;
}

/**
 * Skyward's tags for a resource, by their keys in {@link SKYWARD_TAGS}.
 *
 * @example
 * ```ts
 * import { skywardTags } from "@skyward/provider-utils";
 *
 * skywardTags({ cluster: "skyward-1a2b3c4d", pool: "train", offer: "example:a100" });
 * // { "skyward:cluster": "skyward-1a2b3c4d", "skyward:pool": "train", "skyward:offer": "example:a100" }
 * ```
 */
export function skywardTags(values: SkywardTagValues): Record<string, string> {
  const tags: Record<string, string> = { [SKYWARD_TAGS.cluster]: values.cluster };
  if (values.pool) tags[SKYWARD_TAGS.pool] = values.pool;
  if (values.region) tags[SKYWARD_TAGS.region] = values.region;
  if (values.owner) tags[SKYWARD_TAGS.owner] = values.owner;
  if (values.offer) tags[SKYWARD_TAGS.offer] = values.offer;
  if (values.hourlyPrice !== undefined && values.hourlyPrice !== null)
    tags[SKYWARD_TAGS.hourlyPrice] = String(values.hourlyPrice);
  if (values.spot !== undefined) tags[SKYWARD_TAGS.spot] = values.spot ? "1" : "0";
  return tags;
}

/** The pool a tagged resource belongs to: its `skyward:pool` tag, else its cluster id, else `""`. */
export function poolIdFromTags(tags: Readonly<Record<string, string>>): string {
  return tags[SKYWARD_TAGS.pool] || tags[SKYWARD_TAGS.cluster] || "";
}

/** The hourly price a `skyward:hourly-price` tag holds, or null when it is absent or not a number. */
export function hourlyPriceFromTags(tags: Readonly<Record<string, string>>): number | null {
  const text = tags[SKYWARD_TAGS.hourlyPrice];
  const price = text === undefined || text.trim() === "" ? Number.NaN : Number(text);
  return Number.isFinite(price) ? price : null;
}

/** Who is creating resources, for the `skyward:owner` tag: `user@host`. */
export function ownerTag(): string {
  let user = process.env.USER ?? "unknown";
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (some containers): keep $USER.
  }
  return `${user}@${hostname()}`;
}

/** A new cluster id: `<prefix>-` and 8 random hex digits (`skyward-1a2b3c4d`). */
export function createClusterId(prefix = "skyward"): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** The environment variable a tag is carried in on providers without tags (`skyward:pool` → `SKYWARD_POOL`). */
function tagVariable(key: string): string {
  return key.replace(/[^A-Za-z0-9]+/g, "_").toUpperCase();
}

/**
 * Skyward's tags as environment variables, for providers that label a container by its environment
 * (`skyward:cluster` → `SKYWARD_CLUSTER`, `skyward:hourly-price` → `SKYWARD_HOURLY_PRICE`); read back
 * with {@link skywardTagsFromEnvironment}.
 */
export function skywardTagsToEnvironment(tags: Readonly<Record<string, string>>): Record<string, string> {
  const skyward = new Set<string>(Object.values(SKYWARD_TAGS));
  return Object.fromEntries(
    Object.entries(tags)
      .filter(([key]) => skyward.has(key))
      .map(([key, value]) => [tagVariable(key), value]),
  );
}

/** Skyward's tags read back from a container's environment written by {@link skywardTagsToEnvironment}. */
export function skywardTagsFromEnvironment(env: Readonly<Record<string, string>>): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const key of Object.values(SKYWARD_TAGS)) {
    const value = env[tagVariable(key)];
    if (value !== undefined && value !== "") tags[key] = value;
  }
  return tags;
}
