/**
 * Verda's public REST API (https://api.verda.com/v1/docs), as the provider uses it: an OAuth 2.0
 * client-credentials token (`POST /oauth2/token`) sent as a bearer token (see `tokenClient`); instance
 * types and their availability; SSH keys; startup scripts; instances. Verda documents no rate limit: a
 * 429's `Retry-After` is honoured.
 */
import { ConfigurationError } from "@skyward/core";
import {
  answerMessage,
  answerNumberSchema,
  defineMachineApi,
  type FetchFunction,
  type GrantedToken,
  kindOfStatus,
  type MachineDeleteOutcome,
  type MachineErrorKind,
  type MachineErrorStructure,
  type MachineProviderError,
  machineErrorKind,
  type ProviderHttpSettings,
  readNumberedPages,
  removeUnlessGone,
  tokenClient,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Verda's API, as its docs name it. */
export const VERDA_API_URL = "https://api.verda.com/v1";

/** Verda's API: its error class and classifier; its calls carry a token (`tokenClient`), not a fixed key. */
export const verdaApi = defineMachineApi({
  provider: "verda",
  errorName: "VerdaApiError",
  label: "Verda",
  // Named when a request's token is refused: the token is granted for this secret (no fixed key is sent).
  apiKeyVariable: "VERDA_CLIENT_SECRET",
  classify: classifyVerdaError,
});

/** A failed call to Verda's API (or no answer at all), with its `kind`. */
export type VerdaApiError = MachineProviderError;
export const VerdaApiError = verdaApi.ApiError;

const BUSY =
  /provisioning|not ready|still (being )?(created|deployed)|cannot .*in (its )?current (state|status)/i;

/**
 * Verda answers refusals as `{code, message}` with a 4xx or 503; the words tell them apart. "Operating
 * system is not valid for this instance type" is a bad request (the type's `supported_os` lists the
 * images it takes); deleting an instance still provisioning is refused for now.
 */
export function classifyVerdaError({
  statusCode,
  message,
}: Pick<MachineErrorStructure, "statusCode" | "message">) {
  if (statusCode === 401) return "auth" as const;
  if (statusCode === 429) return undefined;
  if (/operating system is not valid|image .*not (valid|supported)/i.test(message))
    return "bad-request" as const;
  if (BUSY.test(message)) return "busy" as const;
  if (/not enough|no capacity|insufficient resources|not available|out of stock|sold out/i.test(message))
    return "capacity" as const;
  if (/quota|limit (exceeded|reached)/i.test(message)) return "quota" as const;
  if (/balance|insufficient funds|payment/i.test(message)) return "account" as const;
  return undefined;
}

const size = z.object({ size_in_gigabytes: answerNumberSchema.optional() }).partial().nullish();
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
  memory: size,
  gpu_memory: size,
  supported_os: z.array(z.string()).nullish(),
});
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
export type VerdaInstance = z.output<typeof instanceSchema>;

/** A project SSH key or startup script. */
const namedSchema = z.object({ id: z.string(), name: z.string() });

/** `PUT /instances` when some actions failed: 207, one result per instance ("Perform action on instance or multiple instances"). */
const actionResultsSchema = z.array(
  z.object({
    instanceId: z.string(),
    status: z.string(),
    error: z.string().nullish(),
    statusCode: z.number().nullish(),
  }),
);

/** Creations answer the new id as text, or as `{id}`. */
const idSchema = z.union([
  z.string().min(1),
  z.object({ id: z.string().min(1) }).transform((value) => value.id),
]);

/** How the client reaches Verda and with what credentials. */
export type VerdaClientSettings = Omit<ProviderHttpSettings, "apiKey"> & {
  readonly apiUrl: string;
  readonly clientId?: string | undefined;
  readonly clientSecret?: string | undefined;
  readonly fetch?: FetchFunction | undefined;
};

/** The client id and secret from the settings or the environment; a `ConfigurationError` naming both otherwise. */
export function resolveVerdaCredentials(settings: Pick<VerdaClientSettings, "clientId" | "clientSecret">) {
  const clientId = (settings.clientId ?? process.env.VERDA_CLIENT_ID ?? "").trim();
  const clientSecret = (settings.clientSecret ?? process.env.VERDA_CLIENT_SECRET ?? "").trim();
  const missing = (path: string, variable: string, what: string) =>
    (path === "clientId" ? clientId : clientSecret) === ""
      ? [{ path, message: `Verda client ${what} is missing: set ${variable} or pass ${path}` }]
      : [];
  const issues = [
    ...missing("clientId", "VERDA_CLIENT_ID", "id"),
    ...missing("clientSecret", "VERDA_CLIENT_SECRET", "secret"),
  ];
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return { clientId, clientSecret };
}

