/**
 * Readable durations. Like the reference's `sky.time`, each helper returns a number of SECONDS, the
 * unit every Skyward timeout and TTL is given in: `ttl: sky.time.minutes(10)`.
 */

function checked(value: number, unit: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`sky.time.${unit}: expected a finite number >= 0, received ${String(value)}`);
  }
  return value;
}

/** `n` milliseconds, in seconds. */
export function milliseconds(n: number): number {
  return checked(n, "milliseconds") / 1000;
}

/** `n` seconds (the identity; for symmetry). */
export function seconds(n: number): number {
  return checked(n, "seconds");
}

/** `n` minutes, in seconds. */
export function minutes(n: number): number {
  return checked(n, "minutes") * 60;
}

/** `n` hours, in seconds. */
export function hours(n: number): number {
  return checked(n, "hours") * 3600;
}

/** `n` days, in seconds. */
export function days(n: number): number {
  return checked(n, "days") * 86_400;
}

/** The duration helpers as one namespace: `sky.time.minutes(10)`. */
export const time = { milliseconds, seconds, minutes, hours, days } as const;
