/**
 * The parts of Vast.ai's REST API (`https://console.vast.ai/api`) the provider uses, as endpoints with
 * zod schemas of what comes back (https://docs.vast.ai/api-reference/openapi.yaml unless said otherwise).
 * A search's `type` says the market it prices (`on-demand`, or `bid` at the minimum bid); a rent answers
 * `{"success": true, "new_contract": id}`; the v1 instance list replaces the deprecated v0 one (vast-cli's
 * `_fetch_all_instances_v1`: https://github.com/vast-ai/vast-cli/blob/master/vast.py); a key attached to
 * an instance reaches that one only (…/openapi/yaml/attach_ssh.yaml).
 */
import {
  answerListSchema,
  answerNumberFields,
  answerTexts,
  defineMachineApi,
  endpoint,
  errorTable,
  keyCheckedOn404,
  lenientItemsSchema,
  listEndpoint,
  type MachineProviderError,
  machineEndpoints,
  settingRateLimits,
} from "@skyward/provider-utils";
import { z } from "zod";
import type { ParsedSettings } from "./vastai-settings.js";

/**
 * Refusals are mostly a 400 with an `error` code: `no_such_instance` is gone, `invalid_price` a bid
 * below the machine's minimum, `no_such_ask` or "no longer available" an ask someone else took
 * (capacity: the next ask). A 404 is gone, or a key Vast.ai does not know (see {@link vastClient}).
 */
export const classifyVastError = errorTable([
  { status: ["none", "5xx", 429, 401, 403], kind: undefined },
  { code: ["no_such_instance"], kind: "gone" },
  { words: /no_such_instance|not found|does not exist/i, kind: "gone" },
  { code: ["invalid_price"], kind: "price" },
  { words: /bid.*(too low|below)|below.*min(imum)?.?bid/i, kind: "price" },
  { code: ["no_such_ask"], kind: "capacity" },
  {
    words: /no_such_ask|no longer available|not available|unavailable|already rented|insufficient/i,
    kind: "capacity",
  },
]);

/** Vast.ai's API: its client (key from `apiKey`, else `VAST_API_KEY`), key lookup and answer parsing. */
export const vastaiApi = defineMachineApi({
  provider: "vastai",
  errorName: "VastApiError",
  label: "Vast.ai",
  apiKeyVariable: "VAST_API_KEY",
  classify: classifyVastError,
});

/** A failed call to Vast.ai's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const VastApiError = vastaiApi.ApiError;
export type VastApiError = MachineProviderError;

const API_URL = "https://console.vast.ai/api";
const RATE_LIMITS_PAGE = "https://docs.vast.ai/api-reference/rate-limits-and-errors";

/**
 * Vast.ai's documented limits per key (search 10 a minute, show instance one per 2 s, destroy one per
 * 3 s, show instances one per 1 s: {@link RATE_LIMITS_PAGE}), so that a pool's instance watch looking
 * every node up at once never sets off a storm of 429s. Creates have their own settings.
 */
const VAST_RATE_LIMITS = {
  offers: { requests: 10, perSeconds: 60, source: RATE_LIMITS_PAGE },
  get: { requests: 1, perSeconds: 2, source: RATE_LIMITS_PAGE },
  delete: { requests: 1, perSeconds: 3, source: RATE_LIMITS_PAGE },
  list: { requests: 1, perSeconds: 1, source: RATE_LIMITS_PAGE },
} as const;

const text = z.string().nullish();

const vastOfferSchema = z.looseObject({
  id: z.number(),
  machine_id: z.number().nullish(),
  gpu_name: z.string(),
  num_gpus: z.number(),
  ...answerNumberFields("gpu_ram", "cpu_cores", "cpu_cores_effective", "cpu_ram", "gpu_frac", "disk_space"),
  ...answerNumberFields("dph_total", "min_bid", "reliability", "reliability2", "direct_port_count"),
  ...answerTexts("cpu_arch", "geolocation"),
});

/** An offer (an ask of a machine's GPUs) as the search returns it. */
export type VastOffer = z.infer<typeof vastOfferSchema>;

