/** TensorDock's v2 API (https://dashboard.tensordock.com/api/docs, a bearer token) as the README tells. */
import type { MachineProviderError, MachineRateLimits } from "@skyward/provider-utils";
import {
  answerNumberFields,
  answerNumbers,
  answerTextFields,
  defineMachineApi,
  endpoint,
  errorTable,
  LEFT_TO_STATUS,
  listEndpoint,
  answerListSchema as listOf,
  MARKET_REFUSALS,
  machineEndpoints,
  answerOptionalListSchema as optionalListOf,
} from "@skyward/provider-utils";
import { z } from "zod";

const DOCS = "https://dashboard.tensordock.com/api/docs";

/** "API requests are limited to 100 requests per minute per organization", excess answered 429 ("Rate Limiting"). */
export const TENSORDOCK_RATE_LIMITS: MachineRateLimits = {
  account: { requests: 100, perSeconds: 60, source: `${DOCS}/getting-started` },
};

/** Its client; refusals, HTTP 400 with a JSON:API `detail` (`/instance-creation`), told apart by their words. */
export const tensordockApi = defineMachineApi({
  label: "TensorDock",
  apiKeyVariable: "TENSORDOCK_API_TOKEN",
  rateLimits: TENSORDOCK_RATE_LIMITS,
  classify: errorTable([LEFT_TO_STATUS, ...MARKET_REFUSALS]),
});

/** A failed call to TensorDock's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const TensorDockApiError = tensordockApi.ApiError;
export type TensorDockApiError = MachineProviderError;

const locationGpuSchema = z.looseObject({
  v0Name: z.string(),
  ...answerTextFields("displayName"),
  ...answerNumberFields("max_count", "price_per_hr"),
  resources: z.looseObject(answerNumberFields("max_vcpus", "max_ram_gb", "max_storage_gb")).nullish(),
  pricing: z.looseObject(answerNumberFields("per_vcpu_hr", "per_gb_ram_hr", "per_gb_storage_hr")).nullish(),
  network_features: z.looseObject({ dedicated_ip_available: z.boolean().nullish() }).nullish(),
});

const locationSchema = z.looseObject({
  id: z.string(),
  ...answerTextFields("city", "stateprovince", "country"),
});
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
    ...answerTextFields("name", "status", "location_id", "ipAddress"),
    // A map of internal port to external port in the list, a list of forwards in `GET /instances/{id}`.
    portForwards: z.unknown().optional(),
    ...answerNumbers("rateHourly"),
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

// One page of instances: TensorDock documents no paging.
export const tensordockCalls = machineEndpoints(tensordockApi, {
  locations: endpoint("GET /locations", locationsAnswerSchema, "listing locations", "offers"),
  create: endpoint("POST /instances", createdAnswerSchema, "creating an instance", "create"),
  get: endpoint("GET /instances/{id}", instanceAnswerSchema, "looking up instance {id}", "get"),
  instances: listEndpoint("GET /instances", instancesAnswerSchema, "listing instances", {
    paced: "list",
    items: (answer) => answer.data.instances,
  }),
});
/** The calls of one client. */
export type TensorDockCalls = ReturnType<typeof tensordockCalls>;
