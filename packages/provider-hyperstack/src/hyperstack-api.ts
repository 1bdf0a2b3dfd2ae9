/** Hyperstack's Infrahub API (https://docs.hyperstack.cloud/docs/api-reference/, `openapi/hyperstack.json`) as the README tells. */
import {
  answerNumbers,
  answerTextFields,
  answerTexts,
  defineMachineApi,
  endpoint,
  errorTable,
  LEFT_TO_STATUS,
  listEndpoint,
  answerListSchema as listOf,
  MARKET_REFUSALS,
  type MachineProviderError,
  type MachineRateLimits,
  machineEndpoints,
  answerTextSchema as text,
} from "@skyward/provider-utils";
import { z } from "zod";

/** "500 requests per minute, per IP address"; past it "all API calls for the next minute will be blocked" (429; README: Pacing). */
const RATE_LIMIT_PAGE =
  "https://infrahub-doc.nexgencloud.com/docs/api-reference/getting-started-api/authentication";
export const HYPERSTACK_RATE_LIMITS: MachineRateLimits = {
  account: { requests: 500, perSeconds: 60, penaltySeconds: 60, source: RATE_LIMIT_PAGE },
};

/**
 * Its client. Refusals (https://docs.hyperstack.cloud/docs/api-reference/errors), mostly 400, told apart by
 * their words (README: Errors); an environment still holding VMs or key pairs answers 409 (`busy` by its status).
 */
export const hyperstackApi = defineMachineApi({
  label: "Hyperstack",
  apiKeyVariable: "HYPERSTACK_API_KEY",
  apiKeyHeader: "api_key",
  rateLimits: HYPERSTACK_RATE_LIMITS,
  classify: errorTable([
    LEFT_TO_STATUS,
    { words: /being created|cannot be deleted yet/i, kind: "busy" },
    { words: /still (being )?(created|provisioning|building)/i, kind: "busy" },
    ...MARKET_REFUSALS,
    { words: /insufficient credit|billing|verif/i, kind: "account" },
  ]),
});

/** A failed call to Hyperstack's API: a {@link MachineProviderError} whose `kind` says what failed. */
export const HyperstackApiError = hyperstackApi.ApiError;
export type HyperstackApiError = MachineProviderError;

/** What most of Hyperstack's entries have: a numeric id and a name. */
const named = { id: z.number(), name: z.string() };

const flavorSchema = z.looseObject({
  ...named,
  ...answerTextFields("region_name", "gpu"),
  ...answerNumbers("cpu", "ram", "disk", "ephemeral", "gpu_count"),
  stock_available: z.boolean().nullish(),
});
export type Flavor = z.infer<typeof flavorSchema>;

const flavorsSchema = z.looseObject({
  data: listOf(z.looseObject({ gpu: text, region_name: text, flavors: listOf(flavorSchema) })),
});

const pricebookSchema = z.array(z.looseObject({ name: z.string(), ...answerNumbers("value") }));

const imageSchema = z.looseObject({ ...named, region_name: text, created_at: text });
const imagesSchema = z.looseObject({
  images: listOf(z.looseObject({ region_name: text, images: listOf(imageSchema) })),
});
const environmentSchema = z.looseObject({ environment: z.looseObject(named) });

const pageFields = answerNumbers("page_size", "pageSize", "count");
type Paged = z.output<z.ZodObject<typeof pageFields>>;
const environmentsSchema = z.looseObject({ ...pageFields, environments: listOf(z.looseObject(named)) });
/** Key pairs name their environment (a name, or an object with one). */
const keypairsSchema = z.looseObject({
  ...pageFields,
  keypairs: listOf(z.looseObject({ ...named, environment: z.unknown() })),
});

/** A VM (Instance_Fields), as far as the provider reads it. */
const vmSchema = z.looseObject({
  id: z.number(),
  ...answerTextFields("name", "status", "created_at"),
  environment: z.looseObject({ id: z.number().nullish(), name: text, region: text }).nullish(),
  ...answerTexts("fixed_ip", "floating_ip", "port_randomization_status"),
  // Whether the floating IP's ports are random (22 is then not SSH), and where setting that (above) stands.
  port_randomization: z.boolean().nullish(),
  security_rules: listOf(z.looseObject({ remote_ip_prefix: text })),
  labels: listOf(z.string()),
});
export type Vm = z.infer<typeof vmSchema>;
const vmsSchema = z.looseObject({ ...pageFields, instances: listOf(vmSchema) });
const vmAnswerSchema = z.looseObject({ instance: vmSchema.nullish() });

const pageSize = (answer: Paged) => answer.page_size ?? answer.pageSize;
/** Paged by `page` and `pageSize` (100), `count` the total: every page is read. */
const pages = { numbered: { size: 100, total: (answer: Paged) => answer.count, pageSize } };

export const hyperstackCalls = machineEndpoints(hyperstackApi, {
  flavors: endpoint("GET /core/flavors", flavorsSchema, "listing flavors", "offers"),
  pricebook: endpoint("GET /pricebook", pricebookSchema, "reading the pricebook", "offers"),
  images: endpoint("GET /core/images", imagesSchema, "listing images"),
  newEnvironment: endpoint("POST /core/environments", environmentSchema, "creating an environment"),
  dropEnvironment: endpoint("DELETE /core/environments/{id}", undefined, "deleting an environment", "delete"),
  importKeypair: endpoint("POST /core/keypairs", undefined, "importing a key pair"),
  dropKeypair: endpoint("DELETE /core/keypair/{id}", undefined, "deleting a key pair", "delete"),
  createVm: endpoint("POST /core/virtual-machines", vmsSchema, "creating a virtual machine", "create"),
  vm: endpoint("GET /core/virtual-machines/{id}", vmAnswerSchema, "looking up virtual machine {id}", "get"),
  // Adding the same rule twice does no harm: a lost answer is sent again.
  openPeers: endpoint("POST /core/virtual-machines/{id}/sg-rules", undefined, "opening VM {id}'s network", {
    idempotent: true,
  }),
  environments: listEndpoint("GET /core/environments", environmentsSchema, "listing environments", {
    items: "environments",
    pages,
  }),
  keypairs: listEndpoint("GET /core/keypairs", keypairsSchema, "listing key pairs", {
    items: "keypairs",
    pages,
  }),
  vms: listEndpoint("GET /core/virtual-machines", vmsSchema, "listing virtual machines", {
    paced: "list",
    items: "instances",
    pages,
  }),
});

export type HyperstackCalls = ReturnType<typeof hyperstackCalls>;
