/**
 * The parts of RunPod's APIs the provider uses, with zod schemas for what comes back:
 *
 * - GraphQL (`https://api.runpod.io/graphql`): `gpuTypes` with prices per cloud (`lowestPrice`),
 *   `cpuFlavors` with their `specifics` (stock and price of one CPU instance size),
 *   `podFindAndDeployOnDemand`, `podRentInterruptable` (a spot pod at a bid per GPU), `pod`,
 *   `myself { pods }` and `podTerminate`;
 * - REST v1 (`https://rest.runpod.io/v1/pods`): creating CPU pods, which GraphQL only offers through an
 *   undocumented template.
 *
 * `runpod-sdk` on npm covers serverless endpoints only, not pods, so none of this goes through it.
 */
import {
  answerMessage,
  answerNumberSchema,
  defineProviderApi,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpClient,
} from "@skyward/provider-utils";
import { z } from "zod";

/** A failed call to RunPod's API: the HTTP status (when there was an answer) and whether retrying may help. */
export class RunPodApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "runpod", name: "RunPodApiError" });
  }

  /** True for a {@link RunPodApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is RunPodApiError {
    return ProviderApiError.isInstance(error) && error.provider === "runpod";
  }
}

/** RunPod's API: its client (key from `apiKey`, else `RUNPOD_API_KEY`), key lookup and answer parsing. */
export const runpodApi = defineProviderApi({
  label: "RunPod",
  apiKeyVariable: "RUNPOD_API_KEY",
  createError: (options) => new RunPodApiError(options),
});

/** RunPod's GraphQL endpoint. */
export const RUNPOD_GRAPHQL_URL = "https://api.runpod.io/graphql";
/** RunPod's REST API, version 1. */
export const RUNPOD_REST_URL = "https://rest.runpod.io/v1";

const price = answerNumberSchema.transform((value) => (value !== null && value > 0 ? value : null));
const count = z
  .number()
  .nullish()
  .transform((value) => value ?? null);

const lowestPriceSchema = z
  .looseObject({
    minimumBidPrice: price,
    uninterruptablePrice: price,
    minVcpu: count,
    minMemory: count,
    stockStatus: z.string().nullish(),
  })
  .nullish();

/** One `gpuTypes` entry, as far as the provider reads it. */
export const gpuTypeSchema = z.looseObject({
  id: z.string(),
  displayName: z.string().nullish(),
  memoryInGb: z.number().nullish(),
  maxGpuCount: count,
  maxGpuCountSecureCloud: count,
  maxGpuCountCommunityCloud: count,
  secureCloud: z.boolean().nullish(),
  communityCloud: z.boolean().nullish(),
  securePrice: price,
  communityPrice: price,
  secureSpotPrice: price,
  communitySpotPrice: price,
  secureLowest: lowestPriceSchema,
  communityLowest: lowestPriceSchema,
});

/** A GPU type with its prices. */
export type GpuType = z.infer<typeof gpuTypeSchema>;

/** One `cpuFlavors` entry. */
export const cpuFlavorSchema = z.looseObject({
  id: z.string(),
  displayName: z.string().nullish(),
  minVcpu: z.number().nullish(),
  maxVcpu: z.number().nullish(),
  ramMultiplier: z.number().nullish(),
});

/** A CPU flavor (`cpu3c`, `cpu5g`…): vCPU range and GB of memory per vCPU. */
export type CpuFlavor = z.infer<typeof cpuFlavorSchema>;

const cpuSpecificsSchema = z.looseObject({
  stockStatus: z.string().nullish(),
  securePrice: price,
});

