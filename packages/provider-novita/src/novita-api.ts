/**
 * Novita AI's GPU instance API (https://novita.ai/docs/api-reference/), as the provider uses it: GPU
 * products and their prices, creating, reading, listing (page by page) and deleting instances. The
 * API key is sent as a bearer token through `@skyward/provider-utils`' HTTP client; every failure is a
 * {@link NovitaApiError} whose `kind` (the machine-provider base's taxonomy) says what failed. Novita
 * documents no rate limit: a 429's `Retry-After` is honoured.
 */
import { answerNumberSchema, defineMachineApi, type MachineProviderError } from "@skyward/provider-utils";
import { z } from "zod";

/** Novita's GPU instance API, as its reference names it. */
export const NOVITA_API_URL = "https://api.novita.ai/gpu-instance/openapi/v1";

/** Prices in Novita's answers are in units of 1/100,000 USD per hour. */
export const NOVITA_PRICE_UNITS_PER_USD = 100_000;

/**
 * The API's definition: its name in messages, the key's variable, its errors. Novita answers refusals
 * as `{code, reason, message}`, out of stock as a 400 `NOT_ENOUGH_RESOURCE`; the reason (else the
 * words) tells them apart.
 */
export const novitaApi = defineMachineApi({
  provider: "novita",
  errorName: "NovitaApiError",
  label: "Novita",
  apiKeyVariable: "NOVITA_API_KEY",
  classify({ statusCode, message, answer }) {
    if (statusCode === undefined || statusCode >= 500 || statusCode === 429) return undefined;
    const reason = String((answer as { reason?: unknown } | null)?.reason ?? "");
    const text = `${reason} ${message}`;
    if (/NOT_FOUND/.test(reason)) return "gone";
    if (
      /NOT_ENOUGH|not enough|no (available )?(gpu|resource|inventory|stock)|sold out|out of stock/i.test(text)
    )
      return "capacity";
    if (/balance|insufficient funds|payment/i.test(text)) return "account";
    if (/quota|limit (exceeded|reached)/i.test(text)) return "quota";
    return undefined;
  },
});

/** A failed call to Novita's API (or no answer at all), with its `kind`. */
export const NovitaApiError = novitaApi.ApiError;
export type NovitaApiError = MachineProviderError;

const productSchema = z.object({
  id: z.string(),
  name: z.string(),
  cpuPerGpu: answerNumberSchema.optional(),
  memoryPerGpu: answerNumberSchema.optional(),
  availableDeploy: z.boolean().nullish(),
  /** The root filesystem's bounds, GB: a create asking more than `maxRootFS` is refused. */
  minRootFS: answerNumberSchema.optional(),
  maxRootFS: answerNumberSchema.optional(),
  /** Per GPU, in 1/100,000 USD an hour, like the product's other per-GPU fields. */
  price: answerNumberSchema.optional(),
  spotPrice: answerNumberSchema.optional(),
});

/** One GPU product (`GET /products`). */
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
  instancePrice: answerNumberSchema.optional(),
});

/** One instance, as `GET /gpu/instance` and `GET /gpu/instances` answer it. */
export type NovitaInstance = z.output<typeof instanceSchema>;

/** The page size of `GET /gpu/instances`. */
export const PAGE_SIZE = 100;

/** A client for the API at `settings.apiUrl`; the key is looked up on the first request. */
export function createNovitaClient(settings: Parameters<typeof novitaApi.jsonClient>[0]) {
  const { json } = novitaApi.jsonClient(settings);
  return {
    async products(
      query: { gpuNum: number; clusterId?: string | undefined; billingMethod: "onDemand" | "spot" },
      signal: AbortSignal,
    ): Promise<NovitaProduct[]> {
      const params = {
        gpuNum: String(query.gpuNum),
        billingMethod: query.billingMethod,
        ...(query.clusterId ? { clusterId: query.clusterId } : {}),
      };
      const purpose = `listing ${query.billingMethod} GPU products`;
      const schema = z.object({ data: z.array(productSchema) });
      return (await json("GET", "/products", { schema, params, endpoint: "offers", purpose, signal })).data;
    },
    /** Creates an instance (`POST /gpu/instance/create`); resolves with its id. */
    async create(data: Record<string, unknown>, signal: AbortSignal): Promise<string> {
      const purpose = `creating a ${String(data.billingMode)} instance of product ${String(data.productId)}`;
      const schema = z.object({ id: z.string().min(1) });
      return (
        await json("POST", "/gpu/instance/create", { schema, data, endpoint: "create", purpose, signal })
      ).id;
    },
    instance: (id: string, signal: AbortSignal): Promise<NovitaInstance> =>
      json("GET", "/gpu/instance", {
        schema: instanceSchema,
        params: { instanceId: id },
        endpoint: "get",
        purpose: `reading instance ${id}`,
        signal,
      }),
    /** One page of instances (`pageNum` from 1); a page shorter than {@link PAGE_SIZE} is the last. */
    async instances(pageNum: number, signal: AbortSignal): Promise<NovitaInstance[]> {
      const params = { pageSize: String(PAGE_SIZE), pageNum: String(pageNum) };
      // An account without instances answers `instances: null`; an answer without the field is not understood.
      const schema = z.object({ instances: z.array(instanceSchema).nullable() });
      const purpose = "listing instances";
      return (
        (await json("GET", "/gpu/instances", { schema, params, endpoint: "list", purpose, signal }))
          .instances ?? []
      );
    },
    /** Deletes an instance (`POST /gpu/instance/delete`); throws its classified error otherwise. */
    async delete(id: string, signal: AbortSignal): Promise<void> {
      const data = { instanceId: id };
      const purpose = `deleting instance ${id}`;
      await json("POST", "/gpu/instance/delete", {
        data,
        idempotent: true,
        endpoint: "delete",
        purpose,
        signal,
      });
    },
  };
}

/** A client of one Novita account. */
export type NovitaClient = ReturnType<typeof createNovitaClient>;
