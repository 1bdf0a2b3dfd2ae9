/**
 * The parts of Vast.ai's REST API (`https://console.vast.ai`) the provider uses, with zod schemas for
 * what comes back (https://docs.vast.ai/api-reference/openapi.yaml unless said otherwise):
 *
 * - `POST /api/v0/bundles/` — offer search; the body is the query JSON (`{"gpu_name": {"in": […]}, …}`)
 *   and `type`: `on-demand` prices offers on demand, `bid` at their minimum bid ("bid (interruptible):
 *   uses minimum bid price"), so one search gives one market's prices;
 * - `PUT /api/v0/asks/{id}/` — rent an offer (an "ask"): image, disk, label, `onstart`, `runtype`, `env`,
 *   and `price` (the bid, $/h) for an interruptible instance; answers `{"success": true, "new_contract": id}`;
 *   at most one call per 4.5 s (https://docs.vast.ai/api-reference/rate-limits-and-errors);
 * - `GET /api/v1/instances/` — the account's instances, 25 a page (`select_filters`, `order_by`,
 *   `limit`, `after_token` → `next_token`), replacing the deprecated v0 list (as vast-cli's
 *   `_fetch_all_instances_v1` pages it: https://github.com/vast-ai/vast-cli/blob/master/vast.py);
 * - `GET /api/v0/instances/{id}/` — one instance; `DELETE /api/v0/instances/{id}/` — destroy;
 * - `POST /api/v0/instances/{id}/ssh/` — attach a public key to that instance only
 *   (https://docs.vast.ai/api-reference/openapi/yaml/attach_ssh.yaml);
 * - `GET /api/v0/users/current/` — the key's user: how a 404 to a bad key is told from a 404 to a gone
 *   offer or instance (Vast.ai answers an unknown key with 404, not 401).
 */
import {
  answerListSchema,
  answerNumberSchema,
  defineMachineApi,
  type JsonCall,
  type JsonSend,
  type MachineErrorKind,
  type MachineErrorStructure,
  type MachineProviderError,
  type MachineRateLimits,
} from "@skyward/provider-utils";
import { z } from "zod";
import type { ParsedSettings } from "./vastai-settings.js";

/** The `error` code of Vast.ai's `{success, error, msg}` refusal (https://docs.vast.ai/api-reference/rate-limits-and-errors). */
function errorCode(answer: unknown): string {
  const code =
    typeof answer === "object" && answer !== null ? (answer as { error?: unknown }).error : undefined;
  return typeof code === "string" ? code : "";
}

/**
 * Vast.ai answers most refusals with a 400 and an `error` code: `no_such_instance` is gone,
 * `invalid_price` a bid below the machine's minimum (price), `no_such_ask` and "no longer available" an
 * ask taken by someone else (capacity: the next ask). A 404 is gone — or a key Vast.ai does not know,
 * which the provider tells apart by asking `GET /users/current/`.
 */
export function classifyVastError(failure: MachineErrorStructure): MachineErrorKind | undefined {
  const status = failure.statusCode;
  if (status === undefined || status >= 500 || status === 429 || status === 401 || status === 403)
    return undefined;
  const code = errorCode(failure.answer);
  if (code === "no_such_instance" || /no_such_instance|not found|does not exist/i.test(failure.message))
    return "gone";
  if (code === "invalid_price" || /bid.*(too low|below)|below.*min(imum)?.?bid/i.test(failure.message))
    return "price";
  if (
    code === "no_such_ask" ||
    /no_such_ask|no longer available|not available|unavailable|already rented|insufficient/i.test(
      failure.message,
    )
  )
    return "capacity";
  return undefined;
}

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

const RATE_LIMITS_PAGE = "https://docs.vast.ai/api-reference/rate-limits-and-errors";

/**
 * Vast.ai's documented per-endpoint limits, per key: "search offers: 10 per minute", "show instance: one
 * per 2 s", "destroy instance: one per 3 s", "show instances: one per 1 s"
 * (https://docs.vast.ai/api-reference/rate-limits-and-errors). Creates (one per 4.5 s, then a 12 s
 * penalty) have their own settings. Every request of those endpoints is paced by them, so that a
 * pool's instance watch looking every node up at once never sets off a storm of 429s.
 */
export const VAST_RATE_LIMITS = {
  endpoints: {
    offers: { requests: 10, perSeconds: 60, source: RATE_LIMITS_PAGE },
    get: { requests: 1, perSeconds: 2, source: RATE_LIMITS_PAGE },
    delete: { requests: 1, perSeconds: 3, source: RATE_LIMITS_PAGE },
    list: { requests: 1, perSeconds: 1, source: RATE_LIMITS_PAGE },
  },
} as const satisfies MachineRateLimits;

/** Vast.ai's API root (`/v0/…`, and `/v1/instances/`). */
const VAST_API_ROOT = "https://console.vast.ai/api";

const number = answerNumberSchema;

const listOf = answerListSchema;

