/**
 * Novita AI's GPU instance API (https://novita.ai/docs/api-reference/), as the provider uses it: GPU
 * products and their prices, creating, reading, listing (page by page) and deleting instances, with
 * the API key as a bearer token. Novita documents no rate limit: a 429's `Retry-After` is honoured.
 */
import { answerNumberSchema, defineMachineApi, type MachineProviderError } from "@skyward/provider-utils";
import { z } from "zod";

/** Novita's GPU instance API, as its reference names it. */
export const NOVITA_API_URL = "https://api.novita.ai/gpu-instance/openapi/v1";

/** Prices in Novita's answers are in units of 1/100,000 USD per hour. */
export const NOVITA_PRICE_UNITS_PER_USD = 100_000;

/** Novita's refusals (`{code, reason, message}`; out of stock is a 400 `NOT_ENOUGH_RESOURCE`), by reason or words. */
const REFUSALS = [
  [/NOT_ENOUGH|not enough|no (available )?(gpu|resource|inventory|stock)|sold out|out of stock/i, "capacity"],
  [/balance|insufficient funds|payment/i, "account"],
  [/quota|limit (exceeded|reached)/i, "quota"],
] as const;

/** The API's definition: its name in messages, the key's variable, its errors. */
export const novitaApi = defineMachineApi({
  provider: "novita",
  errorName: "NovitaApiError",
  label: "Novita",
  apiKeyVariable: "NOVITA_API_KEY",
  classify({ statusCode, message, answer }) {
    if (statusCode === undefined || statusCode >= 500 || statusCode === 429) return undefined;
    const reason = String((answer as { reason?: unknown } | null)?.reason ?? "");
    if (/NOT_FOUND/.test(reason)) return "gone";
    return REFUSALS.find(([words]) => words.test(`${reason} ${message}`))?.[1];
  },
});

/** A failed call to Novita's API (or no answer at all), with its `kind`. */
export const NovitaApiError = novitaApi.ApiError;
export type NovitaApiError = MachineProviderError;

const number = answerNumberSchema.optional();
const productSchema = z.object({
  id: z.string(),
  name: z.string(),
  cpuPerGpu: number,
  memoryPerGpu: number,
  availableDeploy: z.boolean().nullish(),
  /** The root filesystem's bounds, GB: a create asking more than `maxRootFS` is refused. */
  minRootFS: number,
  maxRootFS: number,
  /** Per GPU, in 1/100,000 USD an hour, like the product's other per-GPU fields. */
  price: number,
  spotPrice: number,
});
export type NovitaProduct = z.output<typeof productSchema>;

const instanceSchema = z.object({
  id: z.string(),
  name: z.string().nullish(),
  status: z.string(),
  billingMode: z.string().nullish(),
  createdAt: z.string().nullish(),
  envs: z.array(z.object({ key: z.string(), value: z.string() })).nullish(),
  portMappings: z
    .array(z.object({ port: z.number(), endpoint: z.string().nullish(), type: z.string().nullish() }))
    .nullish(),
  /** The instance's price, all its GPUs, in 1/100,000 USD an hour ("Get Instance": "Price of the instance"). */
  instancePrice: number,
});
export type NovitaInstance = z.output<typeof instanceSchema>;

/** The page size of `GET /gpu/instances`. */
export const PAGE_SIZE = 100;

/** A client for the API at `settings.apiUrl`; the key is looked up on the first request. */
export function createNovitaClient(settings: Parameters<typeof novitaApi.jsonClient>[0]) {
  const client = novitaApi.jsonClient(settings);
  const products = z.object({ data: z.array(productSchema) });
  // An account without instances answers `instances: null`; an answer without the field is not understood.
  const page = z.object({ instances: z.array(instanceSchema).nullable() });
  return {
    products: async (
      gpuNum: number,
      billingMethod: "onDemand" | "spot",
      clusterId: string | undefined,
      signal: AbortSignal,
    ) => {
      const params = { gpuNum: String(gpuNum), billingMethod, ...(clusterId ? { clusterId } : {}) };
      return (
        await client.read(
          "offers",
          "/products",
          products,
          `listing ${billingMethod} GPU products`,
          signal,
          params,
        )
      ).data;
    },
    create: async (data: Record<string, unknown>, signal: AbortSignal) => {
      const purpose = `creating a ${String(data.billingMode)} instance of product ${String(data.productId)}`;
      const schema = z.object({ id: z.string().min(1) });
      return (await client.call("create", "POST", "/gpu/instance/create", schema, purpose, signal, { data }))
        .id;
    },
    instance: (instanceId: string, signal: AbortSignal) =>
      client.read("get", "/gpu/instance", instanceSchema, `reading instance ${instanceId}`, signal, {
        instanceId,
      }),
    /** One page of instances (`pageNum` from 1); a page shorter than {@link PAGE_SIZE} is the last. */
    instances: async (pageNum: number, signal: AbortSignal) => {
      const params = { pageSize: String(PAGE_SIZE), pageNum: String(pageNum) };
      return (
        (await client.read("list", "/gpu/instances", page, "listing instances", signal, params)).instances ??
        []
      );
    },
    delete: async (instanceId: string, signal: AbortSignal) => {
      const data = { instanceId };
      await client.call(
        "delete",
        "POST",
        "/gpu/instance/delete",
        z.unknown(),
        `deleting instance ${instanceId}`,
        signal,
        { data, idempotent: true },
      );
    },
  };
}
