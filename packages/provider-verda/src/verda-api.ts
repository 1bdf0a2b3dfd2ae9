/**
 * Verda's public REST API (https://api.verda.com/v1/docs), as the provider uses it: an OAuth 2.0
 * client-credentials token (`POST /oauth2/token`) sent as a bearer token, refreshed when it expires or
 * is refused; instance types and their availability; SSH keys; startup scripts; instances. Answers are
 * checked with zod; every failure is a {@link VerdaApiError} whose `kind` (the machine-provider base's
 * taxonomy) says what failed. Verda documents no rate limit: a 429's `Retry-After` is honoured.
 */
import { ConfigurationError } from "@skyward/core";
import {
  answerMessage,
  answerNumberSchema,
  createProviderHttpClient,
  type FetchFunction,
  type MachineDeleteOutcome,
  type MachineErrorKind,
  type MachineProviderError,
  machineErrorClass,
  machineErrorFactory,
  machineErrorKind,
  type ProviderHttpClient,
  type ProviderHttpRequestFunction,
  parseProviderAnswer,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Verda's API, as its docs name it. */
export const VERDA_API_URL = "https://api.verda.com/v1";

/** A failed call to Verda's API (or no answer at all), with its `kind`. */
export const VerdaApiError = machineErrorClass("verda", "VerdaApiError");
export type VerdaApiError = MachineProviderError;

/**
 * Verda answers refusals as `{code, message}` with a 4xx or 503; the words tell them apart. "Operating
 * system is not valid for this instance type" is a bad request (the type's `supported_os` lists the
 * images it takes); deleting an instance still provisioning is refused for now.
 */
export function classifyVerdaError(failure: { statusCode: number | undefined; message: string }) {
  const { statusCode, message } = failure;
  if (statusCode === 401) return "auth" as const;
  if (statusCode === 429) return undefined;
  if (/operating system is not valid|image .*not (valid|supported)/i.test(message))
    return "bad-request" as const;
  if (
    /provisioning|not ready|still (being )?(created|deployed)|cannot .*in (its )?current (state|status)/i.test(
      message,
    )
  )
    return "busy" as const;
  if (/not enough|no capacity|insufficient resources|not available|out of stock|sold out/i.test(message))
    return "capacity" as const;
  if (/quota|limit (exceeded|reached)/i.test(message)) return "quota" as const;
  if (/balance|insufficient funds|payment/i.test(message)) return "account" as const;
  return undefined;
}

const identity = {
  label: "Verda",
  apiKeyVariable: "VERDA_CLIENT_SECRET",
  createError: machineErrorFactory({
    provider: "verda",
    classify: classifyVerdaError,
    create: (options) => new VerdaApiError(options),
  }),
};

const sizeSchema = z.object({ size_in_gigabytes: answerNumberSchema.optional() }).partial().nullish();

const instanceTypeSchema = z.object({
  instance_type: z.string(),
  price_per_hour: answerNumberSchema.optional(),
  spot_price: answerNumberSchema.optional(),
  model: z.string().nullish(),
  cpu: z.object({ number_of_cores: answerNumberSchema.optional() }).partial().nullish(),
  gpu: z
    .object({ description: z.string().nullish(), number_of_gpus: answerNumberSchema.optional() })
    .partial()
    .nullish(),
  memory: sizeSchema,
  gpu_memory: sizeSchema,
  /** The OS images the type can be deployed with. */
  supported_os: z.array(z.string()).nullish(),
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
  is_spot: z.boolean().nullish(),
  os_volume_id: z.string().nullish(),
});

/** One instance, as `GET /instances` lists it. */
export type VerdaInstance = z.output<typeof instanceSchema>;

const namedSchema = z.object({ id: z.string(), name: z.string() });

/** A project SSH key or startup script: its id and name. */
export type VerdaNamed = z.output<typeof namedSchema>;

/**
 * The answer to `PUT /instances` when some actions failed: 207 with one result per instance
 * ("Perform action on instance or multiple instances", https://api.verda.com/v1/docs).
 */
const actionResultsSchema = z.array(
  z.object({
    instanceId: z.string(),
    status: z.string(),
    error: z.string().nullish(),
    statusCode: z.number().nullish(),
  }),
);

/** How the client reaches Verda and with what credentials. */
export interface VerdaClientSettings {
  readonly apiUrl: string;
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
  readonly fetch?: FetchFunction | undefined;
  readonly maxRetries: number;
  readonly retryDelayMs: number;
  readonly requestTimeoutMs: number;
}

/** The client id and secret from the settings or the environment; a `ConfigurationError` naming both otherwise. */
export function resolveVerdaCredentials(settings: {
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
}): { clientId: string; clientSecret: string } {
  const clientId = (settings.clientId ?? process.env.VERDA_CLIENT_ID ?? "").trim();
  const clientSecret = (settings.clientSecret ?? process.env.VERDA_CLIENT_SECRET ?? "").trim();
  const missing = (path: string, variable: string, what: string) => ({
    path,
    message: `Verda client ${what} is missing: set ${variable} or pass ${path}`,
  });
  const issues = [
    ...(clientId === "" ? [missing("clientId", "VERDA_CLIENT_ID", "id")] : []),
    ...(clientSecret === "" ? [missing("clientSecret", "VERDA_CLIENT_SECRET", "secret")] : []),
  ];
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return { clientId, clientSecret };
}

/** Sends one attempt with `fetch`, answering whatever status comes back; JSON or text bodies. */
function fetchRequest(fetchFunction: FetchFunction | undefined): ProviderHttpRequestFunction {
  return async (attempt) => {
    const url = new URL(attempt.url);
    for (const [key, value] of Object.entries(attempt.params ?? {})) url.searchParams.set(key, value);
    const response = await (fetchFunction ?? globalThis.fetch)(url, {
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
      // Verda answers creations with the bare id as text.
    }
    return { status: response.status, data, headers: { "retry-after": response.headers.get("retry-after") } };
  };
}

type Method = "GET" | "POST" | "PUT" | "DELETE";

/** A client for Verda's API; no request is sent and no credential looked up until the first call. */
export function createVerdaClient(settings: VerdaClientSettings) {
  const url = (path: string) => `${settings.apiUrl.replace(/\/+$/, "")}${path}`;
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
    const fail = (kind: MachineErrorKind, message: string, statusCode?: number) =>
      new VerdaApiError({ kind, message, ...(statusCode !== undefined ? { statusCode } : {}) });
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
      throw fail(
        "unavailable",
        `Verda's API could not be reached while ${purpose}: ${(error as Error).message}`,
      );
    }
    const status = response.status;
    if (status === 400 || status === 401 || status === 403)
      throw fail(
        "auth",
        `Verda rejected the client credentials (HTTP ${status}) while ${purpose}: set VERDA_CLIENT_ID and VERDA_CLIENT_SECRET, or pass clientId and clientSecret`,
        status,
      );
    if (status < 200 || status >= 300) {
      const detail = (answerMessage(response.data) ?? "no details").split(clientSecret).join("[redacted]");
      throw fail(
        status === 429 ? "rate-limit" : status >= 500 ? "unavailable" : "bad-request",
        `Verda's API answered HTTP ${status} while ${purpose}: ${detail}`,
        status,
      );
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

  /** Sends a request with a valid token (a refused token is renewed once) and parses its answer. */
  async function send<T extends z.ZodType>(
    method: Method,
    path: string,
    purpose: string,
    signal: AbortSignal,
    schema: T,
    options: { data?: unknown; params?: Record<string, string>; idempotent?: boolean } = {},
  ): Promise<{ status: number; value: z.output<T> }> {
    for (let attempt = 0; ; attempt += 1) {
      const client = await accessToken(signal);
      try {
        const { status, data } = await client.send({
          method,
          url: url(path),
          purpose,
          signal,
          idempotent: options.idempotent ?? method !== "POST",
          ...(options.data !== undefined ? { data: options.data } : {}),
          ...(options.params ? { params: options.params } : {}),
        });
        return { status, value: parseProviderAnswer(schema, data, purpose, identity) };
      } catch (error) {
        if (attempt === 0 && VerdaApiError.isInstance(error) && error.statusCode === 401) {
          token = undefined;
          continue;
        }
        throw error;
      }
    }
  }
  const read = async <T extends z.ZodType>(
    path: string,
    purpose: string,
    signal: AbortSignal,
    schema: T,
    params?: Record<string, string>,
  ) => (await send("GET", path, purpose, signal, schema, params ? { params } : {})).value;
  // Creations answer the new id as text, or as `{id}`.
  const idSchema = z.union([
    z.string().min(1),
    z.object({ id: z.string().min(1) }).transform((value) => value.id),
  ]);
  const create = async (path: string, purpose: string, data: unknown, signal: AbortSignal) =>
    (await send("POST", path, purpose, signal, idSchema, { data })).value;
  /** Deletes by id; one Verda no longer knows is not an error. */
  const remove = async (path: string, purpose: string, signal: AbortSignal) => {
    try {
      await send("DELETE", path, purpose, signal, z.unknown());
    } catch (error) {
      if (machineErrorKind(error) !== "gone") throw error;
    }
  };

  return {
    instanceTypes: (signal: AbortSignal) =>
      read("/instance-types", "listing instance types", signal, z.array(instanceTypeSchema), {
        currency: "usd",
      }),
    /** Instance types available now, per location code, for spot or on-demand. */
    async availability(spot: boolean, signal: AbortSignal): Promise<Map<string, Set<string>>> {
      const purpose = `listing ${spot ? "spot" : "on-demand"} availability`;
      const entries = await read("/instance-availability", purpose, signal, availabilitySchema, {
        is_spot: String(spot),
      });
      return new Map(entries.map((entry) => [entry.location_code, new Set(entry.availabilities ?? [])]));
    },
    sshKeys: (signal: AbortSignal) => read("/ssh-keys", "listing SSH keys", signal, z.array(namedSchema)),
    addSshKey: (name: string, key: string, signal: AbortSignal) =>
      create("/ssh-keys", `adding SSH key ${name}`, { name, key }, signal),
    deleteSshKey: (id: string, signal: AbortSignal) =>
      remove(`/ssh-keys/${encodeURIComponent(id)}`, `deleting SSH key ${id}`, signal),
    /**
     * Every startup script, page by page: `GET /scripts` takes `page` and `pageSize` (at most 100)
     * since 2026-03-30 (https://docs.verda.com/welcome-to-verda/release-notes/verda-api-changes/); a
     * page shorter than asked is the last. (`skyward down` must find every pool's script.)
     */
    async scripts(signal: AbortSignal) {
      const all: VerdaNamed[] = [];
      for (let page = 1; ; page += 1) {
        const params = { page: String(page), pageSize: "100" };
        const found = await read("/scripts", "listing startup scripts", signal, z.array(namedSchema), params);
        const fresh = found.filter((script) => !all.some((seen) => seen.id === script.id));
        all.push(...fresh);
        // A page of scripts all seen before: an API that ignores `page` answered the same list again.
        if (found.length < 100 || fresh.length === 0) return all;
      }
    },
    addScript: (name: string, script: string, signal: AbortSignal) =>
      create("/scripts", `adding startup script ${name}`, { name, script }, signal),
    deleteScript: (id: string, signal: AbortSignal) =>
      remove(`/scripts/${encodeURIComponent(id)}`, `deleting startup script ${id}`, signal),
    deploy: (body: Record<string, unknown>, signal: AbortSignal) =>
      create("/instances", `deploying a ${String(body.instance_type)} instance`, body, signal),
    instances: (signal: AbortSignal) =>
      read("/instances", "listing instances", signal, z.array(instanceSchema)),
    instance: (id: string, signal: AbortSignal) =>
      read(`/instances/${encodeURIComponent(id)}`, `reading instance ${id}`, signal, instanceSchema),

    /**
     * Deletes instances and the OS volumes given (`PUT /instances`, action `delete`, `volume_ids`,
     * `delete_permanently`: past the trash). A 207 is read instance by instance; a refusal of the
     * whole call counts for each instance asked.
     */
    async deleteInstances(
      instances: readonly { id: string; volumeId?: string | null | undefined }[],
      signal: AbortSignal,
    ): Promise<Map<string, MachineDeleteOutcome>> {
      const ids = instances.map((instance) => instance.id);
      const volumeIds = instances.flatMap((instance) => (instance.volumeId ? [instance.volumeId] : []));
      const outcomes = new Map<string, MachineDeleteOutcome>();
      try {
        const { status, value } = await send(
          "PUT",
          "/instances",
          `deleting instance(s) ${ids.join(", ")}`,
          signal,
          z.union([actionResultsSchema, z.unknown()]),
          { data: { action: "delete", id: ids, volume_ids: volumeIds, delete_permanently: true } },
        );
        for (const id of ids) outcomes.set(id, "deleted");
        if (status === 207) {
          const results = parseProviderAnswer(
            actionResultsSchema,
            value,
            "the results of a delete",
            identity,
          );
          for (const result of results) {
            if (result.status === "success") continue;
            const message = `Verda refused to delete instance ${result.instanceId}: ${result.error ?? "no reason given"}`;
            const kind = classifyVerdaError({ statusCode: result.statusCode ?? 400, message });
            const statusKind = result.statusCode === 404 ? "gone" : kind;
            outcomes.set(
              result.instanceId,
              statusKind === "gone" || statusKind === "busy"
                ? statusKind
                : { error: new VerdaApiError({ kind: kind ?? "bad-request", message }) },
            );
          }
        }
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        const kind = machineErrorKind(error);
        for (const id of ids) outcomes.set(id, kind === "gone" || kind === "busy" ? kind : { error });
      }
      return outcomes;
    },
  };
}

/** A client of one Verda project. */
export type VerdaClient = ReturnType<typeof createVerdaClient>;