/** A pod as `pod`, `myself { pods }` and the create mutations return it. */
export const podSchema = z.looseObject({
  id: z.string(),
  name: z.string().nullish(),
  desiredStatus: z.string().nullish(),
  costPerHr: price,
  env: z.union([z.array(z.string()), z.record(z.string(), z.string())]).nullish(),
  runtime: z
    .looseObject({
      uptimeInSeconds: z.number().nullish(),
      ports: z
        .array(
          z.looseObject({
            ip: z.string().nullish(),
            isIpPublic: z.boolean().nullish(),
            privatePort: z.number().nullish(),
            publicPort: z.number().nullish(),
            type: z.string().nullish(),
          }),
        )
        .nullish(),
    })
    .nullish(),
});

/** A pod. */
export type Pod = z.infer<typeof podSchema>;

/** The fields asked for on every pod. */
export const POD_FIELDS =
  "id name desiredStatus costPerHr env runtime { uptimeInSeconds ports { ip isIpPublic privatePort publicPort type } }";

const LOWEST_PRICE_FIELDS = "minimumBidPrice uninterruptablePrice minVcpu minMemory stockStatus";

/** What `lowestPrice` is asked for: a GPU count and, when the spec sets them, CPU and memory minimums. */
export interface LowestPriceFilter {
  readonly gpuCount: number;
  readonly minVcpuCount?: number;
  readonly minMemoryInGb?: number;
  readonly dataCenterId?: string;
}

function lowestPriceInput(filter: LowestPriceFilter, secureCloud: boolean): string {
  const fields = [`gpuCount: ${Math.trunc(filter.gpuCount)}`, `secureCloud: ${secureCloud}`];
  if (filter.minVcpuCount !== undefined) fields.push(`minVcpuCount: ${Math.ceil(filter.minVcpuCount)}`);
  if (filter.minMemoryInGb !== undefined) fields.push(`minMemoryInGb: ${Math.ceil(filter.minMemoryInGb)}`);
  if (filter.dataCenterId !== undefined) fields.push(`dataCenterId: ${JSON.stringify(filter.dataCenterId)}`);
  return `{${fields.join(", ")}}`;
}

/** The `gpuTypes` query, with the lowest price of a pod of `gpuCount` GPUs in each cloud. */
export function gpuTypesQuery(filter: LowestPriceFilter): string {
  return [
    "query SkywardGpuTypes {",
    "  gpuTypes {",
    "    id displayName memoryInGb maxGpuCount maxGpuCountSecureCloud maxGpuCountCommunityCloud",
    "    secureCloud communityCloud securePrice communityPrice secureSpotPrice communitySpotPrice",
    `    secureLowest: lowestPrice(input: ${lowestPriceInput(filter, true)}) { ${LOWEST_PRICE_FIELDS} }`,
    `    communityLowest: lowestPrice(input: ${lowestPriceInput(filter, false)}) { ${LOWEST_PRICE_FIELDS} }`,
    "  }",
    "}",
  ].join("\n");
}

/** The `cpuFlavors` query. */
export const CPU_FLAVORS_QUERY =
  "query SkywardCpuFlavors { cpuFlavors { id displayName minVcpu maxVcpu ramMultiplier } }";

/** The query for the price and stock of one instance size (`cpu3c-2-4`) of each flavor, aliased `f0`, `f1`… */
export function cpuSpecificsQuery(sizes: readonly { flavorId: string; instanceId: string }[]): string {
  const parts = sizes.map(
    (size, index) =>
      `  f${index}: cpuFlavors(input: {id: ${JSON.stringify(size.flavorId)}}) { id specifics(input: {instanceId: ${JSON.stringify(size.instanceId)}}) { stockStatus securePrice } }`,
  );
  return ["query SkywardCpuPrices {", ...parts, "}"].join("\n");
}

/** Creates an on-demand GPU pod. */
export const DEPLOY_ON_DEMAND_MUTATION = `mutation SkywardDeployOnDemand($input: PodFindAndDeployOnDemandInput!) {
  podFindAndDeployOnDemand(input: $input) { ${POD_FIELDS} }
}`;

