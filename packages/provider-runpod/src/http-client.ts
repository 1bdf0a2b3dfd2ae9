/**
 * The HTTP layer of the RunPod provider: core's provider API client (the key looked up on the first
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

const apiErrorMarker = Symbol.for("skyward.error.runpod-api");
const RUNPOD_API = { label: "RunPod", apiKeyVariable: "RUNPOD_API_KEY" };

/** A failed call to RunPod's API: the HTTP status (when there was an answer) and whether retrying may help. */
export class RunPodApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "runpod" });
    this.name = "RunPodApiError";
    Object.defineProperty(this, apiErrorMarker, { value: true });
  }

  /** True for a {@link RunPodApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is RunPodApiError {
    return carriesErrorMarker(error, apiErrorMarker);
  }
}

/** The API key from the settings, else `RUNPOD_API_KEY`, else a configuration error saying how to set one. */
export function resolveApiKey(apiKey: string | undefined): string {
  return resolveProviderApiKey(apiKey, RUNPOD_API);
}

/** Creates the client; nothing is sent and no key is looked up until the first request. */
export function createHttpClient(settings: ProviderHttpSettings): ProviderHttpClient {
  const { fetch } = settings;
  return createProviderHttpClient({
    ...RUNPOD_API,
    apiKey: () => resolveApiKey(settings.apiKey),
    request: (attempt) =>
      axios.request({
        ...attempt,
        validateStatus: () => true,
        ...(fetch ? { adapter: "fetch", env: { fetch } } : {}),
      }),
    createError: (options) => new RunPodApiError(options),
    maxRetries: settings.maxRetries,
    retryDelayMs: settings.retryDelayMs,
    timeoutMs: settings.requestTimeoutMs,
  });
}
