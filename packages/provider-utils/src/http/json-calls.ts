/**
 * Typed JSON calls to one API root: each request names its path, its purpose (for messages) and, for a
 * paced API, its endpoint; an answer with a schema comes back parsed, or fails in the provider's error
 * saying what was not understood. The provider's `send` does the rest (pacing, retries, its key).
 */
import type { z } from "zod";
import type { MachineEndpoint } from "../machine-provider/pacing.js";
import type { ProviderApi } from "./provider-api.js";
import type { ProviderHttpAnswer, ProviderHttpRequest } from "./provider-http.js";

/** One call: what it is for, its deadline, and what else the request carries. */
export interface JsonCallOptions<Schema extends z.ZodType | undefined> {
  readonly purpose: string;
  readonly signal: AbortSignal;
  /** The answer's schema; without one the answer is not read. */
  readonly schema?: Schema;
  readonly params?: Readonly<Record<string, string>>;
  readonly data?: unknown;
  /** Whether sending it twice does no harm (then a 5xx or no answer is retried); default: GET and DELETE. */
  readonly idempotent?: boolean;
  /** The endpoint whose documented limit paces it. */
  readonly endpoint?: MachineEndpoint;
  readonly rateLimit?: ProviderHttpRequest["rateLimit"];
}

/** The answer's type for a schema, or `unknown` without one. */
type Answer<Schema extends z.ZodType | undefined> = Schema extends z.ZodType ? z.output<Schema> : unknown;

/** Sends one call; what {@link jsonCalls} is built on. */
export type JsonSend = (
  request: ProviderHttpRequest,
  endpoint?: MachineEndpoint,
) => Promise<ProviderHttpAnswer>;

/** Calls to the API at `root` (`https://api.example.com/v2`), sent with `send`, parsed with `api`'s error. */
export function jsonCalls(root: string, send: JsonSend, api: Pick<ProviderApi, "parseAnswer">) {
  return async function call<Schema extends z.ZodType | undefined = undefined>(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: JsonCallOptions<Schema>,
  ): Promise<Answer<Schema>> {
    const { purpose, signal, schema, params, data, endpoint, rateLimit } = options;
    const { data: answer } = await send(
      {
        method,
        url: `${root}${path}`,
        ...(params ? { params: { ...params } } : {}),
        ...(data !== undefined ? { data } : {}),
        ...(rateLimit ? { rateLimit } : {}),
        idempotent: options.idempotent ?? (method === "GET" || method === "DELETE"),
        purpose,
        signal,
      },
      endpoint,
    );
    return (schema ? api.parseAnswer(schema, answer, purpose) : answer) as Answer<Schema>;
  };
}

/** A call of {@link jsonCalls}. */
export type JsonCall = ReturnType<typeof jsonCalls>;
