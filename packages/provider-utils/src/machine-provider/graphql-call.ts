/**
 * A GraphQL operation sent through a provider's paced client, its `data` parsed with a zod schema.
 * GraphQL answers its own errors with HTTP 200 and `errors`: they reject like HTTP ones, as the
 * provider's error — one about authentication as a rejected key (401), the rest classified by the
 * provider from their words (a 200 of another kind is `bad-request`), the API key taken out of them.
 */
import type { z } from "zod";
import type { ProviderApi } from "../http/provider-api.js";
import { answerMessage } from "../http/provider-http.js";
import type { PacedClient } from "./pacing.js";

/** One GraphQL operation. */
export interface GraphqlRequest {
  readonly query: string;
  readonly variables?: object;
  /** What the call is for, in errors (`renting an interruptible pod`). */
  readonly purpose: string;
  /** Whether it may be sent again after a lost answer (a query: yes; a mutation that creates: no). */
  readonly idempotent: boolean;
  readonly signal: AbortSignal;
}

/** Runs `request` at `url` through `http` and parses its `data` with `schema`; see the module comment. */
export async function graphqlCall<T extends z.ZodType>(
  api: Pick<ProviderApi, "label" | "apiKeyVariable" | "createError" | "parseAnswer">,
  http: PacedClient,
  url: string,
  schema: T,
  request: GraphqlRequest,
): Promise<z.output<T>> {
  const { query, variables = {}, ...rest } = request;
  const { data: body } = await http.send("other", {
    method: "POST",
    url,
    data: { query, variables },
    ...rest,
  });
  const { errors, data }: { errors?: unknown; data?: unknown } = (typeof body === "object" && body) || {};
  // The HTTP layer scrubs the key from error answers only; this one came as a 200.
  const error =
    Array.isArray(errors) && errors.length > 0
      ? http.scrub(answerMessage(body) ?? "unknown error")
      : undefined;
  if (error === undefined && typeof data === "object" && data !== null)
    return api.parseAnswer(schema, data, request.purpose);
  if (error !== undefined && /unauthori[sz]ed|api key|authenticat/i.test(error)) {
    const message = `${api.label} rejected the API key while ${request.purpose}: ${error}; set ${api.apiKeyVariable} to a valid key or pass apiKey`;
    throw api.createError({ statusCode: 401, message });
  }
  const message = `${api.label}'s API refused ${request.purpose}: ${error ?? "the answer had no data"}`;
  throw api.createError({ statusCode: 200, message });
}
