/** Verda's REST API (https://api.verda.com/v1/docs) with an OAuth 2.0 client-credentials token, as the README tells. */
import {
  answerNumbers,
  answerTexts,
  batchDeleteOutcomes,
  type ClientCredentialsSettings,
  clientCredentialsClient,
  defineMachineApi,
  endpoint,
  errorTable,
  listEndpoint,
  MARKET_REFUSALS,
  type MachineProviderError,
  machineEndpoints,
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

/** Verda's refusals (`{code, message}`, a 4xx or 503) told apart by their words, first match wins. */
const classifyVerdaError = errorTable([
  { kind: "auth", status: [401] },
  { kind: undefined, status: [429] },
  // The type's `supported_os` lists the images it takes.
  { kind: "bad-request", words: /operating system is not valid|image .*not (valid|supported)/i },
  // Deleting an instance still provisioning is refused for now.
  { kind: "busy", words: /provisioning|not ready|still (being )?(created|deployed)/i },
  { kind: "busy", words: /cannot .*in (its )?current (state|status)/i },
  ...MARKET_REFUSALS,
]);

export const verdaApi = defineMachineApi({
  label: "Verda",
  apiKeyVariable: VERDA_CREDENTIALS.secretVariable,
  classify: classifyVerdaError,
});

/** A failed call to Verda's API (or no answer at all), with its `kind`. */
export type VerdaApiError = MachineProviderError;
export const VerdaApiError = verdaApi.ApiError;

const size = z.object(answerNumbers("size_in_gigabytes")).nullish();
const instanceType = z.object({
  instance_type: z.string(),
  ...answerNumbers("price_per_hour", "spot_price"),
  model: z.string().nullish(),
  cpu: z.object(answerNumbers("number_of_cores")).nullish(),
  gpu: z.object({ description: z.string().nullish(), ...answerNumbers("number_of_gpus") }).nullish(),
  memory: size,
  gpu_memory: size,
  supported_os: z.array(z.string()).nullish(),
});
export type VerdaInstanceType = z.output<typeof instanceType>;
/** The instance types available now, per location code (`GET /instance-availability?is_spot=…`). */
export type VerdaCapacity = z.output<typeof capacity>;

const instance = z.object({
  id: z.string(),
  status: z.string(),
  ...answerTexts("instance_type", "hostname", "description", "created_at", "ip", "os_volume_id"),
  ...answerNumbers("price_per_hour"),
  is_spot: z.boolean().nullish(),
});
export type VerdaInstance = z.output<typeof instance>;

/** Project SSH keys and startup scripts. */
const named = z.array(z.object({ id: z.string(), name: z.string() }));
/** Creations answer the new id as text, or as `{id}`. */
const idSchema = z.union([z.string().min(1), z.object({ id: z.string().min(1) }).transform(({ id }) => id)]);
const capacity = z.array(
  z.object({ location_code: z.string(), availabilities: z.array(z.string()).nullish() }),
);
/** `PUT /instances` when some actions failed: 207, one result per instance ("Perform action on instance or multiple instances"). */
const actionResult = { instanceId: z.string(), status: z.string(), ...answerTexts("error") };
const actionResults = z.array(z.object({ ...actionResult, ...answerNumbers("statusCode") }));

// `GET /scripts` is paged (`pageSize` at most 100) since 2026-03-30, and `skyward down` must find every pool's
// script (https://docs.verda.com/welcome-to-verda/release-notes/verda-api-changes/); the other lists are not.
const inUsd = { paced: "offers", query: { currency: "usd" } } as const;
const verdaEndpoints = machineEndpoints(verdaApi, {
  instanceTypes: endpoint("GET /instance-types", z.array(instanceType), "listing instance types", inUsd),
  capacity: endpoint("GET /instance-availability", capacity, "listing capacity", "offers"),
  sshKeys: endpoint("GET /ssh-keys", named, "listing SSH keys"),
  scripts: listEndpoint("GET /scripts", named, "listing startup scripts", {
    items: (scripts) => scripts,
    pages: { numbered: { size: 100, shortPageEnds: true } },
  }),
  sshKey: endpoint("POST /ssh-keys", idSchema, "adding an SSH key"),
  script: endpoint("POST /scripts", idSchema, "adding a startup script"),
  deleteSshKey: endpoint("DELETE /ssh-keys/{id}", undefined, "deleting SSH key {id}", "delete"),
  deleteScript: endpoint("DELETE /scripts/{id}", undefined, "deleting startup script {id}", "delete"),
  deploy: endpoint("POST /instances", idSchema, "deploying an instance", "create"),
  instances: listEndpoint("GET /instances", z.array(instance), "listing instances", {
    paced: "list",
    items: (all) => all,
  }),
  instance: endpoint("GET /instances/{id}", instance, "reading instance {id}", "get"),
});

/** A client for Verda's API; no request is sent and no credential looked up until the first call. */
export function createVerdaClient(settings: ClientCredentialsSettings) {
  const client = clientCredentialsClient(verdaApi, VERDA_CREDENTIALS, settings);
  return {
    ...verdaEndpoints(client),
    /** Deletes instances with their OS volumes past the trash (`PUT /instances`); a 207 read per instance (README: Termination). */
    deleteInstances(instances: readonly Pick<VerdaInstance, "id" | "os_volume_id">[], signal: AbortSignal) {
      const id = instances.map((instance) => instance.id);
      const volume_ids = instances.flatMap(({ os_volume_id }) => (os_volume_id ? [os_volume_id] : []));
      return batchDeleteOutcomes(id, signal, async () => {
        const { status, data } = await client.http.send("delete", {
          method: "PUT",
          url: `${settings.apiUrl.replace(/\/+$/, "")}/instances`,
          data: { action: "delete", id, volume_ids, delete_permanently: true },
          idempotent: true,
          purpose: `deleting instance(s) ${id.join(", ")}`,
          signal,
        });
        const results = status === 207 ? verdaApi.parseAnswer(actionResults, data, "a delete's results") : [];
        return results.flatMap(({ instanceId, status: result, error: reason, statusCode: code }) => {
          if (result === "success") return [];
          const message = `Verda refused to delete instance ${instanceId}: ${reason ?? "no reason given"}`;
          const statusCode = code ?? 400;
          const kind =
            statusCode === 404 ? "gone" : classifyVerdaError({ statusCode, message, answer: null });
          return [[instanceId, new VerdaApiError({ kind: kind ?? "bad-request", message })] as const];
        });
      });
    },
  };
}
