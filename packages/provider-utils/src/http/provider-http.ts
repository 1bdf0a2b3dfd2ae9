/**
 * The HTTP layer cloud providers share for their APIs: bearer authentication with a lazily resolved
 * API key, deadlines and abort signals, and retries — HTTP 429 always (the request was refused, not
 * run), 5xx and network failures only for requests that are safe to repeat. Sending is left to a
 * request function (`provider-api.ts` sends over axios), so this part depends on no HTTP library.
 * Errors never carry the key, the request headers or the sender's own error (which may hold them).
 * Answers are checked with zod ({@link parseProviderAnswer}, {@link answerNumberSchema},
 * {@link answerListSchema}, {@link answerTextSchema}).
 */

import { ConfigurationError, ProvisionError } from "@skyward/core";
import { z } from "zod";
import { createRequestPacer, type ProviderRateLimit, abortableSleep as sleep } from "./request-pacer.js";

export type { ProviderRateLimit } from "./request-pacer.js";

const providerApiMarker = Symbol.for("skyward.error.provider-api");

/** True when `error` is an object carrying `marker` (a `Symbol.for` key its constructor set to `true`). */
function carriesErrorMarker(error: unknown, marker: symbol): boolean {
  return typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[marker] === true;
}

/** What {@link ProviderApiError}'s subclasses are built from. */
export interface ProviderApiErrorOptions {
  /** The message; never the API key. */
  readonly message: string;
  /** The HTTP status, when there was an answer. */
  readonly statusCode?: number;
  /** Whether trying again may help. Default false. */
  readonly isRetryable?: boolean;
  /**
   * The error answer's body (parsed JSON, or text), for a provider to read fields the message leaves
   * out (an id in a refusal). Never the request's headers; the API key is scrubbed from it.
   */
  readonly answer?: unknown;
  /** True when the API answered, but in a shape the provider does not know ({@link parseProviderAnswer}). */
  readonly unknownAnswer?: boolean;
}

/**
 * A failed call to a provider's API: the HTTP status (when there was an answer) and whether retrying
 * may help. Providers subclass it under their own name (`RunPodApiError`, `VastApiError`), passing
 * their provider name and error name; a subclass's `isInstance` is
 * `ProviderApiError.isInstance(error) && error.provider === "<name>"`.
 *
 * @example
 * ```ts
 * import { ProviderApiError, type ProviderApiErrorOptions } from "@skyward/provider-utils";
 *
 * export class ExampleApiError extends ProviderApiError {
 *   constructor(options: ProviderApiErrorOptions) {
 *     super({ ...options, provider: "example", name: "ExampleApiError" });
 *   }
 *
 *   static override isInstance(error: unknown): error is ExampleApiError {
 *     return ProviderApiError.isInstance(error) && error.provider === "example";
 *   }
 * }
 * ```
 */
export class ProviderApiError extends ProvisionError {
  /** The HTTP status, or undefined when no answer came (network failure, deadline). */
  readonly statusCode: number | undefined;
  /** The error answer's body, when there was one (see {@link ProviderApiErrorOptions.answer}). */
  declare readonly answer: unknown;

  constructor(
    options: ProviderApiErrorOptions & {
      /** The provider's name (`runpod`). */
      readonly provider: string;
      /** The error's name (`RunPodApiError`); default `ProviderApiError`. */
      readonly name?: string;
    },
  ) {
    super({
      provider: options.provider,
      message: options.message,
      isRetryable: options.isRetryable ?? false,
    });
    this.name = options.name ?? "ProviderApiError";
    Object.defineProperty(this, providerApiMarker, { value: true });
    this.statusCode = options.statusCode;
    // Not enumerable: kept out of JSON and of inspected errors, read by the provider that made it.
    Object.defineProperty(this, "answer", { value: options.answer, enumerable: false });
  }

  /** True for a {@link ProviderApiError} (of any provider) from any copy of this package. */
  static override isInstance(error: unknown): error is ProviderApiError {
    return carriesErrorMarker(error, providerApiMarker);
  }
}

/** A `fetch`-compatible function; tests and proxies inject their own. */
export type FetchFunction = (input: URL | Request | string, init?: RequestInit) => Promise<Response>;

