/**
 * Verda's public REST API (https://api.verda.com/v1/docs), as the provider uses it: an OAuth 2.0
 * client-credentials token (`POST /oauth2/token`) sent as a bearer token, refreshed when it expires or
 * is refused; instance types and their availability; SSH keys; instances. Answers are checked with
 * zod; requests go through `@skyward/provider-utils`' HTTP client (deadlines, retries of what is safe
 * to repeat, errors that never carry the token or the client secret).
 */
import { ConfigurationError } from "@skyward/core";
import {
  answerMessage,
  answerNumberSchema,
  createProviderHttpClient,
  type FetchFunction,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpClient,
  type ProviderHttpRequestFunction,
  parseProviderAnswer,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Verda's API, as its docs name it. */
export const VERDA_API_URL = "https://api.verda.com/v1";

/** A failed call to Verda's API (or no answer at all). */
export class VerdaApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "verda", name: "VerdaApiError" });
  }

  /** True for a {@link VerdaApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is VerdaApiError {
    return ProviderApiError.isInstance(error) && error.provider === "verda";
  }
}

const identity = {
  label: "Verda",
  apiKeyVariable: "VERDA_CLIENT_SECRET",
  createError: (options: ProviderApiErrorOptions) => new VerdaApiError(options),
};

const sizeSchema = z.object({ size_in_gigabytes: answerNumberSchema.optional() }).partial().nullish();

const instanceTypeSchema = z.object({
  instance_type: z.string(),
  price_per_hour: answerNumberSchema.optional(),
  spot_price: answerNumberSchema.optional(),
  description: z.string().nullish(),
  model: z.string().nullish(),
  cpu: z.object({ number_of_cores: answerNumberSchema.optional() }).partial().nullish(),
  gpu: z
    .object({ description: z.string().nullish(), number_of_gpus: answerNumberSchema.optional() })
    .partial()
    .nullish(),
  memory: sizeSchema,
  gpu_memory: sizeSchema,
  manufacturer: z.string().nullish(),
  currency: z.string().nullish(),
});

/** One entry of `GET /instance-types`. */
export type VerdaInstanceType = z.output<typeof instanceTypeSchema>;

const availabilitySchema = z.array(
  z.object({ location_code: z.string(), availabilities: z.array(z.string()).nullish() }),
);

const instanceSchema = z.object({
  id: z.string(),
  instance_type: z.string().nullish(),
  price_per_hour: answerNumberSchema.optional(),
  hostname: z.string().nullish(),
  description: z.string().nullish(),
  status: z.string(),
  created_at: z.string().nullish(),
  ip: z.string().nullish(),
  location: z.string().nullish(),
  is_spot: z.boolean().nullish(),
  image: z.string().nullish(),
});

/** One instance, as `GET /instances` lists it. */
export type VerdaInstance = z.output<typeof instanceSchema>;

const sshKeySchema = z.object({ id: z.string(), name: z.string(), key: z.string().nullish() });

/** One SSH key of the project. */
export type VerdaSshKey = z.output<typeof sshKeySchema>;

/** What `POST /instances` is sent (the fields the provider uses). */
export interface VerdaDeployRequest {
  readonly instance_type: string;
  readonly image: string;
  readonly ssh_key_ids: readonly string[];
  readonly hostname: string;
  readonly description: string;
  readonly location_code: string;
  readonly is_spot: boolean;
  readonly os_volume?: { readonly name: string; readonly size: number };
}

/** How the client reaches Verda and with what credentials. */
export interface VerdaClientSettings {
  readonly apiUrl: string;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  readonly fetch: FetchFunction | undefined;
  readonly maxRetries: number;
  readonly retryDelayMs: number;
  readonly requestTimeoutMs: number;
}

/** A client of one Verda project. */
export interface VerdaClient {
  instanceTypes(signal: AbortSignal): Promise<VerdaInstanceType[]>;
  /** Instance types available now, per location code, for spot or on-demand. */
  availability(spot: boolean, signal: AbortSignal): Promise<Map<string, Set<string>>>;
  sshKeys(signal: AbortSignal): Promise<VerdaSshKey[]>;
  /** Registers a public key; resolves with its id. */
  addSshKey(name: string, publicKey: string, signal: AbortSignal): Promise<string>;
  /** Deletes an SSH key; one Verda no longer knows is not an error. */
  deleteSshKey(id: string, signal: AbortSignal): Promise<void>;
  /** Deploys an instance; resolves with its id. */
  deploy(request: VerdaDeployRequest, signal: AbortSignal): Promise<string>;
  instances(signal: AbortSignal): Promise<VerdaInstance[]>;
  /** The instance, or null when Verda does not know it (any more). */
  instance(id: string, signal: AbortSignal): Promise<VerdaInstance | null>;
  /** Deletes instances (`PUT /instances`, action `delete`). */
  deleteInstances(ids: readonly string[], signal: AbortSignal): Promise<void>;
}

