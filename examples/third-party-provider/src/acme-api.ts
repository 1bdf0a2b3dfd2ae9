/**
 * The Acme Cloud REST API, as its reference (this package's README, "The Acme API") documents it: the
 * answers checked with zod, requests sent through `@skyward/provider-utils`' HTTP client (the key from
 * the settings or `ACME_API_KEY`, deadlines, retries of what is safe to repeat, errors without the key).
 */
import {
  defineProviderApi,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpSettings,
} from "@skyward/provider-utils";
import { z } from "zod";

/** An error answer of the Acme API (or no answer at all). */
export class AcmeApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "acme", name: "AcmeApiError" });
  }
}

const acmeApi = defineProviderApi({
  label: "Acme",
  apiKeyVariable: "ACME_API_KEY",
  createError: (options) => new AcmeApiError(options),
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

/** What creating machines asks for. */
export interface CreateMachines {
  readonly type: string;
  readonly count: number;
  readonly labels: Readonly<Record<string, string>>;
  /** Authorised for the machines' SSH user. */
  readonly sshPublicKey: string;
}

/** A client of one Acme account. */
export interface AcmeClient {
  machineTypes(signal: AbortSignal): Promise<AcmeMachineType[]>;
  createMachines(request: CreateMachines, signal: AbortSignal): Promise<AcmeMachine[]>;
  /** The machine, or null when Acme does not know it (any more). */
  machine(id: string, signal: AbortSignal): Promise<AcmeMachine | null>;
  /** Machines carrying the label `key` (any value). */
  machinesLabelled(key: string, signal: AbortSignal): Promise<AcmeMachine[]>;
  /** Deletes a machine; one Acme no longer knows is not an error. */
  deleteMachine(id: string, signal: AbortSignal): Promise<void>;
}

/** A client for the API at `apiUrl`. */
export function createAcmeClient(apiUrl: string, settings: ProviderHttpSettings): AcmeClient {
  const http = acmeApi.createClient(settings);
  const url = (path: string) => `${apiUrl.replace(/\/+$/, "")}${path}`;
  const notFound = (error: unknown) => AcmeApiError.isInstance(error) && error.statusCode === 404;
  return {
    async machineTypes(signal) {
      const { data } = await http.send({
        method: "GET",
        url: url("/v1/machine-types"),
        idempotent: true,
        purpose: "listing machine types",
        signal,
      });
      return acmeApi.parseAnswer(
        z.object({ machineTypes: z.array(machineTypeSchema) }),
        data,
        "machine types",
      ).machineTypes;
    },
    async createMachines(request, signal) {
      const { data } = await http.send({
        method: "POST",
        url: url("/v1/machines"),
        data: request,
        idempotent: false,
        purpose: `creating ${request.count} ${request.type} machine(s)`,
        signal,
      });
      return acmeApi.parseAnswer(z.object({ machines: z.array(machineSchema) }), data, "created machines")
        .machines;
    },
    async machine(id, signal) {
      try {
        const { data } = await http.send({
          method: "GET",
          url: url(`/v1/machines/${encodeURIComponent(id)}`),
          idempotent: true,
          purpose: `reading machine ${id}`,
          signal,
        });
        return acmeApi.parseAnswer(machineSchema, data, `machine ${id}`);
      } catch (error) {
        if (notFound(error)) return null;
        throw error;
      }
    },
    async machinesLabelled(key, signal) {
      const { data } = await http.send({
        method: "GET",
        url: url(`/v1/machines?label=${encodeURIComponent(key)}`),
        idempotent: true,
        purpose: "listing machines",
        signal,
      });
      return acmeApi.parseAnswer(z.object({ machines: z.array(machineSchema) }), data, "machines").machines;
    },
    async deleteMachine(id, signal) {
      try {
        await http.send({
          method: "DELETE",
          url: url(`/v1/machines/${encodeURIComponent(id)}`),
          idempotent: true,
          purpose: `deleting machine ${id}`,
          signal,
        });
      } catch (error) {
        if (!notFound(error)) throw error;
      }
    },
  };
}