/** How a provider names its API in messages. */
export interface ProviderApiIdentity {
  /** The provider as people write it: `"RunPod"`, `"Vast.ai"`. */
  readonly label: string;
  /** The environment variable holding the API key: `"RUNPOD_API_KEY"`. */
  readonly apiKeyVariable: string;
  /**
   * The request header carrying the bare key, for APIs that take no bearer token (Hyperstack's
   * `api_key`). Default: `Authorization: Bearer <key>`.
   */
  readonly apiKeyHeader?: string;
}

/**
 * The API key given in the settings, else the one in `identity.apiKeyVariable`, trimmed; else a
 * `ConfigurationError` at `apiKey` saying "set X_API_KEY or pass apiKey".
 */
export function resolveProviderApiKey(apiKey: string | undefined, identity: ProviderApiIdentity): string {
  const key = apiKey ?? process.env[identity.apiKeyVariable];
  if (key === undefined || key.trim() === "") {
    throw new ConfigurationError({
      issues: [
        {
          path: "apiKey",
          message: `${identity.label} API key is missing: set ${identity.apiKeyVariable} or pass apiKey`,
        },
      ],
    });
  }
  return key.trim();
}

/**
 * The settings a provider's HTTP layer reads, as the provider's settings schema leaves them: the API
 * key (else the environment variable), an injected `fetch`, and the retry and deadline knobs.
 */
export interface ProviderHttpSettings {
  /** The API key; undefined: the provider's environment variable. A secret: never logged. */
  readonly apiKey?: string;
  /** The `fetch` to send with (tests, proxies); undefined: the provider's own sender. */
  readonly fetch?: FetchFunction;
  /** Retries after the first attempt. */
  readonly maxRetries: number;
  /** The first retry's delay, ms; each further one doubles it. */
  readonly retryDelayMs: number;
  /** Deadline of one attempt, ms. */
  readonly requestTimeoutMs: number;
}

/** One attempt at a request, as the client hands it to the request function (an axios request config). */
export interface ProviderHttpAttempt {
  readonly method: ProviderHttpRequest["method"];
  readonly url: string;
  readonly params?: Readonly<Record<string, string>>;
  readonly data?: unknown;
  /** `Authorization: Bearer <key>` (or the identity's `apiKeyHeader`) and `Accept: application/json`. A secret: never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** Deadline of this attempt, ms. */
  readonly timeout: number;
  readonly signal: AbortSignal;
}

/** The answer to one attempt, whatever its status. */
export interface ProviderHttpResponse {
  readonly status: number;
  /** The body, parsed when it is JSON. */
  readonly data: unknown;
  /** Response headers by lower-case name; `retry-after` is read. */
  readonly headers?: Readonly<Record<string, unknown>>;
}

/**
 * Sends one attempt. Resolves with the answer whatever its status (axios with `validateStatus: () =>
 * true`); rejects only when no answer came (network failure, deadline, abort). Of such an error only
 * its `code` and `message` are kept.
 */
export type ProviderHttpRequestFunction = (attempt: ProviderHttpAttempt) => Promise<ProviderHttpResponse>;

/** How a {@link ProviderHttpClient} is set up. */
export interface ProviderHttpClientOptions extends ProviderApiIdentity {
  /** Returns the API key; called on the first request, not before (again after it threw). */
  readonly apiKey: () => string;
  /** Sends one attempt; see {@link ProviderHttpRequestFunction}. */
  readonly request: ProviderHttpRequestFunction;
  /** Makes the provider's own error for a failed request. */
  readonly createError: (options: ProviderApiErrorOptions) => ProviderApiError;
  /** Retries after the first attempt. */
  readonly maxRetries: number;
  /** The first retry's delay; each further one doubles it (a `Retry-After` header wins). */
  readonly retryDelayMs: number;
  /** Deadline of one attempt. */
  readonly timeoutMs: number;
}

/** One request. */
export interface ProviderHttpRequest {
  readonly method: "GET" | "POST" | "PUT" | "DELETE";
  readonly url: string;
  readonly params?: Readonly<Record<string, string>>;
  readonly data?: unknown;
  /** True when sending it twice does no harm, so 5xx answers and network failures are retried too. */
  readonly idempotent: boolean;
  /** What the request is for, in words, for error messages (`"creating a pod"`). */
  readonly purpose: string;
  readonly signal: AbortSignal;
  /**
   * The API's own rate limit for this kind of request, when it is known: requests with the same `key`
   * are spaced `minIntervalMs` apart (the client waits, it does not fail), and an HTTP 429 to one of
   * them holds every request of that key back for `penaltyMs` before the retry — for APIs that answer
   * 429 without a `Retry-After` and keep refusing during a penalty (Vast.ai: one create per 4.5 s,
   * 12 s penalty).
   */
  readonly rateLimit?: ProviderRateLimit;
}

