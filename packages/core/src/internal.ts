/**
 * Transitional: the provider HTTP client, until it moves to `@skyward/provider-utils`. Not public.
 */
export type {
  FetchFunction,
  ProviderApiErrorOptions,
  ProviderApiIdentity,
  ProviderHttpAnswer,
  ProviderHttpAttempt,
  ProviderHttpClient,
  ProviderHttpClientOptions,
  ProviderHttpRequest,
  ProviderHttpRequestFunction,
  ProviderHttpResponse,
  ProviderHttpSettings,
} from "./ssh/provider-http.js";
export {
  answerMessage,
  answerNumberSchema,
  carriesErrorMarker,
  createProviderHttpClient,
  ProviderApiError,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./ssh/provider-http.js";
