/**
 * The Acme Cloud REST API, as its reference (this package's README, "The Acme API") documents it:
 * answers checked with zod, requests sent through `@skyward/provider-utils`' HTTP client (the key from
 * the settings or `ACME_API_KEY`, deadlines, retries of what is safe to repeat, errors without the key),
 * paced by the documented limit, every failure a `MachineProviderError` whose `kind` says what failed.
 */
import {
  defineProviderApi,
  type MachineDeleteOutcome,
  machineErrorFactory,
  type ProviderHttpSettings,
  pacedClient,
} from "@skyward/provider-utils";
import { z } from "zod";

export const acmeApi = defineProviderApi({
  label: "Acme",
  apiKeyVariable: "ACME_API_KEY",
  createError: machineErrorFactory({
    provider: "acme",
    // A 409 is Acme's "no capacity" (a sold-out type), not a machine busy with something else.
    classify: ({ statusCode, message }) =>
      statusCode === 409 && /capacity/i.test(message) ? "capacity" : undefined,
  }),
});

const machineTypeSchema = z.object({
  id: z.string(),
  region: z.string(),
  vcpus: z.number(),
  memoryGb: z.number(),
  gpu: z.object({ model: z.string(), count: z.number(), memoryGb: z.number() }).nullable(),
  pricePerHour: z.number(),
});

/** A kind of machine Acme rents. */
export type AcmeMachineType = z.infer<typeof machineTypeSchema>;

const machineSchema = z.object({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  state: z.enum(["provisioning", "running", "deleting", "deleted"]),
  address: z.string().nullable(),
  privateAddress: z.string().nullable(),
  sshPort: z.number(),
  sshUser: z.string(),
  scratchDir: z.string().nullable(),
  labels: z.record(z.string(), z.string()),
  pricePerHour: z.number(),
  createdAt: z.string(),
});

/** One machine. */
export type AcmeMachine = z.infer<typeof machineSchema>;

const pageSchema = z.object({ machines: z.array(machineSchema), nextPage: z.string().nullable() });
const deletedSchema = z.object({
  results: z.array(
    z.object({
      id: z.string(),
      status: z.enum(["deleted", "not-found", "provisioning", "error"]),
      error: z.string().optional(),
    }),
  ),
});

/** What `POST /v1/machines` asks for. */
export interface CreateMachine {
  readonly name: string;
  readonly type: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Authorised for the machine's SSH user. */
  readonly sshPublicKey: string;
  /** A retried create with the same key returns the first machine (README: "idempotencyKey"). */
  readonly idempotencyKey: string;
}

/** A client of one Acme account at `apiUrl`. */
export function createAcmeClient(apiUrl: string, settings: ProviderHttpSettings) {
  const http = pacedClient(acmeApi.createClient(settings), {
    account: { requests: 120, perSeconds: 60, source: "README.md, The Acme API: 120 requests a minute" },
  });
  const url = (path: string) => `${apiUrl.replace(/\/+$/, "")}/v1${path}`;
  const get = async (
    endpoint: "offers" | "get" | "list",
    path: string,
    purpose: string,
    signal: AbortSignal,
  ) => (await http.send(endpoint, { method: "GET", url: url(path), idempotent: true, purpose, signal })).data;
  return {
    async machineTypes(signal: AbortSignal): Promise<AcmeMachineType[]> {
      const data = await get("offers", "/machine-types", "listing machine types", signal);
      return acmeApi.parseAnswer(
        z.object({ machineTypes: z.array(machineTypeSchema) }),
        data,
        "machine types",
      ).machineTypes;
    },
    async createMachine(request: CreateMachine, signal: AbortSignal): Promise<AcmeMachine> {
      const { data } = await http.send("create", {
        method: "POST",
        url: url("/machines"),
        data: request,
        idempotent: false,
        purpose: `creating machine ${request.name}`,
        signal,
      });
      return acmeApi.parseAnswer(machineSchema, data, `creating machine ${request.name}`);
    },
    async machine(id: string, signal: AbortSignal): Promise<AcmeMachine> {
      const data = await get("get", `/machines/${encodeURIComponent(id)}`, `reading machine ${id}`, signal);
      return acmeApi.parseAnswer(machineSchema, data, `reading machine ${id}`);
    },
    /** One page of the machines carrying label `key`. */
    async machinesPage(key: string, page: string | undefined, signal: AbortSignal) {
      const query = `label=${encodeURIComponent(key)}${page ? `&page=${encodeURIComponent(page)}` : ""}`;
      return acmeApi.parseAnswer(
        pageSchema,
        await get("list", `/machines?${query}`, "listing machines", signal),
        "listing machines",
      );
    },
    /** Deletes machines in one call; a 207 says per machine what happened. */
    async deleteMachines(ids: readonly string[], signal: AbortSignal) {
      const { data } = await http.send("delete", {
        method: "POST",
        url: url("/machines/delete"),
        data: { ids },
        idempotent: true,
        purpose: `deleting ${ids.length} machine(s)`,
        signal,
      });
      const outcomes = new Map<string, MachineDeleteOutcome>();
      for (const result of acmeApi.parseAnswer(deletedSchema, data, "deleting machines").results)
        outcomes.set(
          result.id,
          result.status === "deleted"
            ? "deleted"
            : result.status === "not-found"
              ? "gone"
              : result.status === "provisioning"
                ? "busy"
                : { error: new Error(result.error ?? "refused") },
        );
      return outcomes;
    },
  };
}
