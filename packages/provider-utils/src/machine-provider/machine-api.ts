/**
 * A machine-renting provider's API defined once: its error class (a {@link MachineProviderError} named
 * after the provider), its classifier, its key lookup and a typed JSON client paced by its documented
 * rate limits. What the providers on the base used to write each — an `XApiError` subclass, a
 * `defineProviderApi` call, and seven lines of `http.send({...})` around every request — is here.
 *
 * @example
 * ```ts
 * import { defineMachineApi } from "@skyward/provider-utils";
 *
 * const exampleApi = defineMachineApi({
 *   provider: "example",
 *   errorName: "ExampleApiError",
 *   label: "Example",
 *   apiKeyVariable: "EXAMPLE_API_KEY",
 *   classify: ({ message }) => (/sold out/i.test(message) ? "capacity" : undefined),
 * });
 * // Each call names its endpoint (paced by its documented limit) and parses the answer with a zod schema.
 * const client = exampleApi.jsonClient({
 *   apiUrl: "https://api.example.com/v1",
 *   maxRetries: 4,
 *   retryDelayMs: 1000,
 *   requestTimeoutMs: 30_000,
 * });
 * ```
 */
import type { z } from "zod";
import { type JsonCall, type JsonSend, jsonCalls } from "../http/json-calls.js";
import { defineProviderApi, type ProviderApi } from "../http/provider-api.js";
import type {
  ProviderApiErrorOptions,
  ProviderApiIdentity,
  ProviderHttpRequest,
  ProviderHttpSettings,
} from "../http/provider-http.js";
import {
  type MachineErrorClassifier,
  type MachineErrorKind,
  MachineProviderError,
  machineErrorFactory,
} from "./errors.js";
import { type MachineEndpoint, type MachineRateLimits, type PacedClient, pacedClient } from "./pacing.js";

/** A provider's own error class: made with an optional kind (default `bad-request`), told apart by its provider. */
export interface MachineApiErrorClass {
  new (options: ProviderApiErrorOptions & { readonly kind?: MachineErrorKind }): MachineProviderError;
  /** True for an error of this provider, from any copy of its package. */
  isInstance(error: unknown): error is MachineProviderError;
}

/** The error class of `provider`, named `name` (`"TensorDockApiError"`). */
export function machineErrorClass(provider: string, name: string): MachineApiErrorClass {
  return class extends MachineProviderError {
    constructor(options: ProviderApiErrorOptions & { readonly kind?: MachineErrorKind }) {
      super({ ...options, kind: options.kind ?? "bad-request", provider, name });
    }

    static override isInstance(error: unknown): error is MachineProviderError {
      return MachineProviderError.isInstance(error) && error.provider === provider;
    }
  };
}

/** What {@link defineMachineApi} is given. */
export interface MachineApiDefinition extends ProviderApiIdentity {
  /** The provider's name in errors and tags (`"tensordock"`); default the label in lower case. */
  readonly provider?: string;
  /** Its error class's name (`"TensorDockApiError"`); default `<label>ApiError`. */
  readonly errorName?: string;
  /** Tells its refusals apart; what it leaves undefined is decided by the status. */
  readonly classify: MachineErrorClassifier;
  /** Its documented rate limits (each with its page); default none: a 429's `Retry-After` is still honoured. */
  readonly rateLimits?: MachineRateLimits;
}

/** What a request of {@link MachineJsonClient} may add to its method and path. */
export interface MachineJsonOptions {
  readonly params?: Readonly<Record<string, string>>;
  readonly data?: unknown;
  /** Default: true for GET, PUT and DELETE, false for POST (a retried POST could make a second machine). */
  readonly idempotent?: boolean;
}

