import { ConfigurationError } from "@skyward/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { httpSettingsShape } from "./http-settings.js";
import { defineProviderApi } from "./provider-api.js";
import { ProviderApiError, type ProviderApiErrorOptions } from "./provider-http.js";

const KEY = "sk_test_SeCrEt0123456789";

class ExampleApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "example", name: "ExampleApiError" });
  }
}

const exampleApi = defineProviderApi({
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_EXAMPLE_API_KEY",
  createError: (options) => new ExampleApiError(options),
});

const settingsSchema = z.strictObject({ ...httpSettingsShape });

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("defineProviderApi", () => {
  it("sends through the injected fetch with the bearer key, and parses the JSON answer", async () => {
    const seen: Request[] = [];
    const fetch = async (input: URL | Request | string, init?: RequestInit) => {
      const request = new Request(input, init);
      seen.push(request);
      return Response.json({ machines: [{ id: 7 }] });
    };
    const http = exampleApi.createClient(settingsSchema.parse({ apiKey: KEY, fetch }));
    const answer = await http.send({
      method: "POST",
      url: "https://api.example.com/v1/machines",
      params: { owner: "me" },
      data: { gpu: "A100" },
      idempotent: true,
      purpose: "listing machines",
      signal: AbortSignal.timeout(5000),
    });
    expect(answer).toEqual({ status: 200, data: { machines: [{ id: 7 }] } });
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.url).toBe("https://api.example.com/v1/machines?owner=me");
    expect(request?.headers.get("authorization")).toBe(`Bearer ${KEY}`);
    expect(await request?.json()).toEqual({ gpu: "A100" });
  });

  it("sends the bare key in the identity's apiKeyHeader instead of a bearer token", async () => {
    const seen: Request[] = [];
    const headerApi = defineProviderApi({
      label: "Header",
      apiKeyVariable: "SKYWARD_TEST_HEADER_API_KEY",
      apiKeyHeader: "api_key",
      createError: (options) => new ExampleApiError(options),
    });
    const fetch = async (input: URL | Request | string, init?: RequestInit) => {
      seen.push(new Request(input, init));
      return Response.json({ status: true });
    };
    const http = headerApi.createClient(settingsSchema.parse({ apiKey: KEY, fetch }));
    await http.send({
      method: "GET",
      url: "https://api.example.com/v1/flavors",
      idempotent: true,
      purpose: "listing flavors",
      signal: AbortSignal.timeout(5000),
    });
    expect(seen[0]?.headers.get("api_key")).toBe(KEY);
    expect(seen[0]?.headers.get("authorization")).toBeNull();
  });

  it("retries through fetch, and its errors are the provider's, without the key", async () => {
    let calls = 0;
    const fetch = async () => {
      calls += 1;
      return calls === 1
        ? Response.json({ message: "slow down" }, { status: 429 })
        : Response.json({ message: `bad key ${KEY}` }, { status: 400 });
    };
    const http = exampleApi.createClient(settingsSchema.parse({ apiKey: KEY, fetch, retryDelayMs: 1 }));
    const error = await http
      .send({
        method: "GET",
        url: "https://api.example.com/v1/machines",
        idempotent: true,
        purpose: "listing machines",
        signal: AbortSignal.timeout(5000),
      })
      .catch((caught: unknown) => caught);
    expect(calls).toBe(2);
    expect(error).toBeInstanceOf(ExampleApiError);
    expect((error as ExampleApiError).statusCode).toBe(400);
    expect((error as Error).message).toContain("Example's API answered HTTP 400 while listing machines");
    expect((error as Error).message).not.toContain(KEY);
  });

  it("looks the key up in the environment, saying how to set one when it is missing", async () => {
    expect(() => exampleApi.resolveApiKey(undefined)).toThrow(ConfigurationError);
    expect(() => exampleApi.resolveApiKey(undefined)).toThrow(
      "set SKYWARD_TEST_EXAMPLE_API_KEY or pass apiKey",
    );
    vi.stubEnv("SKYWARD_TEST_EXAMPLE_API_KEY", ` ${KEY} `);
    expect(exampleApi.resolveApiKey(undefined)).toBe(KEY);
    expect(exampleApi.resolveApiKey("given")).toBe("given");
  });

  it("parses answers, failing with the provider's error", () => {
    expect(exampleApi.parseAnswer(z.object({ id: z.number() }), { id: 1 }, "reading")).toEqual({ id: 1 });
    expect(() => exampleApi.parseAnswer(z.object({ id: z.number() }), { id: "x" }, "reading")).toThrow(
      /Example's answer to reading was not understood: id:/,
    );
  });
});

describe("httpSettingsShape", () => {
  it("fills the defaults and names a bad field", () => {
    expect(settingsSchema.parse({})).toEqual({ maxRetries: 4, retryDelayMs: 1000, requestTimeoutMs: 30_000 });
    const parsed = settingsSchema.safeParse({ maxRetries: 1.5, apiKey: "" });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((issue) => issue.path.join("."))).toEqual(["apiKey", "maxRetries"]);
  });
});
