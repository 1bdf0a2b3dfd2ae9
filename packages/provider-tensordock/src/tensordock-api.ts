/**
 * The parts of TensorDock's v2 API (`https://dashboard.tensordock.com/api/v2`, a bearer token) the
 * provider uses, with zod schemas for what comes back:
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
  answerTextSchema,
  defineProviderApi,
  ProviderApiError,
  type ProviderApiErrorOptions,
} from "@skyward/provider-utils";
import { z } from "zod";

/** A failed call to TensorDock's API: the HTTP status (when there was an answer) and whether retrying may help. */
export class TensorDockApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "tensordock", name: "TensorDockApiError" });
  }

  /** True for a {@link TensorDockApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is TensorDockApiError {
    return ProviderApiError.isInstance(error) && error.provider === "tensordock";
  }
}

/** TensorDock's API: its client (token from `apiKey`, else `TENSORDOCK_API_TOKEN`), key lookup and answer parsing. */
export const tensordockApi = defineProviderApi({
  label: "TensorDock",
  apiKeyVariable: "TENSORDOCK_API_TOKEN",
  createError: (options) => new TensorDockApiError(options),
});

/** TensorDock's API root. */
export const TENSORDOCK_API_URL = "https://dashboard.tensordock.com/api/v2";

const listOf = answerListSchema;

const text = answerTextSchema;

/** One GPU of a location. */
export const locationGpuSchema = z.looseObject({
  v0Name: z.string(),
  displayName: text,
  max_count: answerNumberSchema,
  price_per_hr: answerNumberSchema,
  resources: z
    .looseObject({
      max_vcpus: answerNumberSchema,
      max_ram_gb: answerNumberSchema,
      max_storage_gb: answerNumberSchema,
    })
    .nullish(),
  pricing: z
    .looseObject({
      per_vcpu_hr: answerNumberSchema,
      per_gb_ram_hr: answerNumberSchema,
      per_gb_storage_hr: answerNumberSchema,
    })
    .nullish(),
  network_features: z.looseObject({ dedicated_ip_available: z.boolean().nullish() }).nullish(),
});

/** A GPU of a location. */
export type LocationGpu = z.infer<typeof locationGpuSchema>;

/** One location. */
export const locationSchema = z.looseObject({
  id: z.string(),
  city: text,
  stateprovince: text,
  country: text,
  gpus: listOf(locationGpuSchema),
});

/** A location. */
export type Location = z.infer<typeof locationSchema>;

/** `GET /locations`. */
export const locationsAnswerSchema = z.looseObject({
  data: z.looseObject({ locations: listOf(locationSchema) }),
});

const instanceFieldsSchema = z.looseObject({
  name: text,
  status: text,
  ipAddress: z.string().nullish(),
  // Documented as a map of internal port to external port; some answers list the forwards instead.
  portForwards: z.unknown().optional(),
  rateHourly: answerNumberSchema.optional(),
  location_id: text,
  resources: z
    .looseObject({
      gpus: z.unknown().optional(),
    })
    .nullish(),
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

/** An instance. */
export type TensorDockInstance = z.output<typeof instanceSchema>;

/** `GET /instances`. */
export const instancesAnswerSchema = z.looseObject({
  data: z.looseObject({ instances: listOf(instanceSchema) }),
});

/** `GET /instances/{id}` and `POST /instances`. */
export const instanceAnswerSchema = z.looseObject({ data: instanceSchema });

/** Parses `value` with `schema`, or fails with a {@link TensorDockApiError} saying the answer was not understood. */
export const parseAnswer = tensordockApi.parseAnswer;
