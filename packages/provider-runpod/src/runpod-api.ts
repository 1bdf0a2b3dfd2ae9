/**
 * The parts of RunPod's APIs the provider uses, with zod schemas of what comes back. REST API v2
 * (https://docs.runpod.io/api-reference-v2/overview; v1 retired 2026-11-15, GraphQL retires in early
 * 2027: https://docs.runpod.io/release-notes):
 *
 * - `GET /catalog/gpus?include=AVAILABILITY&product=POD&count=&cloud=&minCudaVersion=` — GPU types, price
 *   per GPU per cloud, most GPUs per pod, stock per data center and CUDA version (…/catalog/list-gpu-types);
 * - `GET /catalog/cpus?include=AVAILABILITY&product=POD` — CPU flavors (…/catalog/list-cpu-types);
 * - `GET /catalog/datacenters?globalNetwork=true` — data centers with global networking (…/list-data-centers);
 * - `POST /pods` — create a pod (…/pods/create-a-pod): a `400` is "could not be placed" (capacity) or a
 *   broken rule, told apart only by its `detail`; `GET /pods`, `GET|DELETE /pods/{id}` (…/pods/list-pods).
 *
 * GraphQL (https://docs.runpod.io/sdks/graphql/manage-pods), only for what v2 lacks, interruptible pods:
 * `gpuTypes { lowestPrice { minimumBidPrice stockStatus } }` and `podRentInterruptable`. npm's
 * `runpod-sdk` covers serverless endpoints only, not pods.
 */
import {
  answerNumberSchema,
  answerOptionalListSchema,
  defineMachineApi,
  endpoint,
  errorTable,
  type GraphqlRequest,
  graphqlCall,
  listEndpoint,
  type MachineProviderError,
  machineEndpoints,
  type ProviderHttpSettings,
} from "@skyward/provider-utils";
import { z } from "zod";

/** RunPod's API: its client (key from `apiKey`, else `RUNPOD_API_KEY`), key lookup and answer parsing. */
export const runpodApi = defineMachineApi({
  label: "RunPod",
  apiKeyVariable: "RUNPOD_API_KEY",
  // A 403 is a valid key that "lacks access to the requested resource or action" (…/create-a-pod,
  // "Authorizations"): this account may not use that pool, not a bad key (the base words it so). Every
  // other broken rule is a 400 like "no capacity": only RunPod's words (v2's `detail`, GraphQL's
  // `errors[].message`) tell them apart.
  classify: errorTable([
    { status: [403], kind: "account" },
    { status: ["5xx", 429], kind: undefined },
    { words: /bid (price )?(is )?too low/i, kind: "price" },
    {
      words:
        /no longer any instances available|does not have the resources|not enough (free )?gpus|no (gpus?|instances?|machines?)( \w+)? (is |are )?available|out of stock|insufficient capacity|could not be placed/i,
      kind: "capacity",
    },
  ]),
});

/** A failed call to RunPod's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const RunPodApiError = runpodApi.ApiError;
export type RunPodApiError = MachineProviderError;

// Only the fields the provider reads: objects are loose, so the rest passes through unchecked.
const price = answerNumberSchema.transform((value) => (value !== null && value > 0 ? value : null));
const text = z.string().nullish();
const count = z.number().nullish();
const availability = z.enum(["NONE", "LOW", "MEDIUM", "HIGH"]).nullish();
const dataCenters = z.array(z.looseObject({ id: z.string(), availability })).nullish();
const perCloud = <T extends z.ZodType>(item: T) => z.looseObject({ secure: item, community: item }).nullish();
const lowestBid = z.looseObject({ minimumBidPrice: price, stockStatus: text }).nullish();
const spotPrice = z.looseObject({ id: z.string(), secureLowest: lowestBid, communityLowest: lowestBid });
const port = z.looseObject({ private: count, public: count, ip: text });
const dataCenter = z.looseObject({ id: z.string(), globalNetwork: z.boolean().nullish() });

const catalogGpuSchema = z.looseObject({
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
const catalogCpuSchema = z.looseObject({
  id: z.string(),
  vcpu: z.looseObject({ min: z.number(), max: z.number() }),
  ramGbPerVcpu: z.number(),
  price: z.looseObject({ securePerVcpu: price }),
  availability,
  dataCenters,
});

/** A GPU type of the v2 catalog, with its prices and stock. */
export type CatalogGpu = z.infer<typeof catalogGpuSchema>;

