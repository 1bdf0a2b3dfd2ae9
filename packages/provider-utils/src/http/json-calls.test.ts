import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { MachineEndpoint } from "../machine-provider/pacing.js";
import { jsonCalls } from "./json-calls.js";
import { defineProviderApi } from "./provider-api.js";
import { ProviderApiError, type ProviderHttpRequest } from "./provider-http.js";

const exampleApi = defineProviderApi({
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_EXAMPLE_API_KEY",
  createError: (options) => new ProviderApiError({ ...options, provider: "example" }),
});

/** A `send` that records each request and its endpoint, and answers `answer`. */
function recording(answer: unknown) {
  const sent: { request: ProviderHttpRequest; endpoint: MachineEndpoint | undefined }[] = [];
  const send = async (request: ProviderHttpRequest, endpoint?: MachineEndpoint) => {
    sent.push({ request, endpoint });
    return { status: 200, data: answer };
  };
  return { sent, call: jsonCalls("https://api.example.com/v2", send, exampleApi) };
}

const signal = AbortSignal.timeout(10_000);
const machines = z.looseObject({ machines: z.array(z.looseObject({ id: z.number() })) });

describe("jsonCalls", () => {
  it("sends below the root with the endpoint, and parses the answer with the schema", async () => {
    const { sent, call } = recording({ machines: [{ id: 7 }] });
    const params = { owner: "me" };
    const answer = await call("GET", "/machines", {
      schema: machines,
      params,
      endpoint: "list",
      purpose: "listing machines",
      signal,
    });
    expect(answer.machines).toEqual([{ id: 7 }]);
    expect(sent).toEqual([
      {
        request: {
          method: "GET",
          url: "https://api.example.com/v2/machines",
          params,
          idempotent: true,
          purpose: "listing machines",
          signal,
        },
        endpoint: "list",
      },
    ]);
  });

  it("repeats only GET and DELETE unless told; a body and a rate limit go along", async () => {
    const { sent, call } = recording({});
    const rateLimit = { key: "POST /machines", minIntervalMs: 100, penaltyMs: 0 };
    await call("POST", "/machines", {
      data: { name: "a" },
      rateLimit,
      purpose: "creating a machine",
      signal,
    });
    await call("DELETE", "/machines/7", { purpose: "deleting machine 7", signal });
    await call("PUT", "/machines/7", { idempotent: true, purpose: "renaming machine 7", signal });
    expect(sent.map(({ request }) => [request.method, request.idempotent])).toEqual([
      ["POST", false],
      ["DELETE", true],
      ["PUT", true],
    ]);
    expect(sent[0]?.request).toMatchObject({ data: { name: "a" }, rateLimit });
  });

  it("an answer the schema does not know fails in the provider's error, saying what was not understood", async () => {
    const { call } = recording({ results: [] });
    const error = await call("GET", "/machines", {
      schema: machines,
      purpose: "listing machines",
      signal,
    }).catch((caught: unknown) => caught);
    expect(ProviderApiError.isInstance(error)).toBe(true);
    expect((error as ProviderApiError).message).toMatch(/listing machines/);
  });
});
