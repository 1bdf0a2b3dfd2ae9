/**
 * The settings every HTTP-API provider accepts (API key, injected `fetch`, retries, deadline), as a
 * TypeScript type to extend and a zod shape to spread into the provider's settings schema, plus the
 * schemas of the other settings providers share (environment variables, the keys directory).
 */
import { z } from "zod";
import type { FetchFunction } from "./provider-http.js";

/**
 * The HTTP settings of a provider, as users write them; every field optional. A provider's settings
 * interface extends it (documenting `apiKey` again with its own environment variable).
 */
export interface HttpSettings {
  /** The API key. Default: the provider's environment variable, read on the first API call. A secret: never logged. */
  apiKey?: string;
  /** The `fetch` to call the API with (tests, proxies). Default: axios's Node HTTP adapter. */
  fetch?: FetchFunction;
  /** Retries of a rate-limited (HTTP 429) or failed idempotent request. Default 4. */
  maxRetries?: number;
  /** Delay before the first retry, doubled for each next one, ms. Default 1000. */
  retryDelayMs?: number;
  /** Deadline of one HTTP request, ms. Default 30000. */
  requestTimeoutMs?: number;
}

/**
 * The zod schemas of {@link HttpSettings}, with their defaults (4 retries, 1000 ms, 30000 ms), to
 * spread into a provider's settings schema — `z.strictObject({ ...httpSettingsShape, region: … })`;
 * the parsed result fits `ProviderHttpSettings`, what `ProviderApi.createClient` takes.
 */
export const httpSettingsShape = {
  /** The API key. Default: the provider's environment variable, read on the first API call. A secret: never logged. */
  apiKey: z
    .string({ error: "expected the API key as a string" })
    .min(1, { message: "expected a non-empty API key" })
    .optional(),
  /** The `fetch` to call the API with (tests, proxies). Default: axios's Node HTTP adapter. */
  fetch: z
    .custom<FetchFunction>((value) => typeof value === "function", { message: "expected a fetch function" })
    .optional(),
  /** Retries of a rate-limited (HTTP 429) or failed idempotent request. Default 4. */
  maxRetries: z
    .number({ error: "expected the retry count as a whole number" })
    .int({ message: "expected the retry count as a whole number" })
    .min(0)
    .max(20)
    .default(4),
  /** Delay before the first retry, doubled for each next one, ms. Default 1000. */
  retryDelayMs: z.number({ error: "expected a delay in milliseconds" }).min(0).default(1000),
  /** Deadline of one HTTP request, ms. Default 30000. */
  requestTimeoutMs: z.number({ error: "expected a deadline in milliseconds" }).positive().default(30_000),
};

/** Environment variables for every node a provider creates (`env` settings): names as a shell accepts them. */
export const environmentVariablesSchema = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "expected an environment variable name" }),
  z.string(),
);

/** A `keysDirectory` setting: where a provider keeps its private keys; default {@link skywardKeysDirectory}. */
export const keysDirectorySchema = z.string().min(1, { message: "expected a directory" }).optional();
