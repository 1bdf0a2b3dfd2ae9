/**
 * The parts of Hyperstack's Infrahub API (`https://infrahub-api.nexgencloud.com/v1`, the key in the
 * `api_key` header) the provider uses, with zod schemas for what comes back:
 *
 * - `GET /core/flavors` — hardware configurations grouped by GPU and region, with `stock_available`;
 * - `GET /pricebook` — hourly prices by resource name (a bare array);
 * - `GET /core/images?region=` — OS images grouped by region and type;
 * - `POST|GET /core/environments`, `DELETE /core/environments/{id}` — one environment per cluster;
 * - `POST|GET /core/keypairs`, `DELETE /core/keypair/{id}` — the cluster's SSH key, inside its environment;
 * - `POST|GET /core/virtual-machines`, `GET|DELETE /core/virtual-machines/{id}` — the VMs;
 * - `POST /core/virtual-machines/{id}/sg-rules` — a firewall rule on one VM.
 *
 * Reference: https://docs.hyperstack.cloud/docs/api-reference/ (`openapi/hyperstack.json`).
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

/** A failed call to Hyperstack's API: the HTTP status (when there was an answer) and whether retrying may help. */
export class HyperstackApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "hyperstack", name: "HyperstackApiError" });
  }

  /** True for a {@link HyperstackApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is HyperstackApiError {
    return ProviderApiError.isInstance(error) && error.provider === "hyperstack";
  }
}

/** Hyperstack's API: its client (key from `apiKey`, else `HYPERSTACK_API_KEY`, sent as `api_key`), key lookup and answer parsing. */
export const hyperstackApi = defineProviderApi({
  label: "Hyperstack",
  apiKeyVariable: "HYPERSTACK_API_KEY",
  apiKeyHeader: "api_key",
  createError: (options) => new HyperstackApiError(options),
});

/** Hyperstack's API root. */
export const HYPERSTACK_API_URL = "https://infrahub-api.nexgencloud.com/v1";

const listOf = answerListSchema;

const text = answerTextSchema;

/** One flavor (Flavor_Fields). */
export const flavorSchema = z.looseObject({
  id: z.number(),
  name: z.string(),
  region_name: text,
  cpu: answerNumberSchema,
  ram: answerNumberSchema,
  disk: answerNumberSchema,
  ephemeral: answerNumberSchema,
  gpu: text,
  gpu_count: answerNumberSchema,
  stock_available: z.boolean().nullish(),
});

/** A flavor. */
export type Flavor = z.infer<typeof flavorSchema>;

/** `GET /core/flavors`. */
export const flavorsAnswerSchema = z.looseObject({
  data: listOf(z.looseObject({ gpu: text, region_name: text, flavors: listOf(flavorSchema) })),
});

/** `GET /pricebook`: a bare array. */
export const pricebookAnswerSchema = z.array(z.looseObject({ name: z.string(), value: answerNumberSchema }));

/** `GET /core/images`. */
export const imagesAnswerSchema = z.looseObject({
  images: listOf(
    z.looseObject({
      region_name: text,
      images: listOf(
        z.looseObject({ id: z.number(), name: z.string(), region_name: text, created_at: text }),
      ),
    }),
  ),
});

/** An environment. */
export const environmentSchema = z.looseObject({ id: z.number(), name: z.string(), region: text });

/** `POST /core/environments`. */
export const createEnvironmentAnswerSchema = z.looseObject({ environment: environmentSchema });

/** `GET /core/environments`. */
export const environmentsAnswerSchema = z.looseObject({ environments: listOf(environmentSchema) });

/** A key pair as `GET /core/keypairs` lists it (its environment by name). */
export const keypairSchema = z.looseObject({ id: z.number(), name: z.string(), environment: z.unknown() });

/** `GET /core/keypairs`. */
export const keypairsAnswerSchema = z.looseObject({ keypairs: listOf(keypairSchema) });

/** A VM (Instance_Fields), as far as the provider reads it. */
export const vmSchema = z.looseObject({
  id: z.number(),
  name: text,
  status: text,
  environment: z.looseObject({ id: z.number().nullish(), name: text, region: text }).nullish(),
  flavor: z.looseObject({ name: text }).nullish(),
  fixed_ip: z.string().nullish(),
  floating_ip: z.string().nullish(),
  floating_ip_status: z.string().nullish(),
  security_rules: listOf(
    z.looseObject({ protocol: text, remote_ip_prefix: text, port_range_min: z.number().nullish() }),
  ),
  created_at: text,
  labels: listOf(z.string()),
});

/** A VM. */
export type Vm = z.infer<typeof vmSchema>;

/** `GET /core/virtual-machines` (one page). */
export const vmsAnswerSchema = z.looseObject({
  count: z.number().nullish(),
  instances: listOf(vmSchema),
});

/** `GET /core/virtual-machines/{id}`. */
export const vmAnswerSchema = z.looseObject({ instance: vmSchema.nullish() });

/** `POST /core/virtual-machines`. */
export const createVmsAnswerSchema = z.looseObject({ instances: listOf(vmSchema) });

/** Parses `value` with `schema`, or fails with a {@link HyperstackApiError} saying the answer was not understood. */
export const parseAnswer = hyperstackApi.parseAnswer;