/** Typed JSON requests to one API root, each paced by its endpoint's documented limit. */
export interface MachineJsonClient {
  /** The client the requests go through, for requests of another shape. */
  readonly http: PacedClient;
  /** Typed calls below the API root ({@link jsonCalls}), each paced by the endpoint it names (default `other`). */
  readonly json: JsonCall;
  /** Sends `method path` and parses the answer with `schema` (an answer it does not know is the provider's error). */
  call<T extends z.ZodType>(
    endpoint: MachineEndpoint,
    method: ProviderHttpRequest["method"],
    path: string,
    schema: T,
    purpose: string,
    signal: AbortSignal,
    options?: MachineJsonOptions,
  ): Promise<z.output<T>>;
  /** `GET path` with `params`, parsed with `schema`. */
  read<T extends z.ZodType>(
    endpoint: MachineEndpoint,
    path: string,
    schema: T,
    purpose: string,
    signal: AbortSignal,
    params?: Readonly<Record<string, string>>,
  ): Promise<z.output<T>>;
  /** `DELETE path`, whatever it answers; its error when refused. */
  remove(endpoint: MachineEndpoint, path: string, purpose: string, signal: AbortSignal): Promise<void>;
}

/** What a client of {@link MachineApi.jsonClient} may change from the API's definition. */
export interface MachineJsonClientOptions {
  /** Limits in place of the definition's (a setting that overrides a documented limit). */
  readonly rateLimits?: MachineRateLimits;
  /** Wraps the paced send, to read a failure the way only this API needs (Vast.ai's 404 to a bad key). */
  readonly send?: (paced: JsonSend) => JsonSend;
}

/** A provider's API, as {@link defineMachineApi} returns it. */
export interface MachineApi extends ProviderApi {
  /** The provider's name in errors and tags (`"tensordock"`). */
  readonly provider: string;
  /** The provider's error class. */
  readonly ApiError: MachineApiErrorClass;
  /** A typed JSON client of the API at `settings.apiUrl` (trailing slashes dropped). */
  jsonClient(
    settings: ProviderHttpSettings & { readonly apiUrl: string },
    options?: MachineJsonClientOptions,
  ): MachineJsonClient;
}

/** Defines a machine-renting API once; see the module comment. */
export function defineMachineApi(definition: MachineApiDefinition): MachineApi {
  const provider = definition.provider ?? definition.label.toLowerCase();
  const ApiError = machineErrorClass(provider, definition.errorName ?? `${definition.label}ApiError`);
  const api = defineProviderApi({
    label: definition.label,
    apiKeyVariable: definition.apiKeyVariable,
    ...(definition.apiKeyHeader ? { apiKeyHeader: definition.apiKeyHeader } : {}),
    createError: machineErrorFactory({
      provider,
      classify: definition.classify,
      create: (options) => new ApiError(options),
    }),
  });
  const jsonClient: MachineApi["jsonClient"] = (settings, options) => {
    const http = pacedClient(api.createClient(settings), options?.rateLimits ?? definition.rateLimits ?? {});
    const paced: JsonSend = (request, endpoint) => http.send(endpoint ?? "other", request);
    const json = jsonCalls(settings.apiUrl.replace(/\/+$/, ""), options?.send?.(paced) ?? paced, api);
    const call: MachineJsonClient["call"] = (endpoint, method, path, schema, purpose, signal, extra) =>
      json(method, path, {
        schema,
        endpoint,
        purpose,
        signal,
        ...(extra?.params ? { params: extra.params } : {}),
        ...(extra?.data !== undefined ? { data: extra.data } : {}),
        idempotent: extra?.idempotent ?? method !== "POST",
      }) as Promise<z.output<typeof schema>>;
    return {
      http,
      json,
      call,
      read: (endpoint, path, schema, purpose, signal, params) =>
        call(endpoint, "GET", path, schema, purpose, signal, params ? { params } : {}),
      async remove(endpoint, path, purpose, signal) {
        await json("DELETE", path, { endpoint, purpose, signal });
      },
    };
  };
  return Object.freeze({ ...api, provider, ApiError, jsonClient });
}
