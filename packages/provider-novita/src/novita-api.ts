/**
 * Novita AI's GPU instance API (https://novita.ai/docs/api-reference/), as the provider uses it: GPU
 * products and their prices, creating, reading, listing and deleting instances. The API key is sent as
 * a bearer token through `@skyward/provider-utils`' HTTP client (looked up lazily from the settings or
 * `NOVITA_API_KEY`, deadlines, retries of what is safe to repeat, errors without the key).
 */
import {
  answerNumberSchema,
  defineProviderApi,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpSettings,
} from "@skyward/provider-utils";
import { z } from "zod";

/** Novita's GPU instance API, as its reference names it. */
export const NOVITA_API_URL = "https://api.novita.ai/gpu-instance/openapi/v1";

/** Prices in Novita's answers are in units of 1/100,000 USD per hour. */
export const NOVITA_PRICE_UNITS_PER_USD = 100_000;

/** A failed call to Novita's API (or no answer at all). */
export class NovitaApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "novita", name: "NovitaApiError" });
  }

  /** True for a {@link NovitaApiError} from any copy of this package. */
  static override isInstance(error: unknown): error is NovitaApiError {
    return ProviderApiError.isInstance(error) && error.provider === "novita";
  }
}

/** The API's definition: its name in messages, the key's variable, its error. */
export const novitaApi = defineProviderApi({
  label: "Novita",
  apiKeyVariable: "NOVITA_API_KEY",
  createError: (options) => new NovitaApiError(options),
});

const productSchema = z.object({
  id: z.string(),
  name: z.string(),
  cpuPerGpu: answerNumberSchema.optional(),
  memoryPerGpu: answerNumberSchema.optional(),
  diskPerGpu: answerNumberSchema.optional(),
  availableDeploy: z.boolean().nullish(),
  minRootFS: answerNumberSchema.optional(),
  maxRootFS: answerNumberSchema.optional(),
  price: answerNumberSchema.optional(),
  spotPrice: answerNumberSchema.optional(),
  billingMethods: z.array(z.string()).nullish(),
});

/** One GPU product (`GET /products`). */
export type NovitaProduct = z.output<typeof productSchema>;

const keyValueSchema = z.object({ key: z.string(), value: z.string() });

const instanceSchema = z.object({
  id: z.string(),
  name: z.string().nullish(),
  clusterId: z.string().nullish(),
  status: z.string(),
  productId: z.string().nullish(),
  gpuNum: z.union([z.string(), z.number()]).nullish(),
  billingMode: z.string().nullish(),
  createdAt: z.string().nullish(),
  envs: z.array(keyValueSchema).nullish(),
  portMappings: z
    .array(z.object({ port: z.number(), endpoint: z.string().nullish(), type: z.string().nullish() }))
    .nullish(),
  instancePrice: answerNumberSchema.optional(),
});

/** One instance, as `GET /gpu/instance` and `GET /gpu/instances` answer it. */
export type NovitaInstance = z.output<typeof instanceSchema>;

/** What `POST /gpu/instance/create` is sent (the fields the provider uses). */
export interface NovitaCreateRequest {
  readonly name: string;
  readonly productId: string;
  readonly gpuNum: number;
  readonly rootfsSize: number;
  readonly imageUrl: string;
  readonly ports: string;
  readonly envs: readonly { readonly key: string; readonly value: string }[];
  readonly command: string;
  readonly kind: "gpu";
  readonly billingMode: "onDemand" | "spot";
  readonly clusterId?: string;
}

/** A client of one Novita account. */
export interface NovitaClient {
  products(
    query: { gpuNum: number; clusterId?: string; billingMethod: "onDemand" | "spot" },
    signal: AbortSignal,
  ): Promise<NovitaProduct[]>;
  /** Creates an instance; resolves with its id. */
  create(request: NovitaCreateRequest, signal: AbortSignal): Promise<string>;
  /** The instance, or null when Novita does not know it (any more). */
  instance(id: string, signal: AbortSignal): Promise<NovitaInstance | null>;
  /** Every instance, page by page. */
  instances(signal: AbortSignal): Promise<NovitaInstance[]>;
  /** Deletes an instance; one Novita no longer knows is not an error. */
  delete(id: string, signal: AbortSignal): Promise<void>;
}

const PAGE_SIZE = 100;

/** A client for the API at `apiUrl`; the key is looked up on the first request. */
export function createNovitaClient(apiUrl: string, settings: ProviderHttpSettings): NovitaClient {
  const http = novitaApi.createClient(settings);
  const url = (path: string) => `${apiUrl.replace(/\/+$/, "")}${path}`;
  const notFound = (error: unknown) =>
    NovitaApiError.isInstance(error) && (error.statusCode === 404 || error.statusCode === 410);
  return {
    async products(query, signal) {
      const { data } = await http.send({
        method: "GET",
        url: url("/products"),
        params: {
          gpuNum: String(query.gpuNum),
          billingMethod: query.billingMethod,
          ...(query.clusterId ? { clusterId: query.clusterId } : {}),
        },
        idempotent: true,
        purpose: `listing ${query.billingMethod} GPU products`,
        signal,
      });
      return novitaApi.parseAnswer(z.object({ data: z.array(productSchema) }), data, "GPU products").data;
    },
    async create(request, signal) {
      const { data } = await http.send({
        method: "POST",
        url: url("/gpu/instance/create"),
        data: request,
        idempotent: false,
        purpose: `creating a ${request.billingMode} instance of product ${request.productId}`,
        signal,
      });
      return novitaApi.parseAnswer(z.object({ id: z.string().min(1) }), data, "the new instance").id;
    },
    async instance(id, signal) {
      try {
        const { data } = await http.send({
          method: "GET",
          url: url("/gpu/instance"),
          params: { instanceId: id },
          idempotent: true,
          purpose: `reading instance ${id}`,
          signal,
        });
        return novitaApi.parseAnswer(instanceSchema, data, `instance ${id}`);
      } catch (error) {
        if (notFound(error)) return null;
        throw error;
      }
    },
    async instances(signal) {
      const all: NovitaInstance[] = [];
      for (let page = 1; ; page += 1) {
        const { data } = await http.send({
          method: "GET",
          url: url("/gpu/instances"),
          params: { pageSize: String(PAGE_SIZE), pageNum: String(page) },
          idempotent: true,
          purpose: "listing instances",
          signal,
        });
        const { instances } = novitaApi.parseAnswer(
          z.object({ instances: z.array(instanceSchema).nullish() }),
          data,
          "instances",
        );
        all.push(...(instances ?? []));
        if ((instances ?? []).length < PAGE_SIZE) return all;
      }
    },
    async delete(id, signal) {
      try {
        await http.send({
          method: "POST",
          url: url("/gpu/instance/delete"),
          data: { instanceId: id },
          idempotent: true,
          purpose: `deleting instance ${id}`,
          signal,
        });
      } catch (error) {
        if (!notFound(error)) throw error;
      }
    },
  };
}
