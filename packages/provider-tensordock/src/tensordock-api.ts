/**
 * TensorDock's v2 API (https://dashboard.tensordock.com/api/docs, a bearer token): the shapes its
 * locations and instances answer, its rate limit, how refusals are told apart, its endpoints.
 */

import type { MachineProviderError, MachineRateLimits } from "@skyward/provider-utils";
import {
  defineMachineApi,
  endpoint,
  errorTable,
  LEFT_TO_STATUS,
  listEndpoint,
  answerListSchema as listOf,
  machineEndpoints,
  answerNumberSchema as number,
  answerOptionalListSchema as optionalListOf,
  answerTextSchema as text,
} from "@skyward/provider-utils";
import { z } from "zod";

const DOCS = "https://dashboard.tensordock.com/api/docs";

/** "API requests are limited to 100 requests per minute per organization", excess answered 429 ("Rate Limiting"). */
export const TENSORDOCK_RATE_LIMITS: MachineRateLimits = {
  account: { requests: 100, perSeconds: 60, source: `${DOCS}/getting-started` },
};

/**
 * Its client (token from `apiKey`, else `TENSORDOCK_API_TOKEN`). Most refusals are HTTP 400 with a
 * JSON:API `detail`: the words tell them apart (`/instance-creation`: at least one GPU, 100 GB, a
 * balance of $1); no answer, a 5xx or a 429 is left to its status (retried).
 */
export const tensordockApi = defineMachineApi({
  provider: "tensordock",
  errorName: "TensorDockApiError",
  label: "TensorDock",
  apiKeyVariable: "TENSORDOCK_API_TOKEN",
  rateLimits: TENSORDOCK_RATE_LIMITS,
  classify: errorTable([
    LEFT_TO_STATUS,
    {
      words: /no available|capacity|insufficient (gpu|resources)|not enough|out of stock/i,
      kind: "capacity",
    },
    { words: /unavailable/i, kind: "capacity" },
    { words: /balance|insufficient funds|payment/i, kind: "account" },
    { words: /limit reached|quota/i, kind: "quota" },
  ]),
});

/** A failed call to TensorDock's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const TensorDockApiError = tensordockApi.ApiError;
export type TensorDockApiError = MachineProviderError;

const locationGpuSchema = z.looseObject({
  v0Name: z.string(),
  displayName: text,
  max_count: number,
  price_per_hr: number,
  resources: z.looseObject({ max_vcpus: number, max_ram_gb: number, max_storage_gb: number }).nullish(),
  pricing: z.looseObject({ per_vcpu_hr: number, per_gb_ram_hr: number, per_gb_storage_hr: number }).nullish(),
  network_features: z.looseObject({ dedicated_ip_available: z.boolean().nullish() }).nullish(),
});

const locationSchema = z.looseObject({ id: z.string(), city: text, stateprovince: text, country: text });
/** `GET /locations` (`/fetch-hostnodes`). */
const locationsAnswerSchema = z.looseObject({
  data: z.looseObject({
    locations: listOf(locationSchema.extend({ gpus: optionalListOf(locationGpuSchema) })),
  }),
});

/** An instance, its fields under `attributes` (or, in some answers, beside `id`) flattened. */
const instanceSchema = z.preprocess(
  (raw) => {
    if (typeof raw !== "object" || raw === null) return raw;
    const { attributes, ...rest } = raw as { attributes?: unknown };
    return typeof attributes === "object" && attributes !== null ? { ...rest, ...attributes } : rest;
  },
  z.looseObject({
    id: z.string(),
    name: text,
    status: text,
    ipAddress: z.string().nullish(),
    // A map of internal port to external port in the list, a list of forwards in `GET /instances/{id}`.
    portForwards: z.unknown().optional(),
    rateHourly: number.optional(),
    location_id: text,
    resources: z.looseObject({ gpus: z.unknown().optional() }).nullish(),
  }),
);
export type TensorDockInstance = z.output<typeof instanceSchema>;

/** `GET /instances` (`/instance-management`). */
const instancesAnswerSchema = z.looseObject({ data: z.looseObject({ instances: listOf(instanceSchema) }) });

/** `POST /instances`: `{data: {type, id, name, status}}` (`/instance-creation`). */
const createdAnswerSchema = z.looseObject({ data: instanceSchema });

/** `GET /instances/{id}`: documented bare ("Get Instance", `/instance-management`); some answers carry `{data: …}`. */
const instanceAnswerSchema = z.union([createdAnswerSchema.transform(({ data }) => data), instanceSchema]);

/** The endpoints the provider calls (one page of instances: TensorDock documents no paging). */
export const tensordockCalls = machineEndpoints(tensordockApi, {
  locations: endpoint("GET /locations", locationsAnswerSchema, "listing locations", "offers"),
  create: endpoint("POST /instances", createdAnswerSchema, "creating an instance", "create"),
  get: endpoint("GET /instances/{id}", instanceAnswerSchema, "looking up instance {id}", "get"),
  instances: listEndpoint("GET /instances", instancesAnswerSchema, "listing instances", {
    paced: "list",
    items: (answer) => answer.data.instances,
  }),
});
