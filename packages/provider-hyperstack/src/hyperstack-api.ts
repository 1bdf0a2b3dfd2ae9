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
 * Lists of environments, key pairs and VMs are paged (`page`, `pageSize`; the answer's `count` is the
 * total): every page is read. Reference: https://docs.hyperstack.cloud/docs/api-reference/
 * (`openapi/hyperstack.json`).
 */
import {
  answerListSchema,
  answerNumberSchema,
  answerTextSchema,
  defineMachineApi,
  type MachineJsonClient,
  type MachineProviderError,
  type MachineRateLimits,
  type NumberedPage,
  readNumberedPages,
} from "@skyward/provider-utils";
import { z } from "zod";

/**
 * "The rate limit for the Infrahub API is 500 requests per minute, per IP address. If you exceed this
 * limit, all API calls for the next minute will be blocked, resulting in a HTTP 429 response."
 * (https://infrahub-doc.nexgencloud.com/docs/api-reference/getting-started-api/authentication, "Rate limits").
 */
export const HYPERSTACK_RATE_LIMITS: MachineRateLimits = {
  account: {
    requests: 500,
    perSeconds: 60,
    penaltySeconds: 60,
    source: "https://infrahub-doc.nexgencloud.com/docs/api-reference/getting-started-api/authentication",
  },
};

/**
 * Hyperstack's API: its client (key from `apiKey`, else `HYPERSTACK_API_KEY`, sent as `api_key`). It
 * answers refusals as `{status: false, message, error_reason}` (ErrorResponseModel,
 * https://docs.hyperstack.cloud/docs/api-reference/errors), mostly with 400: the words tell them apart.
 * A VM still being created refuses to be deleted for now — `busy`, so deletes are tried again until it
 * is gone; an environment still holding VMs or key pairs (409) is `busy` by its status.
 */
export const hyperstackApi = defineMachineApi({
  provider: "hyperstack",
  errorName: "HyperstackApiError",
  label: "Hyperstack",
  apiKeyVariable: "HYPERSTACK_API_KEY",
  apiKeyHeader: "api_key",
  rateLimits: HYPERSTACK_RATE_LIMITS,
  classify({ statusCode, message }) {
    if (statusCode === undefined || statusCode >= 500 || statusCode === 429) return undefined;
    if (/being created|cannot be deleted yet|still (being )?(created|provisioning|building)/i.test(message))
      return "busy";
    if (/stock|capacity|not enough|unavailable|no (gpus?|hosts?|resources)/i.test(message)) return "capacity";
    if (/quota|limit (reached|exceeded)/i.test(message)) return "quota";
    if (/insufficient (balance|credit|funds)|billing|payment|verif/i.test(message)) return "account";
    return undefined;
  },
});

/** A failed call to Hyperstack's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const HyperstackApiError = hyperstackApi.ApiError;
export type HyperstackApiError = MachineProviderError;

/** Hyperstack's API root. */
export const HYPERSTACK_API_URL = "https://infrahub-api.nexgencloud.com/v1";

const listOf = answerListSchema;
const text = answerTextSchema;

/** One flavor (Flavor_Fields). */
const flavorSchema = z.looseObject({
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

export type Flavor = z.infer<typeof flavorSchema>;

export const flavorsAnswerSchema = z.looseObject({
  data: listOf(z.looseObject({ gpu: text, region_name: text, flavors: listOf(flavorSchema) })),
});

/** `GET /pricebook` answers a bare array. */
export const pricebookAnswerSchema = z.array(z.looseObject({ name: z.string(), value: answerNumberSchema }));

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

export const createEnvironmentAnswerSchema = z.looseObject({
  environment: z.looseObject({ id: z.number(), name: z.string(), region: text }),
});

/** What a paged list answers beside its items: its page size and the total count. */
const pageFields = {
  page_size: z.number().nullish(),
  pageSize: z.number().nullish(),
  count: z.number().nullish(),
};
type PageFields = z.output<z.ZodObject<typeof pageFields>>;

/** The page size the provider asks for. */
export const PAGE_SIZE = 100;

/** A paged answer, as `readNumberedPages` reads it. */
export function pageOf<Item>(answer: PageFields, items: readonly Item[]): NumberedPage<Item> {
  return { items, total: answer.count, pageSize: answer.page_size ?? answer.pageSize };
}

/** Every item of the paged list at `path` (`page`, `pageSize`; `count` the total), every page read. */
export function readAllPages<Schema extends z.ZodType<PageFields>, Item extends { readonly id: number }>(
  client: MachineJsonClient,
  path: string,
  schema: Schema,
  itemsOf: (answer: z.output<Schema>) => readonly Item[],
  signal: AbortSignal,
  params: Record<string, string> = {},
): Promise<Item[]> {
  return readNumberedPages<Item>({
    api: hyperstackApi,
    list: path,
    asked: PAGE_SIZE,
    idOf: (item) => item.id,
    async read(page) {
      const paging = { ...params, page: String(page), pageSize: String(PAGE_SIZE) };
      const answer = await client.read("other", path, schema, `listing ${path}`, signal, paging);
      return pageOf(answer, itemsOf(answer));
    },
  });
}

export const environmentsAnswerSchema = z.looseObject({
  ...pageFields,
  environments: listOf(z.looseObject({ id: z.number(), name: z.string() })),
});

/** A key pair as `GET /core/keypairs` lists it (its environment by name). */
export const keypairsAnswerSchema = z.looseObject({
  ...pageFields,
  keypairs: listOf(z.looseObject({ id: z.number(), name: z.string(), environment: z.unknown() })),
});

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
  // Whether the floating IP's ports are random (22 is then not SSH), and where setting that stands.
  port_randomization: z.boolean().nullish(),
  port_randomization_status: z.string().nullish(),
  security_rules: listOf(
    z.looseObject({ protocol: text, remote_ip_prefix: text, port_range_min: z.number().nullish() }),
  ),
  created_at: text,
  labels: listOf(z.string()),
});
export type Vm = z.infer<typeof vmSchema>;

export const vmsAnswerSchema = z.looseObject({ ...pageFields, instances: listOf(vmSchema) });

export const vmAnswerSchema = z.looseObject({ instance: vmSchema.nullish() });

export const createVmsAnswerSchema = z.looseObject({ instances: listOf(vmSchema) });
