/**
 * One provider's API in one object: its name in messages, the environment variable of its key, its
 * error class, and the client, key lookup and answer parsing built from them — sending over axios,
 * through axios's Node adapter or an injected `fetch`.
 */
import axios from "axios";
import type { z } from "zod";
import {
  createProviderHttpClient,
  type ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderApiIdentity,
  type ProviderHttpClient,
  type ProviderHttpRequestFunction,
  type ProviderHttpSettings,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./provider-http.js";

/** What {@link defineProviderApi} is given. */
export interface ProviderApiDefinition extends ProviderApiIdentity {
  /** Makes the provider's own error (a {@link ProviderApiError} subclass) for a failed request or answer. */
  readonly createError: (options: ProviderApiErrorOptions) => ProviderApiError;
}

/** A provider's API, as {@link defineProviderApi} returns it. */
export interface ProviderApi extends ProviderApiDefinition {
  /**
   * The API key given in the settings, else the one in the environment variable, trimmed; else a
   * `ConfigurationError` at `apiKey` saying "set X_API_KEY or pass apiKey". Call it before creating
   * anything to fail early.
   */
  resolveApiKey(apiKey: string | undefined): string;
  /**
   * A client sending over axios (or `settings.fetch`) with the settings' retries and deadline; the key
   * is looked up on the first request, not before.
   */
  createClient(settings: ProviderHttpSettings): ProviderHttpClient;
  /** Parses an answer with `schema`, or throws the provider's error saying what was not understood. */
  parseAnswer<T extends z.ZodType>(schema: T, value: unknown, purpose: string): z.output<T>;
}

/** Sends one attempt with axios, whatever the status; through `fetch` when one is given. */
function axiosRequest(fetch: ProviderHttpSettings["fetch"]): ProviderHttpRequestFunction {
  return (attempt) =>
    axios.request({
      ...attempt,
      validateStatus: () => true,
      ...(fetch ? { adapter: "fetch", env: { fetch } } : {}),
    });
}

/**
 * Defines a provider's API once, so its client, key lookup and answer parsing share one name, one
 * environment variable and one error class.
 *
 * @example
 * ```ts
 * import { defineProviderApi, ProviderApiError } from "@skyward/provider-utils";
 *
 * const exampleApi = defineProviderApi({
 *   label: "Example",
 *   apiKeyVariable: "EXAMPLE_API_KEY",
 *   createError: (options) => new ProviderApiError({ ...options, provider: "example" }),
 * });
 * const http = exampleApi.createClient({ maxRetries: 4, retryDelayMs: 1000, requestTimeoutMs: 30_000 });
 * const { data } = await http.send({
 *   method: "GET",
 *   url: "https://api.example.com/v1/machines",
 *   idempotent: true,
 *   purpose: "listing machines",
 *   signal: AbortSignal.timeout(60_000),
 * });
 * ```
 */
export function defineProviderApi(definition: ProviderApiDefinition): ProviderApi {
  const identity = {
    label: definition.label,
    apiKeyVariable: definition.apiKeyVariable,
    ...(definition.apiKeyHeader ? { apiKeyHeader: definition.apiKeyHeader } : {}),
  };
  const resolveApiKey = (apiKey: string | undefined) => resolveProviderApiKey(apiKey, identity);
  return Object.freeze({
    ...identity,
    createError: definition.createError,
    resolveApiKey,
    createClient: (settings: ProviderHttpSettings) =>
      createProviderHttpClient({
        ...identity,
        apiKey: () => resolveApiKey(settings.apiKey),
        request: axiosRequest(settings.fetch),
        createError: definition.createError,
        maxRetries: settings.maxRetries,
        retryDelayMs: settings.retryDelayMs,
        timeoutMs: settings.requestTimeoutMs,
      }),
    parseAnswer: <T extends z.ZodType>(schema: T, value: unknown, purpose: string): z.output<T> =>
      parseProviderAnswer(schema, value, purpose, definition),
  });
}