/** A pod as v2 returns it. */
export const podSchema = z.looseObject({
  id: z.string(),
  name: text,
  status: text,
  env: z.record(z.string(), z.string()).nullish(),
  cost: answerNumberSchema,
  ssh: z.looseObject({ direct: z.looseObject({ host: z.string(), port: z.number() }).nullish() }).nullish(),
  globalNetworking: z.looseObject({ ip: text }).nullish(),
  runtime: z.looseObject({ ports: z.array(port).nullish() }).nullish(),
  createdAt: text,
});

/** A pod. */
export type Pod = z.infer<typeof podSchema>;

/** The schemas of whole answers. */
export const answers = {
  gpus: z.looseObject({ gpus: z.array(catalogGpuSchema) }),
  cpus: z.looseObject({ cpus: z.array(catalogCpuSchema) }),
  dataCenters: z.looseObject({ dataCenters: z.array(dataCenter) }),
  pods: z.looseObject({ pods: z.array(podSchema) }),
  spotPrices: z.looseObject({ gpuTypes: answerOptionalListSchema(spotPrice) }),
  rented: z.looseObject({ podRentInterruptable: z.looseObject({ id: z.string() }).nullish() }),
} as const;

const pods = { query: { include: "AVAILABILITY", product: "POD" } };
const networked = { query: { globalNetwork: "true" } };

/** The v2 endpoints the provider calls (RunPod documents no rate limits for them). */
const runpodEndpoints = machineEndpoints(runpodApi, {
  gpus: endpoint("GET /catalog/gpus", answers.gpus, "listing GPU types", pods),
  cpus: endpoint("GET /catalog/cpus", answers.cpus, "listing CPU flavors", pods),
  dataCenters: endpoint("GET /catalog/datacenters", answers.dataCenters, "listing data centers", networked),
  create: endpoint("POST /pods", podSchema, "creating a pod"),
  get: endpoint("GET /pods/{id}", podSchema, "looking up pod {id}"),
  // One page: v2's list of pods is not paged (https://docs.runpod.io/api-reference-v2/pods/list-pods).
  list: listEndpoint("GET /pods", answers.pods, "listing pods", { items: "pods" }),
  delete: endpoint("DELETE /pods/{id}", undefined, "terminating pod {id}"),
});

/** RunPod's v2 calls and its GraphQL operations, with the settings' key. */
export function runpodClient(settings: ProviderHttpSettings) {
  const client = runpodApi.jsonClient({ ...settings, apiUrl: "https://api.runpod.io/v2" });
  const graphql = <T extends z.ZodType>(schema: T, request: GraphqlRequest) =>
    graphqlCall(runpodApi, client.http, "https://api.runpod.io/graphql", schema, request);
  return { ...runpodEndpoints(client), graphql };
}

/** RunPod's calls, as {@link runpodClient} makes them. */
export type RunPodClient = ReturnType<typeof runpodClient>;

/** The GraphQL query of the minimum bid per GPU of each type, for a pod of `gpuCount` GPUs, in each cloud. */
export function spotPricesQuery(gpuCount: number): string {
  const lowest = (secure: boolean) =>
    `lowestPrice(input: {gpuCount: ${Math.trunc(gpuCount)}, secureCloud: ${secure}}) { minimumBidPrice stockStatus }`;
  return `query SkywardSpotPrices {\n  gpuTypes {\n    id\n    secureLowest: ${lowest(true)}\n    communityLowest: ${lowest(false)}\n  }\n}`;
}

/**
 * Creates an interruptible GPU pod at a bid per GPU; its input takes `allowedCudaVersions` like
 * `podFindAndDeployOnDemand` (runpod-python's `generate_spot_pod_deployment_mutation` sends it too).
 */
export const RENT_INTERRUPTIBLE = `mutation SkywardRentInterruptable($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { id }
}`;
