/** How the CLI writes prices, durations, accelerators and instances for people and for `--json`. */
import type { Instance, Offer } from "@skyward/core/contract";

/** A price in USD per hour (`0.0350`, `2.190`), or `-` when there is none. */
export function formatPrice(price: number | null): string {
  if (price === null) return "-";
  return price < 0.1 ? price.toFixed(4) : price.toFixed(3);
}

/** A cost so far in USD (`7.50`, `0.0042` under a cent), or `-` when there is none. */
export function formatCost(cost: number | null): string {
  if (cost === null) return "-";
  return cost < 0.01 && cost > 0 ? cost.toFixed(4) : cost.toFixed(2);
}

/**
 * What an instance has cost so far, USD: its hourly price times its age (from its creation to `now`),
 * or null when its price is unknown. An estimate from the price Skyward recorded, not a bill.
 */
export function instanceCost(instance: Instance, now: number): number | null {
  if (instance.hourlyPrice === null) return null;
  return (instance.hourlyPrice * Math.max(0, now - instance.createdAt)) / 3_600_000;
}

/** A duration in milliseconds as its two largest units: `45s`, `12m`, `3h12m`, `2d4h`. */
export function formatAge(milliseconds: number): string {
  const seconds = Math.max(0, Math.floor(milliseconds / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours}h${minutes % 60 ? `${minutes % 60}m` : ""}`;
  const days = Math.floor(hours / 24);
  return `${days}d${hours % 24 ? `${hours % 24}h` : ""}`;
}

/**
 * An offer's accelerators: `8x A100 80GB`, `8x H100 SXM 80GB` (the offer's form factor), `H100 SXM? 80GB`
 * (a form factor asked for that the offer does not say, `unverifiedFormFactor`), or `-` for CPU-only.
 */
export function formatAccelerator(accelerator: Offer["accelerator"], unverifiedFormFactor?: string): string {
  if (!accelerator) return "-";
  const count = accelerator.count === 1 ? "" : `${accelerator.count}x `;
  const memory = accelerator.memoryGb > 0 ? ` ${accelerator.memoryGb}GB` : "";
  const formFactor =
    accelerator.formFactor !== undefined
      ? ` ${accelerator.formFactor}`
      : unverifiedFormFactor !== undefined
        ? ` ${unverifiedFormFactor}?`
        : "";
  return `${count}${accelerator.name}${formFactor}${memory}`;
}

/** A size in GB without needless decimals: `16 GB`, `0.5 GB`. */
export function formatGb(gigabytes: number): string {
  return `${Number.isInteger(gigabytes) ? gigabytes : gigabytes.toFixed(1)} GB`;
}

/** The pool an instance belongs to: its `skyward:pool` tag, else its cluster (`skyward:cluster`). */
export function poolOf(instance: Instance): string {
  return instance.tags["skyward:pool"] ?? instance.tags["skyward:cluster"] ?? "";
}

/**
 * An instance as `--json` prints it: with its provider, its estimated cost so far (`costSoFar`, USD,
 * null when its price is unknown), and without any private key.
 */
export function instanceForOutput(
  provider: string,
  instance: Instance,
  now: number = Date.now(),
): Record<string, unknown> {
  const { ssh, ...rest } = instance;
  let publicSsh: Record<string, unknown> | null = null;
  if (ssh) {
    const { privateKey: _secret, ...visible } = ssh;
    publicSsh = visible;
  }
  const cost = instanceCost(instance, now);
  return {
    provider,
    ...rest,
    ssh: publicSsh,
    costSoFar: cost === null ? null : Math.round(cost * 1e6) / 1e6,
  };
}

/** An `apache-arrow` Table (duck-typed: the CLI does not load apache-arrow, an optional peer of core's). */
function isArrowTable(item: unknown): item is { toArray(): { toJSON(): unknown }[] } {
  if (typeof item !== "object" || item === null) return false;
  const table = item as { schema?: unknown; batches?: unknown; toArray?: unknown; numRows?: unknown };
  return (
    typeof table.toArray === "function" &&
    typeof table.numRows === "number" &&
    Array.isArray(table.batches) &&
    typeof table.schema === "object"
  );
}

/** `JSON.rawJSON` (Node 21 and later; not in TypeScript's lib yet): a number's exact digits in JSON. */
const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/**
 * A task's value (or an outcome holding it) as JSON text: a `bigint` (a Python int past 2^53) as the
 * exact number, a typed array (Python bytes, an `NDArray`'s data, int64 ones included) as an array;
 * plain `JSON.stringify` throws on the first and writes the second as an object of indices. An Arrow
 * table (a DataFrame a task returned) is its rows, each an object of its columns.
 */
export function valueJson(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item === "bigint") return rawJson(item.toString());
    if (isArrowTable(item)) return item.toArray().map((row) => row.toJSON());
    if (ArrayBuffer.isView(item) && !(item instanceof DataView))
      return Array.from(item as unknown as ArrayLike<number | bigint>);
    return item;
  });
}
