/**
 * The HTTP layer of the Vast.ai provider: core's provider API client (the key looked up on the first
 * request and sent as a bearer token, deadlines, retries, errors that never carry the key) sending
 * over axios — through its own Node adapter, or through an injected `fetch`.
 */
import {
  carriesErrorMarker,
  createProviderHttpClient,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpClient,
  type ProviderHttpSettings,
  resolveProviderApiKey,
} from "@skyward/core/internal";
import axios from "axios";

const apiErrorMarker = Symbol.for("skyward.error.vastai-api");
const VASTAI_API = { label: "Vast.ai", apiKeyVariable: "VAST_API_KEY" };

/** A failed call to Vast.ai's API: the HTTP status (when there was an answer) and whether retrying may help. */
export class VastApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "vastai" });
    this.name = "VastApiError";
    Object.defineProperty(this, apiErrorMarker, { value: true });
  }

  /** True for a {@link VastApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is VastApiError {
    return carriesErrorMarker(error, apiErrorMarker);
  }
}

/**
 * Creates the client; nothing is sent and no key is looked up until the first request. The key: the
 * settings' `apiKey`, else `VAST_API_KEY`, else a configuration error saying how to set one.
 */
export function createHttpClient(settings: ProviderHttpSettings): ProviderHttpClient {
  const { fetch } = settings;
  return createProviderHttpClient({
    ...VASTAI_API,
    apiKey: () => resolveProviderApiKey(settings.apiKey, VASTAI_API),
    request: (attempt) =>
      axios.request({
        ...attempt,
        validateStatus: () => true,
        ...(fetch ? { adapter: "fetch", env: { fetch } } : {}),
      }),
    createError: (options) => new VastApiError(options),
    maxRetries: settings.maxRetries,
    retryDelayMs: settings.retryDelayMs,
    timeoutMs: settings.requestTimeoutMs,
  });
}