// A port exposed but not (yet) mapped is listed with null: `{"22/tcp": null}`.
const portMappingSchema = z.array(z.looseObject({ HostPort: z.union([z.string(), z.number()]) })).nullish();

/** An instance as `GET /instances/` lists it. */
export const vastInstanceSchema = z.looseObject({
  id: z.number(),
  ...answerTexts("label", "actual_status", "intended_status", "ssh_host", "public_ipaddr"),
  ...answerNumberFields("ssh_port", "dph_total", "start_date"),
  // Documented as an object of Docker port mappings; some answers list bare ports instead.
  ports: z.union([z.record(z.string(), portMappingSchema), z.array(z.unknown())]).nullish(),
  is_bid: z.boolean().nullish(),
});

export type VastInstance = z.infer<typeof vastInstanceSchema>;

/**
 * One page of `GET /v1/instances/`. An instance in a shape not foreseen here is kept by id and label alone
 * (enough to find and destroy it); one without a numeric id fails the page (see `lenientItemsSchema`).
 */
const instancesPageSchema = z.looseObject({
  instances: lenientItemsSchema(
    vastInstanceSchema,
    z.object({ id: z.number(), label: text }).pipe(vastInstanceSchema),
    "id",
    "an instance without a numeric id",
  ),
  next_token: text,
});

const answers = {
  search: z.looseObject({ offers: answerListSchema(vastOfferSchema) }),
  rent: z.looseObject({ new_contract: z.number().nullish(), error: text, msg: text }),
  // One instance under `instances`, or nothing when Vast.ai no longer knows it.
  get: z.looseObject({ instances: vastInstanceSchema.nullish() }),
};

/** The endpoints the provider calls, each paced by its documented limit. */
const vastEndpoints = machineEndpoints(vastaiApi, {
  search: endpoint("POST /v0/bundles/", answers.search, "searching offers", {
    paced: "offers",
    idempotent: true,
  }),
  rent: endpoint("PUT /v0/asks/{askId}/", answers.rent, "renting offer {askId}", {
    paced: "create",
    idempotent: false,
  }),
  attachKey: endpoint(
    "POST /v0/instances/{id}/ssh/",
    undefined,
    "attaching Skyward's SSH key to instance {id}",
    { idempotent: true },
  ),
  get: endpoint("GET /v0/instances/{id}/", answers.get, "looking up instance {id}", {
    paced: "get",
    query: { owner: "me" },
  }),
  list: listEndpoint("GET /v1/instances/", instancesPageSchema, "listing instances", {
    paced: "list",
    query: { select_filters: "{}", order_by: JSON.stringify([{ col: "id", dir: "asc" }]), limit: "25" },
    items: "instances",
    pages: { token: { param: "after_token", next: (page) => page.next_token } },
  }),
  destroy: endpoint("DELETE /v0/instances/{id}/", undefined, "destroying instance {id}", "delete"),
});

export type VastClient = ReturnType<typeof vastClient>;

/**
 * The client of the settings, each call paced by its endpoint's limit (the settings' over the documented
 * ones). Vast.ai answers an unknown key with 404 on every endpoint: a 404 is checked against the key first.
 */
export function vastClient(settings: ParsedSettings) {
  const names = { offers: "search", get: "get", list: "list", delete: "destroy" } as const;
  const rateLimits = settingRateLimits(VAST_RATE_LIMITS, names, settings, RATE_LIMITS_PAGE);
  const send = keyCheckedOn404({
    ApiError: VastApiError,
    url: `${API_URL}/v0/users/current/`,
    rejected: (purpose) =>
      `Vast.ai rejected the API key while ${purpose} (it answers HTTP 404 to a key it does not know): set VAST_API_KEY to a valid key or pass apiKey`,
  });
  const client = vastaiApi.jsonClient({ ...settings, apiUrl: API_URL }, { rateLimits, send });
  return { ...vastEndpoints(client), resolveApiKey: () => vastaiApi.resolveApiKey(settings.apiKey) };
}
