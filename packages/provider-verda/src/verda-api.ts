/**
 * Verda's public REST API (https://api.verda.com/v1/docs), as the provider uses it: an OAuth 2.0
 * client-credentials token (`POST /oauth2/token`) sent as a bearer token; instance types and their
 * availability; SSH keys; startup scripts; instances. Verda documents no rate limit: a 429's
 * `Retry-After` is honoured.
 */
import {
  answerNumberSchema,
  batchDeleteOutcomes,
  type ClientCredentialsSettings,
  clientCredentialsClient,
  defineMachineApi,
  type MachineErrorStructure,
  type MachineProviderError,
  readNumberedPages,
  removeUnlessGone,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Verda's API, as its docs name it. */
export const VERDA_API_URL = "https://api.verda.com/v1";

/** Where tokens are granted and the credentials' variables (the secret is what a refused token names). */
export const VERDA_CREDENTIALS = {
  tokenPath: "/oauth2/token",
  idVariable: "VERDA_CLIENT_ID",
  secretVariable: "VERDA_CLIENT_SECRET",
};

/** Verda's API: its error class and classifier. */
export const verdaApi = defineMachineApi({
  provider: "verda",
  errorName: "VerdaApiError",
  label: "Verda",
  apiKeyVariable: VERDA_CREDENTIALS.secretVariable,
  classify: classifyVerdaError,
});

/** A failed call to Verda's API (or no answer at all), with its `kind`. */
export type VerdaApiError = MachineProviderError;
export const VerdaApiError = verdaApi.ApiError;

/** Verda's refusals (`{code, message}`, a 4xx or 503) told apart by their words, first match wins. */
const REFUSALS = [
  // The type's `supported_os` lists the images it takes.
  [/operating system is not valid|image .*not (valid|supported)/i, "bad-request"],
  // Deleting an instance still provisioning is refused for now.
  [
    /provisioning|not ready|still (being )?(created|deployed)|cannot .*in (its )?current (state|status)/i,
    "busy",
  ],
  [/not enough|no capacity|insufficient resources|not available|out of stock|sold out/i, "capacity"],
  [/quota|limit (exceeded|reached)/i, "quota"],
  [/balance|insufficient funds|payment/i, "account"],
] as const;

/** The kind of a Verda refusal; undefined leaves it to the status. */
export function classifyVerdaError({
  statusCode,
  message,
}: Pick<MachineErrorStructure, "statusCode" | "message">) {
  if (statusCode === 401) return "auth" as const;
  if (statusCode === 429) return undefined;
  return REFUSALS.find(([words]) => words.test(message))?.[1];
}

const number = answerNumberSchema.optional();
const size = z.object({ size_in_gigabytes: number }).partial().nullish();
const instanceTypeSchema = z.object({
  instance_type: z.string(),
  price_per_hour: number,
  spot_price: number,
  model: z.string().nullish(),
  cpu: z.object({ number_of_cores: number }).partial().nullish(),
  gpu: z.object({ description: z.string().nullish(), number_of_gpus: number }).partial().nullish(),
  memory: size,
  gpu_memory: size,
  supported_os: z.array(z.string()).nullish(),
});
export type VerdaInstanceType = z.output<typeof instanceTypeSchema>;

const instanceSchema = z.object({
  id: z.string(),
  instance_type: z.string().nullish(),
  price_per_hour: number,
  hostname: z.string().nullish(),
  description: z.string().nullish(),
  status: z.string(),
  created_at: z.string().nullish(),
  ip: z.string().nullish(),
  is_spot: z.boolean().nullish(),
  os_volume_id: z.string().nullish(),
});
export type VerdaInstance = z.output<typeof instanceSchema>;

/** Project SSH keys and startup scripts. */
const namedSchema = z.array(z.object({ id: z.string(), name: z.string() }));
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

/** What a pool registers at Verda: the path below the API root and the name in messages. */
const RESOURCES = { sshKey: ["/ssh-keys", "SSH key"], script: ["/scripts", "startup script"] } as const;
type Resource = keyof typeof RESOURCES;

/** A client for Verda's API; no request is sent and no credential looked up until the first call. */
export function createVerdaClient(settings: ClientCredentialsSettings) {
  const client = clientCredentialsClient(verdaApi, VERDA_CREDENTIALS, settings);
  const create = (path: string, purpose: string, data: unknown, signal: AbortSignal) =>
    client.call(path === "/instances" ? "create" : "other", "POST", path, idSchema, purpose, signal, {
      data,
    });
  const types = z.array(instanceTypeSchema);
  const availability = z.array(
    z.object({ location_code: z.string(), availabilities: z.array(z.string()).nullish() }),
  );
  const scriptPage = (page: number, signal: AbortSignal) =>
    client.read("other", "/scripts", namedSchema, "listing startup scripts", signal, {
      page: String(page),
      pageSize: "100",
    });

  return {
    instanceTypes: (signal: AbortSignal) =>
      client.read("offers", "/instance-types", types, "listing instance types", signal, { currency: "usd" }),
    /** Instance types available now, per location code, for spot or on-demand. */
    async availability(spot: boolean, signal: AbortSignal): Promise<Map<string, Set<string>>> {
      const purpose = `listing ${spot ? "spot" : "on-demand"} availability`;
      const params = { is_spot: String(spot) };
      const entries = await client.read(
        "offers",
        "/instance-availability",
        availability,
        purpose,
        signal,
        params,
      );
      return new Map(entries.map((entry) => [entry.location_code, new Set(entry.availabilities ?? [])]));
    },
    add: (resource: Resource, name: string, body: Record<string, string>, signal: AbortSignal) =>
      create(RESOURCES[resource][0], `adding ${RESOURCES[resource][1]} ${name}`, { name, ...body }, signal),
    remove: (resource: Resource, id: string, signal: AbortSignal) => {
      const [path, noun] = RESOURCES[resource];
      return removeUnlessGone(client, `${path}/${encodeURIComponent(id)}`, `deleting ${noun} ${id}`, signal);
    },
    /**
     * Every SSH key and startup script: `GET /scripts` takes `page` and `pageSize` (at most 100) since
     * 2026-03-30 (https://docs.verda.com/welcome-to-verda/release-notes/verda-api-changes/), and
     * `skyward down` must find every pool's script.
     */
    registered: async (signal: AbortSignal) => {
      const [keys, scripts] = await Promise.all([
        client.read("other", "/ssh-keys", namedSchema, "listing SSH keys", signal),
        readNumberedPages<z.output<typeof namedSchema>[number]>({
          api: verdaApi,
          list: "/scripts",
          asked: 100,
          shortPageEnds: true,
          idOf: (script) => script.id,
          read: async (page) => ({ items: await scriptPage(page, signal) }),
        }),
      ]);
      return [
        ...keys.map((key) => ({ ...key, resource: "sshKey" as const, kind: RESOURCES.sshKey[1] })),
        ...scripts.map((script) => ({ ...script, resource: "script" as const, kind: RESOURCES.script[1] })),
      ];
    },
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
     * `delete_permanently`: past the trash). A 207 is read instance by instance.
     */
    deleteInstances: (
      instances: readonly { id: string; volumeId?: string | null }[],
      signal: AbortSignal,
    ) => {
      const ids = instances.map((instance) => instance.id);
      const volume_ids = instances.flatMap((instance) => (instance.volumeId ? [instance.volumeId] : []));
      return batchDeleteOutcomes(ids, signal, async () => {
        const { status, data } = await client.http.send("delete", {
          method: "PUT",
          url: `${settings.apiUrl.replace(/\/+$/, "")}/instances`,
          data: { action: "delete", id: ids, volume_ids, delete_permanently: true },
          idempotent: true,
          purpose: `deleting instance(s) ${ids.join(", ")}`,
          signal,
        });
        const results =
          status === 207 ? verdaApi.parseAnswer(actionResultsSchema, data, "the results of a delete") : [];
        return results.flatMap(({ instanceId, status: result, error, statusCode }) => {
          const message = `Verda refused to delete instance ${instanceId}: ${error ?? "no reason given"}`;
          const kind =
            statusCode === 404 ? "gone" : classifyVerdaError({ statusCode: statusCode ?? 400, message });
          return result === "success"
            ? []
            : [[instanceId, new VerdaApiError({ kind: kind ?? "bad-request", message })] as const];
        });
      });
    },
  };
}