/** The client id and secret from the settings or the environment; a `ConfigurationError` naming both otherwise. */
export function resolveVerdaCredentials(settings: {
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
}): {
  clientId: string;
  clientSecret: string;
} {
  const clientId = (settings.clientId ?? process.env.VERDA_CLIENT_ID ?? "").trim();
  const clientSecret = (settings.clientSecret ?? process.env.VERDA_CLIENT_SECRET ?? "").trim();
  const issues = [
    ...(clientId === ""
      ? [{ path: "clientId", message: "Verda client id is missing: set VERDA_CLIENT_ID or pass clientId" }]
      : []),
    ...(clientSecret === ""
      ? [
          {
            path: "clientSecret",
            message: "Verda client secret is missing: set VERDA_CLIENT_SECRET or pass clientSecret",
          },
        ]
      : []),
  ];
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return { clientId, clientSecret };
}

/** Sends one attempt with `fetch`, answering whatever status comes back; JSON or text bodies. */
function fetchRequest(fetchFunction: FetchFunction | undefined): ProviderHttpRequestFunction {
  return async (attempt) => {
    const send = fetchFunction ?? globalThis.fetch;
    const url = new URL(attempt.url);
    for (const [key, value] of Object.entries(attempt.params ?? {})) url.searchParams.set(key, value);
    const response = await send(url, {
      method: attempt.method,
      headers: {
        ...attempt.headers,
        ...(attempt.data !== undefined ? { "Content-Type": "application/json" } : {}),
      },
      ...(attempt.data !== undefined ? { body: JSON.stringify(attempt.data) } : {}),
      signal: AbortSignal.any([attempt.signal, AbortSignal.timeout(attempt.timeout)]),
    });
    const text = await response.text();
    let data: unknown = text;
    try {
      data = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Verda answers some creations with the bare id as text.
    }
    return { status: response.status, data, headers: { "retry-after": response.headers.get("retry-after") } };
  };
}