/** A successful answer. */
export interface ProviderHttpAnswer {
  readonly status: number;
  readonly data: unknown;
}

/** Sends requests to a provider's API; see {@link createProviderHttpClient}. */
export interface ProviderHttpClient {
  /** Resolves with the answer of a 2xx status; rejects with the provider's {@link ProviderApiError} otherwise. */
  send(request: ProviderHttpRequest): Promise<ProviderHttpAnswer>;
  /**
   * `text` with the API key taken out (`[redacted]`), for an error read from a 2xx answer (GraphQL's
   * `errors`), which `send` hands back as it came.
   */
  scrub(text: string): string;
}

/** The message an error answer carries (`message`, `error`, `msg`, GraphQL `errors[0].message`, JSON:API `errors[0].detail`), shortened. */
export function answerMessage(data: unknown): string | undefined {
  if (typeof data === "string") return data.trim().slice(0, 300) || undefined;
  if (typeof data !== "object" || data === null) return undefined;
  const record = data as Record<string, unknown>;
  const errors = record.errors;
  if (Array.isArray(errors) && errors.length > 0) {
    const first = errors[0] as Record<string, unknown> | undefined;
    // GraphQL errors carry `message`; JSON:API error objects `detail` and `title`.
    for (const key of ["message", "detail", "title"]) {
      const value = first?.[key];
      if (typeof value === "string" && value.trim() !== "") return value.trim().slice(0, 300);
    }
  }
  for (const key of ["message", "msg", "detail", "error"]) {
    const value = record[key];
    if (typeof value === "string" && value.trim() !== "") return value.trim().slice(0, 300);
  }
  return undefined;
}