/** A token for the client credentials ("Generate access token"); not retried: a refusal fails at once. */
async function grantToken(settings: VerdaClientSettings, signal: AbortSignal): Promise<GrantedToken> {
  const { clientId, clientSecret } = resolveVerdaCredentials(settings);
  const purpose = "getting an access token (POST /oauth2/token)";
  const fail = (kind: MachineErrorKind, message: string, statusCode?: number) =>
    new VerdaApiError({ kind, message, ...(statusCode !== undefined ? { statusCode } : {}) });
  let response: Response;
  try {
    response = await (settings.fetch ?? globalThis.fetch)(
      `${settings.apiUrl.replace(/\/+$/, "")}/oauth2/token`,
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
    throw fail(
      "unavailable",
      `Verda's API could not be reached while ${purpose}: ${(error as Error).message}`,
    );
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
      `Verda rejected the client credentials (HTTP ${status}) while ${purpose}: set VERDA_CLIENT_ID and VERDA_CLIENT_SECRET, or pass clientId and clientSecret`,
      status,
    );
  if (status < 200 || status >= 300) {
    const detail = (answerMessage(body) ?? "no details").split(clientSecret).join("[redacted]");
    throw fail(
      kindOfStatus(status),
      `Verda's API answered HTTP ${status} while ${purpose}: ${detail}`,
      status,
    );
  }
  const tokenSchema = z.object({
    access_token: z.string().min(1),
    expires_in: z.number().positive().optional(),
  });
  const answer = verdaApi.parseAnswer(tokenSchema, body, "the access token");
  return { token: answer.access_token, expiresInSeconds: answer.expires_in };
}

/** A client for Verda's API; no request is sent and no credential looked up until the first call. */
export function createVerdaClient(settings: VerdaClientSettings) {
  const client = tokenClient(verdaApi, settings, (signal) => grantToken(settings, signal));
  const create = (path: string, purpose: string, data: unknown, signal: AbortSignal) =>
    client.call(path === "/instances" ? "create" : "other", "POST", path, idSchema, purpose, signal, {
      data,
    });
  const remove = (path: string, purpose: string, signal: AbortSignal) =>
    removeUnlessGone(client, path, purpose, signal).then(() => undefined);
  const named = z.array(namedSchema);

  return {
    instanceTypes: (signal: AbortSignal) =>
      client.read(
        "offers",
        "/instance-types",
        z.array(instanceTypeSchema),
        "listing instance types",
        signal,
        {
          currency: "usd",
        },
      ),
    /** Instance types available now, per location code, for spot or on-demand. */
    async availability(spot: boolean, signal: AbortSignal): Promise<Map<string, Set<string>>> {
      const purpose = `listing ${spot ? "spot" : "on-demand"} availability`;
      const params = { is_spot: String(spot) };
      const entries = await client.read(
        "offers",
        "/instance-availability",
        availabilitySchema,
        purpose,
        signal,
        params,
      );
      return new Map(entries.map((entry) => [entry.location_code, new Set(entry.availabilities ?? [])]));
    },
    sshKeys: (signal: AbortSignal) => client.read("other", "/ssh-keys", named, "listing SSH keys", signal),
    addSshKey: (name: string, key: string, signal: AbortSignal) =>
      create("/ssh-keys", `adding SSH key ${name}`, { name, key }, signal),
    deleteSshKey: (id: string, signal: AbortSignal) =>
      remove(`/ssh-keys/${encodeURIComponent(id)}`, `deleting SSH key ${id}`, signal),
    /**
     * Every startup script: `GET /scripts` takes `page` and `pageSize` (at most 100) since 2026-03-30
     * (https://docs.verda.com/welcome-to-verda/release-notes/verda-api-changes/), and `skyward down`
     * must find every pool's script.
     */
    scripts: (signal: AbortSignal) =>
      readNumberedPages<z.output<typeof namedSchema>>({
        api: verdaApi,
        list: "/scripts",
        asked: 100,
        shortPageEnds: true,
        idOf: (script) => script.id,
        read: async (page) => ({
          items: await client.read("other", "/scripts", named, "listing startup scripts", signal, {
            page: String(page),
            pageSize: "100",
          }),
        }),
      }),
    addScript: (name: string, script: string, signal: AbortSignal) =>
      create("/scripts", `adding startup script ${name}`, { name, script }, signal),
    deleteScript: (id: string, signal: AbortSignal) =>
      remove(`/scripts/${encodeURIComponent(id)}`, `deleting startup script ${id}`, signal),
    deploy: (body: Record<string, unknown>, signal: AbortSignal) =>
      create("/instances", `deploying a ${String(body.instance_type)} instance`, body, signal),
    instances: (signal: AbortSignal) =>
      client.read("list", "/instances", z.array(instanceSchema), "listing instances", signal),
    instance: (id: string, signal: AbortSignal) =>
      client.read(
        "get",
        `/instances/${encodeURIComponent(id)}`,
        instanceSchema,
        `reading instance ${id}`,
        signal,
      ),

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
      const volume_ids = instances.flatMap((instance) => (instance.volumeId ? [instance.volumeId] : []));
      const outcomes = new Map<string, MachineDeleteOutcome>(ids.map((id) => [id, "deleted"]));
      try {
        const { status, data } = await client.http.send("delete", {
          method: "PUT",
          url: `${settings.apiUrl.replace(/\/+$/, "")}/instances`,
          data: { action: "delete", id: ids, volume_ids, delete_permanently: true },
          idempotent: true,
          purpose: `deleting instance(s) ${ids.join(", ")}`,
          signal,
        });
        if (status !== 207) return outcomes;
        for (const result of verdaApi.parseAnswer(actionResultsSchema, data, "the results of a delete")) {
          if (result.status === "success") continue;
          const message = `Verda refused to delete instance ${result.instanceId}: ${result.error ?? "no reason given"}`;
          const kind =
            result.statusCode === 404
              ? "gone"
              : classifyVerdaError({ statusCode: result.statusCode ?? 400, message });
          outcomes.set(
            result.instanceId,
            kind === "gone" || kind === "busy"
              ? kind
              : { error: new VerdaApiError({ kind: kind ?? "bad-request", message }) },
          );
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
