/**
 * The parts of RunPod's APIs the provider uses, with zod schemas for what comes back.
 *
 * REST API v2 (`https://api.runpod.io/v2`, https://docs.runpod.io/api-reference-v2/overview; REST v1
 * was retired on 2026-11-15 and GraphQL retires in early 2027: https://docs.runpod.io/release-notes):
 *
 * - `GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&count=N&cloud=…&minCudaVersion=…` — GPU types,
 *   their price per GPU in each cloud, the most GPUs per pod, and current pod stock (`availability`:
 *   `NONE` is sold out), per data center and per CUDA version
 *   (https://docs.runpod.io/api-reference-v2/catalog/list-gpu-types);
 * - `GET /v2/catalog/cpus?include=AVAILABILITY&product=POD` — CPU flavors: vCPU range, RAM per vCPU,
 *   price per vCPU (https://docs.runpod.io/api-reference-v2/catalog/list-cpu-types);
 * - `GET /v2/catalog/datacenters?globalNetwork=true` — the data centers with global networking
 *   (https://docs.runpod.io/api-reference-v2/catalog/list-data-centers);
 * - `POST /v2/pods` — create a GPU or CPU pod: `gpu: {id, count, minCudaVersion | allowedCudaVersions}`,
 *   `globalNetworking` (a private address other pods of the account reach on any port), `env`, `ports`,
 *   `disk`, `mounts` (https://docs.runpod.io/api-reference-v2/pods/create-a-pod); a `400` is "this GPU and
 *   data center could not be placed" (capacity) or a broken rule, told apart only by its `detail`;
 * - `GET /v2/pods`, `GET /v2/pods/{id}`, `DELETE /v2/pods/{id}` — list, look up, terminate
 *   (https://docs.runpod.io/api-reference-v2/pods/list-pods, …/get-a-pod, …/terminate-a-pod).
 *
 * GraphQL (`https://api.runpod.io/graphql`), only for what v2 does not have — interruptible (spot)
 * pods: `gpuTypes { lowestPrice { minimumBidPrice stockStatus } }` and `podRentInterruptable`
 * (https://docs.runpod.io/sdks/graphql/manage-pods).
 *
 * `runpod-sdk` on npm covers serverless endpoints only, not pods, so none of this goes through it.
 */
import {
  answerMessage,
  answerNumberSchema,
  defineMachineApi,
  type MachineErrorKind,
  type MachineErrorStructure,
  type MachineProviderError,
  type PacedClient,
} from "@skyward/provider-utils";
import { z } from "zod";

/** RunPod's words for "nothing free of that kind" (v2's 400 `detail`, GraphQL's `errors[].message`). */
const CAPACITY =
  /no longer any instances available|does not have the resources|not enough (free )?gpus|no (gpus?|instances?|machines?)( \w+)? (is |are )?available|out of stock|insufficient capacity|could not be placed/i;

/**
 * v2 answers a pod it cannot place with a 400 whose `detail` says so, and every other broken rule with
 * a 400 too: only the words tell capacity from a bad request. A 403 is a valid key that "lacks access to
 * the requested resource or action" (https://docs.runpod.io/api-reference-v2/pods/create-a-pod,
 * "Authorizations"): this account may not use that pool, not a bad key. A bid below the minimum is price.
 */
export function classifyRunPodError(failure: MachineErrorStructure): MachineErrorKind | undefined {
  if (failure.statusCode === 403) return "account";
  if (failure.statusCode !== undefined && (failure.statusCode >= 500 || failure.statusCode === 429))
    return undefined;
  if (/bid (price )?(is )?too low/i.test(failure.message)) return "price";
  if (CAPACITY.test(failure.message)) return "capacity";
  return undefined;
}

/** RunPod's API: its client (key from `apiKey`, else `RUNPOD_API_KEY`), key lookup and answer parsing. */
export const runpodApi = defineMachineApi({
  provider: "runpod",
  errorName: "RunPodApiError",
  label: "RunPod",
  apiKeyVariable: "RUNPOD_API_KEY",
  classify: classifyRunPodError,
  // The HTTP layer reads every 403 as a bad key; RunPod's is "not for this account".
  reword: (options) =>
    options.kind === "account" && options.statusCode === 403
      ? {
          ...options,
          message: options.message
            .replace(/rejected the API key \(HTTP 403\)/, "refused this account (HTTP 403)")
            .replace(/: set RUNPOD_API_KEY.*$/, `: ${answerMessage(options.answer) ?? "access denied"}`),
        }
      : options,
});

/** A failed call to RunPod's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const RunPodApiError = runpodApi.ApiError;
export type RunPodApiError = MachineProviderError;

/** RunPod's REST API, version 2. */
export const RUNPOD_API_URL = "https://api.runpod.io/v2";
/** RunPod's GraphQL endpoint (interruptible pods only). */
export const RUNPOD_GRAPHQL_URL = "https://api.runpod.io/graphql";

// Only the fields the provider reads: objects are loose, so the rest passes through unchecked.
const price = answerNumberSchema.transform((value) => (value !== null && value > 0 ? value : null));
const text = z.string().nullish();
const count = z.number().nullish();
const availability = z.enum(["NONE", "LOW", "MEDIUM", "HIGH"]).nullish();
const dataCenters = z.array(z.looseObject({ id: z.string(), availability })).nullish();
const perCloud = <T extends z.ZodType>(item: T) => z.looseObject({ secure: item, community: item }).nullish();
const lowestBid = z.looseObject({ minimumBidPrice: price, stockStatus: text }).nullish();

