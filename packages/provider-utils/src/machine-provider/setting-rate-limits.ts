/**
 * Documented rate limits a user may change: a `rateLimits` setting of `{requests, perSeconds}` per
 * named call (for an API in front of the provider's, or a test's fake) laid over the documented ones,
 * and the create pacing written as settings in milliseconds (the least interval between two creates,
 * and how long the API refuses after one came too early).
 */
import { z } from "zod";
import type { DocumentedRateLimit, MachineEndpoint, MachineRateLimits } from "./pacing.js";

/** The `rateLimits` setting: `{requests, perSeconds}` for any of `names`, each checked. Default `{}`. */
export function rateLimitsField<const Name extends string>(names: readonly [Name, ...Name[]]) {
  const limit = z.strictObject({
    requests: z.number().int().min(1, { message: "expected at least one request" }),
    perSeconds: z.number().positive({ message: "expected seconds > 0" }),
  });
  return z.partialRecord(z.enum(names), limit).default({});
}

/** What {@link settingRateLimits} lays over the documented limits. */
export interface RateLimitSettings<Name extends string> {
  /** The `rateLimits` setting, by the settings' names of the calls. */
  readonly rateLimits: Partial<Readonly<Record<Name, { requests: number; perSeconds: number }>>>;
  /** The least time between two creates, ms. */
  readonly createIntervalMs: number;
  /** How long creates are refused after one came too early, ms. */
  readonly rateLimitPenaltyMs: number;
}

/**
 * The limits to pace by: each documented endpoint limit with the setting of its name (`names`: endpoint
 * → setting name) laid over it, and one create per `createIntervalMs` held back `rateLimitPenaltyMs`
 * after a refusal, as documented at `source`.
 */
export function settingRateLimits<Name extends string>(
  documented: Partial<Readonly<Record<MachineEndpoint, DocumentedRateLimit>>>,
  names: Partial<Readonly<Record<MachineEndpoint, Name>>>,
  settings: RateLimitSettings<Name>,
  source: string,
): MachineRateLimits {
  const endpoints: Partial<Record<MachineEndpoint, DocumentedRateLimit>> = { ...documented };
  for (const [endpoint, name] of Object.entries(names) as [MachineEndpoint, Name][])
    endpoints[endpoint] = {
      source,
      ...documented[endpoint],
      ...settings.rateLimits[name],
    } as DocumentedRateLimit;
  const create = {
    requests: 1,
    perSeconds: settings.createIntervalMs / 1000,
    penaltySeconds: settings.rateLimitPenaltyMs / 1000,
    source,
  };
  return { endpoints: { ...endpoints, create } };
}
