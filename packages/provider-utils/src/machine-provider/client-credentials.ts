/**
 * An OAuth 2.0 client-credentials grant (RFC 6749 §4.4), as the token a {@link tokenClient} carries:
 * the client id and secret from the settings or the environment (a `ConfigurationError` naming each
 * one missing), `POST <tokenPath>` with them as JSON, the answer's `access_token` and `expires_in`.
 * A refusal of the credentials fails at once; no answer, a 5xx or a 429 is asked again as the HTTP layer
 * asks an idempotent call again (`maxRetries`, `retryDelayMs` doubling, a `Retry-After` first): every
 * call needs a token, and one failed for a moment failed a teardown. The secret never reaches a message.
 */
import { ConfigurationError } from "@skyward/core";
import { z } from "zod";
import {
  answerMessage,
  type FetchFunction,
  type ProviderHttpSettings,
  retryAfterMs,
} from "../http/provider-http.js";
import { abortableSleep } from "../http/request-pacer.js";
import { kindOfStatus, type MachineErrorKind } from "./errors.js";
import type { MachineApi, MachineJsonClient } from "./machine-api.js";
import { type GrantedToken, tokenClient } from "./token-client.js";

/** The settings a client-credentials client reads. */
export type ClientCredentialsSettings = Omit<ProviderHttpSettings, "apiKey"> & {
  readonly apiUrl: string;
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
  readonly fetch?: FetchFunction | undefined;
};

/** Where the API grants tokens and where the credentials are looked up. */
export interface ClientCredentialsGrant {
  /** The token path below the API root (`/oauth2/token`). */
  readonly tokenPath: string;
  /** The environment variables of the client id and secret (`VERDA_CLIENT_ID`, `VERDA_CLIENT_SECRET`). */
  readonly idVariable: string;
  readonly secretVariable: string;
}

/** The client id and secret from the settings or the environment; a `ConfigurationError` naming each missing one. */
export function resolveClientCredentials(
  api: MachineApi,
  grant: ClientCredentialsGrant,
  settings: Pick<ClientCredentialsSettings, "clientId" | "clientSecret">,
) {
  const clientId = (settings.clientId ?? process.env[grant.idVariable] ?? "").trim();
  const clientSecret = (settings.clientSecret ?? process.env[grant.secretVariable] ?? "").trim();
  const fields: readonly (readonly [string, string, string, string])[] = [
    ["clientId", clientId, grant.idVariable, "id"],
    ["clientSecret", clientSecret, grant.secretVariable, "secret"],
  ];
  const issues = fields.flatMap(([path, value, variable, what]) =>
    value === ""
      ? [{ path, message: `${api.label} client ${what} is missing: set ${variable} or pass ${path}` }]
      : [],
  );
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return { clientId, clientSecret };
}

const tokenSchema = z.object({
  access_token: z.string().min(1),
  expires_in: z.number().positive().optional(),
});

/** A JSON client of `api` whose calls carry a token granted for the client credentials; nothing is asked before the first call. */
export function clientCredentialsClient(
  api: MachineApi,
  grant: ClientCredentialsGrant,
  settings: ClientCredentialsSettings,
): MachineJsonClient {
  return tokenClient(api, settings, async (signal) => {
    for (let attempt = 0; ; attempt += 1) {
      const outcome = await grantOnce(api, grant, settings, signal);
      if (!("retry" in outcome)) return outcome;
      if (attempt >= settings.maxRetries) throw outcome.error;
      await abortableSleep(outcome.retry ?? settings.retryDelayMs * 2 ** attempt, signal);
    }
  });
}

/** One token request: the token, or a failure worth asking again (`retry`: the wait its answer asked for). */
async function grantOnce(
  api: MachineApi,
  grant: ClientCredentialsGrant,
  settings: ClientCredentialsSettings,
  signal: AbortSignal,
): Promise<GrantedToken | { readonly retry: number | undefined; readonly error: Error }> {
  const { clientId, clientSecret } = resolveClientCredentials(api, grant, settings);
  const purpose = `getting an access token (POST ${grant.tokenPath})`;
  const fail = (kind: MachineErrorKind, message: string, statusCode?: number) =>
    new api.ApiError({ kind, message, ...(statusCode !== undefined ? { statusCode } : {}) });
  let response: Response;
  try {
    response = await (settings.fetch ?? globalThis.fetch)(
      `${settings.apiUrl.replace(/\/+$/, "")}${grant.tokenPath}`,
      {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify({
          grant_type: "client_credentials",
          client_id: clientId,
          client_secret: clientSecret,
        }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(settings.requestTimeoutMs)]),
      },
    );
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    const message = `${api.label}'s API could not be reached while ${purpose}: ${(error as Error).message}`;
    return { retry: undefined, error: fail("unavailable", message) };
  }
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    // A body that is not JSON is reported as it came.
  }
  const { status } = response;
  if (status === 400 || status === 401 || status === 403)
    throw fail(
      "auth",
      `${api.label} rejected the client credentials (HTTP ${status}) while ${purpose}: set ${grant.idVariable} and ${grant.secretVariable}, or pass clientId and clientSecret`,
      status,
    );
  if (status < 200 || status >= 300) {
    const detail = (answerMessage(body) ?? "no details").split(clientSecret).join("[redacted]");
    const message = `${api.label}'s API answered HTTP ${status} while ${purpose}: ${detail}`;
    const error = fail(kindOfStatus(status), message, status);
    if (status !== 429 && status < 500) throw error;
    return {
      retry: retryAfterMs({ headers: { "retry-after": response.headers.get("retry-after") } }),
      error,
    };
  }
  const answer = api.parseAnswer(tokenSchema, body, "the access token");
  return { token: answer.access_token, expiresInSeconds: answer.expires_in };
}
