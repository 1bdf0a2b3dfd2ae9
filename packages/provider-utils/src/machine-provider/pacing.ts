/**
 * Pacing by a provider's documented rate limits: the adapter writes each limit once, as the API's
 * documentation states it (with the page), and every request goes out through {@link pacedClient}
 * naming its endpoint. A 429 holds the endpoint back for the penalty or the `Retry-After`, whichever
 * is longer (the HTTP client's pacer).
 */
import type {
  ProviderHttpAnswer,
  ProviderHttpClient,
  ProviderHttpRequest,
  ProviderRateLimit,
} from "../http/provider-http.js";

/** The calls the machine-provider base makes, each of which may have its own documented limit. */
export type MachineEndpoint = "offers" | "create" | "get" | "list" | "delete" | "other";

/** A rate limit as an API documents it: `requests` per `perSeconds`. */
export interface DocumentedRateLimit {
  readonly requests: number;
  readonly perSeconds: number;
  /** How long the API keeps refusing after a request came too early, s; default none (a `Retry-After` still counts). */
  readonly penaltySeconds?: number;
  /** The documentation page stating it. */
  readonly source: string;
}

/** A provider's documented limits: one for the whole account, and/or one per endpoint (which wins). */
export interface MachineRateLimits {
  /** A limit every request counts against (TensorDock: 100 a minute per organisation). */
  readonly account?: DocumentedRateLimit;
  /** Limits of single endpoints (Vast.ai: search 10 a minute, one get per 2 s). */
  readonly endpoints?: Partial<Readonly<Record<MachineEndpoint, DocumentedRateLimit>>>;
}

/** The HTTP client's rate limit for a request to `endpoint`, or undefined when nothing is documented. */
export function rateLimitFor(
  limits: MachineRateLimits,
  endpoint: MachineEndpoint,
): ProviderRateLimit | undefined {
  const own = limits.endpoints?.[endpoint];
  const limit = own ?? limits.account;
  if (!limit) return undefined;
  return {
    key: own ? `endpoint:${endpoint}` : "account",
    minIntervalMs: (limit.perSeconds * 1000) / limit.requests,
    penaltyMs: (limit.penaltySeconds ?? 0) * 1000,
    burst: limit.requests,
  };
}

/** Sends requests paced by the documented limit of their endpoint. */
export interface PacedClient {
  send(
    endpoint: MachineEndpoint,
    request: Omit<ProviderHttpRequest, "rateLimit">,
  ): Promise<ProviderHttpAnswer>;
  /** {@link ProviderHttpClient.scrub}: `text` with the API key taken out. */
  scrub(text: string): string;
}

/** Wraps a provider's HTTP client so each request is paced by its endpoint's documented limit. */
export function pacedClient(http: ProviderHttpClient, limits: MachineRateLimits): PacedClient {
  return {
    scrub: (text) => http.scrub(text),
    send(endpoint, request) {
      const rateLimit = rateLimitFor(limits, endpoint);
      return http.send(rateLimit ? { ...request, rateLimit } : request);
    },
  };
}