/** Creates an interruptible (spot) GPU pod at a bid per GPU. */
export const DEPLOY_INTERRUPTIBLE_MUTATION = `mutation SkywardRentInterruptable($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { ${POD_FIELDS} }
}`;

/** One pod by id; `null` when RunPod no longer knows it. */
export const POD_QUERY = `query SkywardPod($podId: String!) {
  pod(input: {podId: $podId}) { ${POD_FIELDS} }
}`;

/** Every pod of the account. */
export const MY_PODS_QUERY = `query SkywardPods {
  myself { pods { ${POD_FIELDS} } }
}`;

/** Terminates (deletes) a pod. */
export const TERMINATE_MUTATION = `mutation SkywardTerminate($input: PodTerminateInput!) {
  podTerminate(input: $input)
}`;

/** The outcome of a GraphQL call: its data, or the first error's message. */
export interface GraphqlResult {
  readonly data: Record<string, unknown> | undefined;
  readonly error: string | undefined;
}

/**
 * Runs a GraphQL operation. HTTP failures reject with {@link RunPodApiError}; GraphQL errors (HTTP 200
 * with `errors`) come back as `error`, for the caller to tell "no capacity" or "not found" from the rest.
 * Authentication errors reported that way reject like an HTTP 401.
 */
export async function graphql(
  http: ProviderHttpClient,
  options: {
    query: string;
    variables?: Record<string, unknown>;
    purpose: string;
    idempotent: boolean;
    signal: AbortSignal;
  },
): Promise<GraphqlResult> {
  const { data } = await http.send({
    method: "POST",
    url: RUNPOD_GRAPHQL_URL,
    data: { query: options.query, variables: options.variables ?? {} },
    idempotent: options.idempotent,
    purpose: options.purpose,
    signal: options.signal,
  });
  const body = typeof data === "object" && data !== null ? (data as Record<string, unknown>) : {};
  const error =
    Array.isArray(body.errors) && body.errors.length > 0
      ? (answerMessage(body) ?? "unknown error")
      : undefined;
  if (error !== undefined && /unauthori[sz]ed|api key|authenticat/i.test(error)) {
    throw new RunPodApiError({
      statusCode: 401,
      message: `RunPod rejected the API key while ${options.purpose}: ${error}; set RUNPOD_API_KEY to a valid key or pass apiKey`,
    });
  }
  const payload =
    typeof body.data === "object" && body.data !== null ? (body.data as Record<string, unknown>) : undefined;
  return { data: payload, error };
}

/** The data of a GraphQL result, or a {@link RunPodApiError} naming what failed. */
export function requireData(result: GraphqlResult, purpose: string): Record<string, unknown> {
  if (result.error !== undefined || result.data === undefined) {
    throw new RunPodApiError({
      message: `RunPod's API refused ${purpose}: ${result.error ?? "the answer had no data"}`,
    });
  }
  return result.data;
}

/** Parses `value` with `schema`, or fails with a {@link RunPodApiError} saying the answer was not understood. */
export const parseAnswer = runpodApi.parseAnswer;

/** The schemas of whole answers. */
export const answers = {
  gpuTypes: z.looseObject({
    gpuTypes: z
      .array(gpuTypeSchema)
      .nullish()
      .transform((value) => value ?? []),
  }),
  cpuFlavors: z.looseObject({
    cpuFlavors: z
      .array(cpuFlavorSchema)
      .nullish()
      .transform((value) => value ?? []),
  }),
  cpuSpecifics: z.record(
    z.string(),
    z
      .array(z.looseObject({ id: z.string(), specifics: cpuSpecificsSchema.nullish() }))
      .nullish()
      .transform((value) => value ?? []),
  ),
  pod: z.looseObject({ pod: podSchema.nullish() }),
  myPods: z.looseObject({
    myself: z
      .looseObject({
        pods: z
          .array(podSchema)
          .nullish()
          .transform((value) => value ?? []),
      })
      .nullish(),
  }),
} as const;