/** A client for Verda's API; no request is sent and no credential looked up until the first call. */
export function createVerdaClient(settings: VerdaClientSettings): VerdaClient {
  const base = settings.apiUrl.replace(/\/+$/, "");
  const url = (path: string) => `${base}${path}`;
  const request = fetchRequest(settings.fetch);
  let token: { client: ProviderHttpClient; expiresAt: number } | undefined;
  let pending: Promise<ProviderHttpClient> | undefined;

  /** A client carrying a valid token; calls made together share one token request. */
  function accessToken(signal: AbortSignal): Promise<ProviderHttpClient> {
    if (token && token.expiresAt > Date.now()) return Promise.resolve(token.client);
    pending ??= requestToken(signal).finally(() => {
      pending = undefined;
    });
    return pending;
  }

  async function requestToken(signal: AbortSignal): Promise<ProviderHttpClient> {
    const { clientId, clientSecret } = resolveVerdaCredentials(settings);
    const purpose = "getting an access token (POST /oauth2/token)";
    let response: Awaited<ReturnType<ProviderHttpRequestFunction>>;
    try {
      response = await request({
        method: "POST",
        url: url("/oauth2/token"),
        data: { grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret },
        headers: { Accept: "application/json" },
        timeout: settings.requestTimeoutMs,
        signal,
      });
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw new VerdaApiError({
        isRetryable: true,
        message: `Verda's API could not be reached while ${purpose}: ${(error as Error).message}`,
      });
    }
    if (response.status === 400 || response.status === 401 || response.status === 403) {
      throw new VerdaApiError({
        statusCode: response.status,
        message: `Verda rejected the client credentials (HTTP ${response.status}) while ${purpose}: set VERDA_CLIENT_ID and VERDA_CLIENT_SECRET, or pass clientId and clientSecret`,
      });
    }
    if (response.status < 200 || response.status >= 300) {
      const detail = (answerMessage(response.data) ?? "no details").split(clientSecret).join("[redacted]");
      throw new VerdaApiError({
        statusCode: response.status,
        isRetryable: response.status === 429 || response.status >= 500,
        message: `Verda's API answered HTTP ${response.status} while ${purpose}: ${detail}`,
      });
    }
    const answer = parseProviderAnswer(
      z.object({ access_token: z.string().min(1), expires_in: z.number().positive().optional() }),
      response.data,
      "the access token",
      identity,
    );
    const client = createProviderHttpClient({
      ...identity,
      apiKey: () => answer.access_token,
      request,
      maxRetries: settings.maxRetries,
      retryDelayMs: settings.retryDelayMs,
      timeoutMs: settings.requestTimeoutMs,
    });
    // Renewed a minute early, so a request never goes out with a token about to lapse.
    token = { client, expiresAt: Date.now() + Math.max((answer.expires_in ?? 3600) - 60, 30) * 1000 };
    return client;
  }

  /** Sends a request with a valid token; a refused token is renewed once. */
  async function send(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    purpose: string,
    signal: AbortSignal,
    options: { data?: unknown; params?: Record<string, string>; idempotent: boolean },
  ): Promise<unknown> {
    for (let attempt = 0; ; attempt += 1) {
      const client = await accessToken(signal);
      try {
        const answer = await client.send({
          method,
          url: url(path),
          purpose,
          signal,
          idempotent: options.idempotent,
          ...(options.data !== undefined ? { data: options.data } : {}),
          ...(options.params ? { params: options.params } : {}),
        });
        return answer.data;
      } catch (error) {
        if (attempt === 0 && VerdaApiError.isInstance(error) && error.statusCode === 401) {
          token = undefined;
          continue;
        }
        throw error;
      }
    }
  }

  const notFound = (error: unknown) =>
    VerdaApiError.isInstance(error) && (error.statusCode === 404 || error.statusCode === 410);
  const idOf = (data: unknown, purpose: string): string =>
    parseProviderAnswer(
      z.union([z.string().min(1), z.object({ id: z.string().min(1) }).transform((value) => value.id)]),
      data,
      purpose,
      identity,
    );

  return {
    async instanceTypes(signal) {
      const data = await send("GET", "/instance-types", "listing instance types", signal, {
        params: { currency: "usd" },
        idempotent: true,
      });
      return parseProviderAnswer(z.array(instanceTypeSchema), data, "instance types", identity);
    },
    async availability(spot, signal) {
      const data = await send(
        "GET",
        "/instance-availability",
        `listing ${spot ? "spot" : "on-demand"} availability`,
        signal,
        { params: { is_spot: String(spot) }, idempotent: true },
      );
      const entries = parseProviderAnswer(availabilitySchema, data, "instance availability", identity);
      return new Map(entries.map((entry) => [entry.location_code, new Set(entry.availabilities ?? [])]));
    },
    async sshKeys(signal) {
      const data = await send("GET", "/ssh-keys", "listing SSH keys", signal, { idempotent: true });
      return parseProviderAnswer(z.array(sshKeySchema), data, "SSH keys", identity);
    },
    async addSshKey(name, publicKey, signal) {
      const data = await send("POST", "/ssh-keys", `adding SSH key ${name}`, signal, {
        data: { name, key: publicKey },
        idempotent: false,
      });
      return idOf(data, "the new SSH key");
    },
    async deleteSshKey(id, signal) {
      try {
        await send("DELETE", `/ssh-keys/${encodeURIComponent(id)}`, `deleting SSH key ${id}`, signal, {
          idempotent: true,
        });
      } catch (error) {
        if (!notFound(error)) throw error;
      }
    },
    async deploy(body, signal) {
      const data = await send("POST", "/instances", `deploying a ${body.instance_type} instance`, signal, {
        data: body,
        idempotent: false,
      });
      return idOf(data, "the new instance");
    },
    async instances(signal) {
      const data = await send("GET", "/instances", "listing instances", signal, { idempotent: true });
      return parseProviderAnswer(z.array(instanceSchema), data, "instances", identity);
    },
    async instance(id, signal) {
      try {
        const data = await send(
          "GET",
          `/instances/${encodeURIComponent(id)}`,
          `reading instance ${id}`,
          signal,
          {
            idempotent: true,
          },
        );
        return parseProviderAnswer(instanceSchema, data, `instance ${id}`, identity);
      } catch (error) {
        if (notFound(error)) return null;
        throw error;
      }
    },
    async deleteInstances(ids, signal) {
      if (ids.length === 0) return;
      try {
        await send("PUT", "/instances", `deleting instance(s) ${ids.join(", ")}`, signal, {
          data: { action: "delete", id: [...ids] },
          idempotent: true,
        });
      } catch (error) {
        if (!notFound(error)) throw error;
      }
    },
  };
}