/** One GPU type of the v2 catalog. */
export const catalogGpuSchema = z.looseObject({
  id: z.string(),
  name: text,
  memory: count,
  secure: z.boolean().nullish(),
  community: z.boolean().nullish(),
  price: perCloud(price),
  maxCount: perCloud(count),
  availability,
  dataCenters,
  cudaVersions: z.array(z.looseObject({ version: z.string(), available: z.boolean() })).nullish(),
});

/** A GPU type with its prices and stock. */
export type CatalogGpu = z.infer<typeof catalogGpuSchema>;

/** One CPU flavor of the v2 catalog. */
export const catalogCpuSchema = z.looseObject({
  id: z.string(),
  vcpu: z.looseObject({ min: z.number(), max: z.number() }),
  ramGbPerVcpu: z.number(),
  price: z.looseObject({ securePerVcpu: price }),
  availability,
  dataCenters,
});

/** A CPU flavor (`cpu3c`, `cpu5g`…). */
export type CatalogCpu = z.infer<typeof catalogCpuSchema>;

/** A pod as v2 returns it. */
export const podSchema = z.looseObject({
  id: z.string(),
  name: text,
  status: text,
  env: z
    .record(z.string(), z.string())
    .nullish()
    .transform((value) => value ?? {}),
  cost: answerNumberSchema,
  ssh: z.looseObject({ direct: z.looseObject({ host: z.string(), port: z.number() }).nullish() }).nullish(),
  globalNetworking: z.looseObject({ ip: text }).nullish(),
  runtime: z
    .looseObject({ ports: z.array(z.looseObject({ private: count, public: count, ip: text })).nullish() })
    .nullish(),
  createdAt: text,
});

/** A pod. */
export type Pod = z.infer<typeof podSchema>;

/** The schemas of whole answers. */
export const answers = {
  gpus: z.looseObject({ gpus: z.array(catalogGpuSchema) }),
  cpus: z.looseObject({ cpus: z.array(catalogCpuSchema) }),
  dataCenters: z.looseObject({
    dataCenters: z.array(z.looseObject({ id: z.string(), globalNetwork: z.boolean().nullish() })),
  }),
  pods: z.looseObject({ pods: z.array(podSchema) }),
  spotPrices: z.looseObject({
    gpuTypes: z
      .array(z.looseObject({ id: z.string(), secureLowest: lowestBid, communityLowest: lowestBid }))
      .nullish()
      .transform((value) => value ?? []),
  }),
  rented: z.looseObject({ podRentInterruptable: z.looseObject({ id: z.string() }).nullish() }),
} as const;

/** The GraphQL query of the minimum bid per GPU of each type, for a pod of `gpuCount` GPUs, in each cloud. */
export function spotPricesQuery(gpuCount: number): string {
  const input = (secure: boolean) => `{gpuCount: ${Math.trunc(gpuCount)}, secureCloud: ${secure}}`;
  return [
    "query SkywardSpotPrices {",
    "  gpuTypes {",
    "    id",
    `    secureLowest: lowestPrice(input: ${input(true)}) { minimumBidPrice stockStatus }`,
    `    communityLowest: lowestPrice(input: ${input(false)}) { minimumBidPrice stockStatus }`,
    "  }",
    "}",
  ].join("\n");
}

/**
 * Creates an interruptible (spot) GPU pod at a bid per GPU. Its input takes `allowedCudaVersions` like
 * `podFindAndDeployOnDemand` (https://docs.runpod.io/sdks/graphql/manage-pods; runpod-python's
 * `generate_spot_pod_deployment_mutation` sends it too).
 */
export const DEPLOY_INTERRUPTIBLE_MUTATION = `mutation SkywardRentInterruptable($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { id }
}`;

/** The outcome of a GraphQL call: its data, or the first error's message. */
export interface GraphqlResult {
  readonly data: Record<string, unknown> | undefined;
  readonly error: string | undefined;
}

/**
 * Runs a GraphQL operation. HTTP failures reject with {@link RunPodApiError}; GraphQL errors (HTTP 200
 * with `errors`) come back as `error`, for the caller to tell "no capacity" from the rest.
 * Authentication errors reported that way reject like an HTTP 401.
 */
export async function graphql(
  http: PacedClient,
  options: {
    query: string;
    variables?: Record<string, unknown>;
    purpose: string;
    idempotent: boolean;
    signal: AbortSignal;
  },
): Promise<GraphqlResult> {
  const { data } = await http.send("other", {
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
      kind: "auth",
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
    const message = `RunPod's API refused ${purpose}: ${result.error ?? "the answer had no data"}`;
    throw new RunPodApiError({
      kind: classifyRunPodError({ statusCode: undefined, message, answer: undefined }) ?? "bad-request",
      message,
    });
  }
  return result.data;
}

/** Parses `value` with `schema`, or fails with a {@link RunPodApiError} saying the answer was not understood. */
export const parseAnswer = runpodApi.parseAnswer;