/** One search result: an offer (ask) of a machine's GPUs. */
export const vastOfferSchema = z.looseObject({
  id: z.number(),
  machine_id: z.number().nullish(),
  gpu_name: z.string(),
  num_gpus: z.number(),
  gpu_ram: number,
  cpu_cores: number,
  cpu_cores_effective: number,
  cpu_ram: number,
  cpu_arch: z.string().nullish(),
  gpu_frac: number,
  disk_space: number,
  dph_total: number,
  min_bid: number,
  reliability: number,
  reliability2: number,
  geolocation: z.string().nullish(),
  direct_port_count: number,
});

/** An offer as the search returns it. */
export type VastOffer = z.infer<typeof vastOfferSchema>;

/** The search's answer. */
export const searchAnswerSchema = z.looseObject({
  offers: listOf(vastOfferSchema),
});

/** The answer to renting an ask. */
export const createAnswerSchema = z.looseObject({
  new_contract: z.number().nullish(),
  error: z.string().nullish(),
  msg: z.string().nullish(),
});

// A port exposed but not (yet) mapped is listed with null: `{"22/tcp": null}`.
const portMappingSchema = z
  .array(z.looseObject({ HostIp: z.string().nullish(), HostPort: z.union([z.string(), z.number()]) }))
  .nullish();

/** An instance as `GET /instances/` lists it. */
export const vastInstanceSchema = z.looseObject({
  id: z.number(),
  label: z.string().nullish(),
  actual_status: z.string().nullish(),
  intended_status: z.string().nullish(),
  ssh_host: z.string().nullish(),
  ssh_port: number,
  public_ipaddr: z.string().nullish(),
  // Documented as an object of Docker port mappings; some answers list bare ports instead.
  ports: z.union([z.record(z.string(), portMappingSchema), z.array(z.unknown())]).nullish(),
  is_bid: z.boolean().nullish(),
  dph_total: number,
  start_date: number,
});

/** An instance. */
export type VastInstance = z.infer<typeof vastInstanceSchema>;

/**
 * One page of `GET /api/v1/instances/`. Each instance is parsed on its own: one Vast.ai lists in a shape
 * not foreseen here is kept by id and label alone (enough to find and destroy it), not the end of the list.
 */
export const instancesPageSchema = z.looseObject({
  instances: listOf(z.unknown()).transform((items) =>
    items.flatMap((item): VastInstance[] => {
      const parsed = vastInstanceSchema.safeParse(item);
      if (parsed.success) return [parsed.data];
      const fallback = z.looseObject({ id: z.number(), label: z.string().nullish() }).safeParse(item);
      return fallback.success
        ? [vastInstanceSchema.parse({ id: fallback.data.id, label: fallback.data.label ?? null })]
        : [];
    }),
  ),
  next_token: z.string().nullish(),
});

/** `GET /instances/{id}/`: one instance under `instances`, or nothing when Vast.ai no longer knows it. */
export const instanceAnswerSchema = z.looseObject({
  instances: vastInstanceSchema.nullish(),
});

/** Calls to Vast.ai, each paced by its endpoint's documented limit (or the setting's). */
export interface VastClient {
  /** The API key (a `ConfigurationError` when none is set). */
  resolveApiKey(): string;
  /** A typed call below the API's root (`/v0/bundles/`), paced by its endpoint's limit. */
  call: JsonCall;
}

/**
 * The client of the settings. A 404 is checked against the key first, since Vast.ai answers an unknown
 * key with 404 on every endpoint: then it is the rejected key it is, not a gone offer or "no capacity".
 */
export function vastClient(settings: ParsedSettings): VastClient {
  const names = { offers: "search", get: "get", list: "list", delete: "destroy" } as const;
  const rateLimits: MachineRateLimits = {
    endpoints: Object.fromEntries(
      Object.entries(names).map(([endpoint, setting]) => [
        endpoint,
        { ...VAST_RATE_LIMITS.endpoints[endpoint as keyof typeof names], ...settings.rateLimits[setting] },
      ]),
    ),
  };
  /** Whether `GET /users/current/` accepted the key: then a 404 means what it says. */
  let keyAccepted = false;

  async function checkKey(paced: JsonSend, purpose: string, signal: AbortSignal): Promise<void> {
    try {
      const url = `${VAST_API_ROOT}/v0/users/current/`;
      await paced({ method: "GET", url, idempotent: true, purpose: "checking the API key", signal });
      keyAccepted = true;
    } catch (error) {
      if (!VastApiError.isInstance(error) || ![401, 403, 404].includes(error.statusCode ?? 0)) throw error;
      throw new VastApiError({
        kind: "auth",
        statusCode: 401,
        message: `Vast.ai rejected the API key while ${purpose} (it answers HTTP 404 to a key it does not know): set VAST_API_KEY to a valid key or pass apiKey`,
      });
    }
  }

  const client = vastaiApi.jsonClient(
    { ...settings, apiUrl: VAST_API_ROOT },
    {
      rateLimits,
      send: (paced) => async (request, endpoint) => {
        try {
          return await paced(request, endpoint);
        } catch (error) {
          if (VastApiError.isInstance(error) && error.statusCode === 404 && !keyAccepted)
            await checkKey(paced, request.purpose, request.signal);
          throw error;
        }
      },
    },
  );
  return { resolveApiKey: () => vastaiApi.resolveApiKey(settings.apiKey), call: client.json };
}
