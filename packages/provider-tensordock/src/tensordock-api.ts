/**
 * The parts of TensorDock's v2 API (`https://dashboard.tensordock.com/api/v2`, a bearer token) the
 * provider uses, with zod schemas for what comes back, its documented rate limit and how its errors
 * are told apart:
 *
 * - `GET /locations` — deployment locations, each with its GPUs, their prices per hour and per resource,
 *   the most that can be deployed there and its network features;
 * - `POST /instances` — create a VM at a location (`location_id`), its GPUs, vCPUs, RAM and storage, an
 *   SSH key, a dedicated IP and a `cloud_init`;
 * - `GET /instances`, `GET /instances/{id}`, `DELETE /instances/{id}`.
 *
 * Reference: https://dashboard.tensordock.com/api/docs
 */
import {
  answerListSchema,
  answerNumberSchema,
  answerOptionalListSchema,
  answerTextSchema,
  defineMachineApi,
  type MachineProviderError,
  type MachineRateLimits,
} from "@skyward/provider-utils";
import { z } from "zod";

/**
 * "API requests are limited to 100 requests per minute per organization", excess answered 429
 * (https://dashboard.tensordock.com/api/docs/getting-started, "Rate Limiting").
 */
export const TENSORDOCK_RATE_LIMITS: MachineRateLimits = {
  account: {
    requests: 100,
    perSeconds: 60,
    source: "https://dashboard.tensordock.com/api/docs/getting-started",
  },
};

/**
 * TensorDock's API: its client (token from `apiKey`, else `TENSORDOCK_API_TOKEN`). It answers most refusals
 * with HTTP 400 and a JSON:API `detail`; the words tell them apart
 * (https://dashboard.tensordock.com/api/docs/instance-creation: at least one GPU, 100 GB, a balance of $1).
 */
export const tensordockApi = defineMachineApi({
  provider: "tensordock",
  errorName: "TensorDockApiError",
  label: "TensorDock",
  apiKeyVariable: "TENSORDOCK_API_TOKEN",
  rateLimits: TENSORDOCK_RATE_LIMITS,
  classify({ statusCode, message }) {
    if (statusCode === undefined || statusCode >= 500 || statusCode === 429) return undefined;
    if (
      /no available|capacity|insufficient (gpu|resources)|not enough|out of stock|unavailable/i.test(message)
    )
      return "capacity";
    if (/balance|insufficient funds|payment/i.test(message)) return "account";
    if (/limit reached|quota/i.test(message)) return "quota";
    return undefined;
  },
});

/** A failed call to TensorDock's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const TensorDockApiError = tensordockApi.ApiError;
export type TensorDockApiError = MachineProviderError;

export const TENSORDOCK_API_URL = "https://dashboard.tensordock.com/api/v2";

const text = answerTextSchema;
const number = answerNumberSchema;

const locationGpuSchema = z.looseObject({
  v0Name: z.string(),
  displayName: text,
  max_count: number,
  price_per_hr: number,
  resources: z.looseObject({ max_vcpus: number, max_ram_gb: number, max_storage_gb: number }).nullish(),
  pricing: z.looseObject({ per_vcpu_hr: number, per_gb_ram_hr: number, per_gb_storage_hr: number }).nullish(),
  network_features: z.looseObject({ dedicated_ip_available: z.boolean().nullish() }).nullish(),
});
export type LocationGpu = z.infer<typeof locationGpuSchema>;

/** One location; a location without GPUs lists none. */
const locationSchema = z.looseObject({
  id: z.string(),
  city: text,
  stateprovince: text,
  country: text,
  gpus: answerOptionalListSchema(locationGpuSchema),
});

export type Location = z.infer<typeof locationSchema>;

/** `GET /locations` (https://dashboard.tensordock.com/api/docs/fetch-hostnodes). */
export const locationsAnswerSchema = z.looseObject({
  data: z.looseObject({ locations: answerListSchema(locationSchema) }),
});

const instanceFieldsSchema = z.looseObject({
  name: text,
  status: text,
  ipAddress: z.string().nullish(),
  // A map of internal port to external port in the list, a list of forwards in `GET /instances/{id}`.
  portForwards: z.unknown().optional(),
  rateHourly: number.optional(),
  location_id: text,
  resources: z.looseObject({ gpus: z.unknown().optional() }).nullish(),
});

/** An instance as the API answers it: fields under `attributes` (or, in some answers, beside `id`), flattened. */
export const instanceSchema = z.preprocess(
  (raw) => {
    if (typeof raw !== "object" || raw === null) return raw;
    const { attributes, ...rest } = raw as { attributes?: unknown };
    return typeof attributes === "object" && attributes !== null ? { ...rest, ...attributes } : rest;
  },
  instanceFieldsSchema.extend({ id: z.string() }),
);

export type TensorDockInstance = z.output<typeof instanceSchema>;

/** `GET /instances`: `{data: {instances: […]}}` (https://dashboard.tensordock.com/api/docs/instance-management). */
export const instancesAnswerSchema = z.looseObject({
  data: z.looseObject({ instances: answerListSchema(instanceSchema) }),
});

/** `POST /instances`: `{data: {type, id, name, status}}` (https://dashboard.tensordock.com/api/docs/instance-creation). */
export const createdAnswerSchema = z.looseObject({ data: instanceSchema });

/**
 * `GET /instances/{id}`: documented as the bare instance, `{type, id, name, status, ipAddress,
 * portForwards: [{internal_port, external_port}]}` ("Get Instance",
 * https://dashboard.tensordock.com/api/docs/instance-management); the list's `{data: …}` envelope is
 * accepted too, as some answers carry it.
 */
export const instanceAnswerSchema = z.union([
  z.looseObject({ data: instanceSchema }).transform((answer) => answer.data),
  instanceSchema,
]);
