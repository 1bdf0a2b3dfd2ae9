/** Novita AI's GPU instance API (https://novita.ai/docs/api-reference/), the key a bearer token, as the README tells. */
import {
  answerNumbers,
  answerTexts,
  defineMachineApi,
  endpoint,
  errorTable,
  LEFT_TO_STATUS,
  listEndpoint,
  MARKET_REFUSALS,
  type MachineProviderError,
  machineEndpoints,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Novita's GPU instance API, as its reference names it. */
export const NOVITA_API_URL = "https://api.novita.ai/gpu-instance/openapi/v1";

/** Novita's refusals (`{code, reason, message}`; out of stock is a 400 `NOT_ENOUGH_RESOURCE`), by reason and words. */
const refusals = errorTable([LEFT_TO_STATUS, { kind: "gone", words: /^\S*NOT_FOUND/ }, ...MARKET_REFUSALS]);

export const novitaApi = defineMachineApi({
  label: "Novita",
  apiKeyVariable: "NOVITA_API_KEY",
  classify: ({ answer, message, ...failure }) =>
    refusals({ ...failure, answer, message: `${(answer as { reason?: string } | null)?.reason} ${message}` }),
});

/** A failed call to Novita's API (or no answer at all), with its `kind`. */
export const NovitaApiError = novitaApi.ApiError;
export type NovitaApiError = MachineProviderError;

/** A GPU product: figures per GPU, prices in 1/100,000 USD an hour, the root filesystem's bounds (GB). */
const productSchema = z.object({
  id: z.string(),
  name: z.string(),
  availableDeploy: z.boolean().nullish(),
  ...answerNumbers("cpuPerGpu", "memoryPerGpu", "minRootFS", "maxRootFS", "price", "spotPrice"),
});

/** An instance; `instancePrice` is for all its GPUs, in 1/100,000 USD an hour ("Get Instance": "Price of the instance"). */
const instanceSchema = z.object({
  id: z.string(),
  status: z.string(),
  ...answerTexts("name", "billingMode", "createdAt"),
  ...answerNumbers("instancePrice"),
  envs: z.array(z.object({ key: z.string(), value: z.string() })).nullish(),
  portMappings: z.array(z.object({ port: z.number(), endpoint: z.string().nullish() })).nullish(),
});
export type NovitaInstance = z.output<typeof instanceSchema>;

/** The page size of `GET /gpu/instances`. */
export const PAGE_SIZE = 100;
// An account without instances answers `instances: null`; an answer without the field is not understood.
const page = z.object({ instances: z.array(instanceSchema).nullable() });
const products = z.object({ data: z.array(productSchema) });
const created = z.object({ id: z.string().min(1) });
// A delete sent twice does no harm: one whose answer was lost is sent again.
const retriedDelete = { paced: "delete", idempotent: true } as const;

/** Novita's endpoints on a client of the API at `settings.apiUrl` (the key looked up on the first request). */
export const novitaClient = (settings: Parameters<typeof novitaApi.jsonClient>[0]) =>
  machineEndpoints(novitaApi, {
    products: endpoint("GET /products", products, "listing GPU products", "offers"),
    create: endpoint("POST /gpu/instance/create", created, "creating an instance", "create"),
    instance: endpoint("GET /gpu/instance", instanceSchema, "reading an instance", "get"),
    instances: listEndpoint("GET /gpu/instances", page, "listing instances", {
      paced: "list",
      items: (answer) => answer.instances ?? [],
      pages: { numbered: { pageParam: "pageNum", size: PAGE_SIZE, shortPageEnds: true } },
    }),
    delete: endpoint("POST /gpu/instance/delete", undefined, "deleting an instance", retriedDelete),
  })(novitaApi.jsonClient(settings));