/** The wait a `Retry-After` header asks for, ms (delay-seconds or an HTTP date, RFC 9110 §10.2.3), at most a minute. */
export function retryAfterMs(
  response: Pick<ProviderHttpResponse, "headers"> | undefined,
): number | undefined {
  const header = response?.headers?.["retry-after"];
  if (typeof header !== "string" && typeof header !== "number") return undefined;
  const text = String(header).trim();
  const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : (Date.parse(text) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(Math.max(seconds, 0), 60) * 1000 : undefined;
}

/** An error answer's body with the key taken out of it (a copy). */
function scrubbedAnswer(data: unknown, secret: string | undefined): unknown {
  try {
    return JSON.parse(scrub(JSON.stringify(data), secret)) as unknown;
  } catch {
    return undefined;
  }
}

function scrub(text: string, secret: string | undefined): string {
  return secret ? text.split(secret).join("[redacted]") : text;
}

/**
 * Creates a provider's API client; nothing is sent and no key is looked up until the first request.
 * A 2xx answer resolves; 429 is retried with backoff, 5xx and network failures too when the request is
 * idempotent; anything else rejects with `createError(…)`: a rejected key (401/403) naming
 * `apiKeyVariable`, a persistent rate limit, or the status and the answer's message.
 */
export function createProviderHttpClient(options: ProviderHttpClientOptions): ProviderHttpClient {
  const { label } = options;
  let key: string | undefined;
  const pacer = createRequestPacer();

  return {
    scrub: (text) => scrub(text, key),
    async send(request: ProviderHttpRequest): Promise<ProviderHttpAnswer> {
      key ??= options.apiKey();
      const headers = {
        ...(options.apiKeyHeader ? { [options.apiKeyHeader]: key } : { Authorization: `Bearer ${key}` }),
        Accept: "application/json",
      };
      const where = `${request.purpose} (${request.method} ${new URL(request.url).pathname})`;
      for (let attempt = 0; ; attempt += 1) {
        if (request.signal.aborted) throw request.signal.reason;
        let response: ProviderHttpResponse | undefined;
        let failure: string | undefined;
        if (request.rateLimit) await pacer.take(request.rateLimit, request.signal);
        try {
          response = await options.request({
            method: request.method,
            url: request.url,
            ...(request.params ? { params: request.params } : {}),
            ...(request.data !== undefined ? { data: request.data } : {}),
            headers,
            timeout: options.timeoutMs,
            signal: request.signal,
          });
        } catch (error) {
          if (request.signal.aborted) throw request.signal.reason;
          // Only the code and message: the sender's error may hold the request headers.
          const { code, message } = error as { code?: string; message?: string };
          failure = scrub(`${code ?? "network error"}${message ? `: ${message}` : ""}`, key);
        }
        const status = response?.status;
        if (status !== undefined && status >= 200 && status < 300) return { status, data: response?.data };
        const retryable = status === 429 || ((status === undefined || status >= 500) && request.idempotent);
        if (status === 429 && request.rateLimit) {
          // The API refuses the key for its penalty (or as long as its Retry-After says): nothing of
          // that key goes before it has passed. A 429 naming no wait backs off as an unpaced one does:
          // a limit per minute another client used up refuses far longer than one interval.
          const { penaltyMs, minIntervalMs } = request.rateLimit;
          const wait = retryAfterMs(response) ?? options.retryDelayMs * 2 ** attempt;
          pacer.holdBack(request.rateLimit, Math.max(penaltyMs + minIntervalMs, wait));
        }
        if (retryable && attempt < options.maxRetries) {
          if (status === 429 && request.rateLimit) continue; // the pacer waits out the penalty
          const backoff = options.retryDelayMs * 2 ** attempt;
          await sleep(retryAfterMs(response) ?? backoff, request.signal);
          continue;
        }
        const detail = scrub(answerMessage(response?.data) ?? failure ?? "no details", key);
        if (status === 401 || status === 403) {
          throw options.createError({
            statusCode: status,
            // For the provider to tell a bad key from an account that may not do this (its classifier).
            ...(response?.data !== undefined ? { answer: scrubbedAnswer(response.data, key) } : {}),
            message: `${label} rejected the API key (HTTP ${status}) while ${where}: set ${options.apiKeyVariable} to a valid key or pass apiKey`,
          });
        }
        if (status === 429) {
          throw options.createError({
            statusCode: status,
            isRetryable: true,
            message: `${label}'s rate limit (HTTP 429) persisted after ${attempt + 1} attempts while ${where}; try again later`,
          });
        }
        throw options.createError({
          ...(status !== undefined ? { statusCode: status } : {}),
          ...(response?.data !== undefined ? { answer: scrubbedAnswer(response.data, key) } : {}),
          isRetryable: status === undefined || status >= 500,
          message:
            status === undefined
              ? `${label}'s API could not be reached while ${where}${attempt > 0 ? ` (${attempt + 1} attempts)` : ""}: ${detail}`
              : `${label}'s API answered HTTP ${status} while ${where}: ${detail}`,
        });
      }
    },
  };
}

/**
 * Parses a provider's answer `value` with `schema`; when it does not fit, throws `createError(…)`
 * saying "<label>'s answer to <purpose> was not understood: <path>: <message>" (the first issue).
 */
export function parseProviderAnswer<T extends z.ZodType>(
  schema: T,
  value: unknown,
  purpose: string,
  api: Pick<ProviderHttpClientOptions, "label" | "createError">,
): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw api.createError({
      unknownAnswer: true,
      message: `${api.label}'s answer to ${purpose} was not understood: ${issue ? `${issue.path.join(".") || "(root)"}: ${issue.message}` : "invalid"}`,
    });
  }
  return parsed.data;
}

/**
 * A number in a provider's answer, sent as a JSON number or as a numeric string: the finite number,
 * else (absent, null, not a number) null.
 */
export const answerNumberSchema = z
  .union([z.number(), z.string()])
  .nullish()
  .transform((value) => {
    const parsed = typeof value === "string" ? Number(value) : value;
    return typeof parsed === "number" && Number.isFinite(parsed) ? parsed : null;
  });

/**
 * A list in a provider's answer, each item checked with `item`. It must be there: an answer without
 * it is one the provider does not understand, never "nothing" — a list of instances read as empty
 * would let teardown succeed while machines bill on.
 */
export function answerListSchema<T extends z.ZodType>(item: T) {
  return z.array(item, { error: "expected a list" });
}

/**
 * A list the API documents as optional (a location's GPUs, a VM's labels), each item checked with
 * `item`: absent or null is the empty list. Never for the list of instances itself.
 */
export function answerOptionalListSchema<T extends z.ZodType>(item: T) {
  return z
    .array(item)
    .nullish()
    .transform((value) => value ?? []);
}

/** A string in a provider's answer: absent or null is the empty string. */
export const answerTextSchema = z
  .string()
  .nullish()
  .transform((value) => value ?? "");
