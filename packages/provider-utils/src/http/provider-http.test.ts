import { ConfigurationError, ProvisionError } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  answerListSchema,
  answerMessage,
  answerNumberSchema,
  answerOptionalListSchema,
  answerTextSchema,
  createProviderHttpClient,
  ProviderApiError,
  type ProviderApiErrorOptions,
  type ProviderHttpAttempt,
  type ProviderHttpClientOptions,
  type ProviderHttpResponse,
  parseProviderAnswer,
  resolveProviderApiKey,
} from "./provider-http.js";

const KEY = "sk_test_SeCrEt0123456789";
const identity = { label: "Example", apiKeyVariable: "EXAMPLE_API_KEY" };

class ExampleApiError extends ProviderApiError {
  constructor(options: ProviderApiErrorOptions) {
    super({ ...options, provider: "example", name: "ExampleApiError" });
  }

  static override isInstance(error: unknown): error is ExampleApiError {
    return ProviderApiError.isInstance(error) && error.provider === "example";
  }
}

/** A client whose request function answers from `answers` in turn and records every attempt. */
function clientAnswering(
  answers: ((attempt: ProviderHttpAttempt) => ProviderHttpResponse | Error)[],
  settings: Partial<ProviderHttpClientOptions> = {},
) {
  const attempts: ProviderHttpAttempt[] = [];
  let keyLookups = 0;
  const client = createProviderHttpClient({
    ...identity,
    apiKey: () => {
      keyLookups += 1;
      return KEY;
    },
    request: async (attempt) => {
      attempts.push(attempt);
      const answer = answers[Math.min(attempts.length - 1, answers.length - 1)]?.(attempt);
      if (answer === undefined) throw new Error("no answer scripted");
      if (answer instanceof Error) throw answer;
      return answer;
    },
    createError: (options) => new ExampleApiError(options),
    maxRetries: 2,
    retryDelayMs: 1,
    timeoutMs: 5_000,
    ...settings,
  });
  return { client, attempts, keyLookups: () => keyLookups };
}

const signal = () => AbortSignal.timeout(10_000);
const read = (purpose = "listing things") =>
  ({
    method: "GET",
    url: "https://api.example.test/v1/things",
    params: { limit: "5" },
    idempotent: true,
    purpose,
    signal: signal(),
  }) as const;

describe("createProviderHttpClient", () => {
  it("looks the key up on the first request and sends it as a bearer token with the deadline", async () => {
    const { client, attempts, keyLookups } = clientAnswering([() => ({ status: 200, data: { ok: true } })]);
    expect(keyLookups()).toBe(0);
    expect(await client.send(read())).toEqual({ status: 200, data: { ok: true } });
    await client.send({
      ...read(),
      method: "POST",
      params: undefined,
      data: { name: "x" },
      idempotent: false,
    });
    expect(keyLookups()).toBe(1);
    expect(attempts[0]).toMatchObject({
      method: "GET",
      url: "https://api.example.test/v1/things",
      params: { limit: "5" },
      headers: { Authorization: `Bearer ${KEY}`, Accept: "application/json" },
      timeout: 5_000,
    });
    expect(attempts[0]).not.toHaveProperty("data");
    expect(attempts[1]).toMatchObject({ method: "POST", data: { name: "x" } });
    expect(attempts[1]).not.toHaveProperty("params");
  });

  it("asks for the key again after a lookup failed", async () => {
    let present = false;
    const { client } = clientAnswering([() => ({ status: 200, data: null })], {
      apiKey: () => resolveProviderApiKey(present ? KEY : undefined, identity),
    });
    await expect(client.send(read())).rejects.toThrow(ConfigurationError);
    present = true;
    expect((await client.send(read())).status).toBe(200);
  });

  it("retries a 429 with doubling backoff, a Retry-After header winning, then fails as retryable", async () => {
    const limited = () => ({ status: 429, data: { message: "slow down" }, headers: { "retry-after": "0" } });
    const { client, attempts } = clientAnswering([limited, () => ({ status: 200, data: [] })], {
      retryDelayMs: 60_000,
    });
    expect((await client.send(read())).data).toEqual([]);
    expect(attempts).toHaveLength(2);

    const always = clientAnswering([() => ({ status: 429, data: "" })], { retryDelayMs: 20 });
    const started = performance.now();
    const error = await always.client.send(read()).catch((caught: unknown) => caught);
    expect(performance.now() - started).toBeGreaterThanOrEqual(55); // 20 + 40 ms
    expect(always.attempts).toHaveLength(3);
    expect(error).toBeInstanceOf(ExampleApiError);
    expect(ProviderApiError.isInstance(error) && ProvisionError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ statusCode: 429, isRetryable: true, provider: "example" });
    expect((error as Error).message).toBe(
      "Example's rate limit (HTTP 429) persisted after 3 attempts while listing things (GET /v1/things); try again later",
    );
  });

  it("spaces requests of one rate-limit key, and holds the key back for the penalty after a 429", async () => {
    const times: number[] = [];
    // Answers like Vast.ai's create endpoint: a request within the interval is refused and starts a penalty.
    let refusedUntil = 0;
    let last = Number.NEGATIVE_INFINITY;
    const { client, attempts } = clientAnswering(
      [
        () => {
          const now = Date.now();
          times.push(now);
          const tooSoon = now < refusedUntil || now - last < 40;
          last = now;
          if (tooSoon) {
            refusedUntil = now + 120;
            return { status: 429, data: "API requests too frequent: endpoint threshold=0.04" };
          }
          return { status: 200, data: { ok: true } };
        },
      ],
      { maxRetries: 3 },
    );
    const create = () =>
      ({
        method: "PUT",
        url: "https://api.example.test/v1/asks/1/",
        idempotent: false,
        purpose: "renting",
        signal: signal(),
        rateLimit: { key: "PUT /asks", minIntervalMs: 50, penaltyMs: 120 },
      }) as const;
    // Three creates at once go one by one, 50 ms apart: none is refused.
    await Promise.all([client.send(create()), client.send(create()), client.send(create())]);
    expect(attempts).toHaveLength(3);
    // Spaced from when each really went; what the fake sees may lag that by the hop to it.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(40);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(40);
    // A refusal (someone else used the key) holds the next attempt back past the penalty, then it goes through.
    refusedUntil = Date.now() + 120;
    await client.send(create());
    expect(attempts).toHaveLength(5);
    expect(times[4]! - times[3]!).toBeGreaterThanOrEqual(115);
  });

  it("backs a paced request off as an unpaced one after a 429 that names no wait (no Retry-After, no penalty)", async () => {
    // TensorDock's limit is 100 a minute per organisation and its 429 says no Retry-After: another client
    // of the account may have used the minute up, so the retries must wait, not go one interval apart.
    const { client, attempts } = clientAnswering([() => ({ status: 429, data: "" })], {
      retryDelayMs: 40,
    });
    const started = performance.now();
    const error = await client
      .send({ ...read(), rateLimit: { key: "account", minIntervalMs: 1, penaltyMs: 0, burst: 100 } })
      .catch((caught: unknown) => caught);
    expect(attempts).toHaveLength(3);
    expect(performance.now() - started).toBeGreaterThanOrEqual(115); // 40 + 80 ms
    expect(error).toMatchObject({ statusCode: 429, isRetryable: true });
  });

  it("keeps an error answer's body for the provider, the key scrubbed and out of JSON", async () => {
    const { client } = clientAnswering([
      () => ({
        status: 400,
        data: { error: "invalid_price", new_contract: 31000001, echo: `Bearer ${KEY}` },
      }),
    ]);
    const error = (await client.send(read()).catch((caught: unknown) => caught)) as ProviderApiError;
    expect(error.answer).toEqual({
      error: "invalid_price",
      new_contract: 31000001,
      echo: "Bearer [redacted]",
    });
    expect(JSON.stringify(error)).not.toContain("new_contract");
    expect(Object.keys(error)).not.toContain("answer");
  });

  it("retries 5xx answers and network failures only for idempotent requests", async () => {
    const failing = clientAnswering([() => ({ status: 502, data: "bad gateway" })]);
    const created = await failing.client
      .send({ ...read("creating a thing"), method: "POST", idempotent: false })
      .catch((caught: unknown) => caught);
    expect(failing.attempts).toHaveLength(1);
    expect(created).toMatchObject({ statusCode: 502, isRetryable: true });
    expect((created as Error).message).toBe(
      "Example's API answered HTTP 502 while creating a thing (POST /v1/things): bad gateway",
    );

    const flaky = clientAnswering([
      () => Object.assign(new Error("connect refused"), { code: "ECONNREFUSED" }),
      () => ({ status: 503, data: { error: "maintenance" } }),
      () => ({ status: 200, data: "ok" }),
    ]);
    expect((await flaky.client.send(read())).data).toBe("ok");
    expect(flaky.attempts).toHaveLength(3);
  });

  it("fails at once on a rejected key, naming the variable, and never shows the key", async () => {
    const { client, attempts } = clientAnswering([
      () => ({ status: 401, data: { detail: `bad key ${KEY}` } }),
    ]);
    const error = await client.send(read()).catch((caught: unknown) => caught);
    expect(attempts).toHaveLength(1);
    expect(error).toMatchObject({ statusCode: 401, isRetryable: false });
    expect((error as Error).message).toBe(
      "Example rejected the API key (HTTP 401) while listing things (GET /v1/things): set EXAMPLE_API_KEY to a valid key or pass apiKey",
    );

    const unreachable = clientAnswering([
      () => Object.assign(new Error(`timeout for Bearer ${KEY}`), { code: "ECONNABORTED", config: { KEY } }),
    ]);
    const failure = await unreachable.client.send(read()).catch((caught: unknown) => caught);
    expect(unreachable.attempts).toHaveLength(3);
    expect((failure as Error).message).toBe(
      "Example's API could not be reached while listing things (GET /v1/things) (3 attempts): ECONNABORTED: timeout for Bearer [redacted]",
    );
    expect(`${String((failure as Error).stack)} ${JSON.stringify(failure)}`).not.toContain(KEY);
    expect((failure as Error).cause).toBeUndefined();
  });

  it("rejects with the signal's reason when the call is aborted, before or while waiting to retry", async () => {
    const { client, attempts } = clientAnswering([() => ({ status: 200, data: null })]);
    await expect(client.send({ ...read(), signal: AbortSignal.abort(new Error("gave up")) })).rejects.toThrow(
      "gave up",
    );
    expect(attempts).toHaveLength(0);

    const controller = new AbortController();
    const waiting = clientAnswering([() => ({ status: 429, data: null })], { retryDelayMs: 60_000 });
    const sent = waiting.client.send({ ...read(), signal: controller.signal });
    setTimeout(() => controller.abort(new Error("pool closed")), 20);
    await expect(sent).rejects.toThrow("pool closed");
    expect(waiting.attempts).toHaveLength(1);
  });
});

describe("resolveProviderApiKey", () => {
  it("takes the setting, else the environment variable, trimmed; else says how to set one", () => {
    const saved = process.env.EXAMPLE_API_KEY;
    try {
      delete process.env.EXAMPLE_API_KEY;
      expect(resolveProviderApiKey(` ${KEY}\n`, identity)).toBe(KEY);
      let error: unknown;
      try {
        resolveProviderApiKey("  ", identity);
      } catch (caught) {
        error = caught;
      }
      expect((error as ConfigurationError).issues).toEqual([
        { path: "apiKey", message: "Example API key is missing: set EXAMPLE_API_KEY or pass apiKey" },
      ]);
      process.env.EXAMPLE_API_KEY = "from-env";
      expect(resolveProviderApiKey(undefined, identity)).toBe("from-env");
    } finally {
      if (saved === undefined) delete process.env.EXAMPLE_API_KEY;
      else process.env.EXAMPLE_API_KEY = saved;
    }
  });
});

describe("answerMessage", () => {
  it("finds the message of an error answer, shortened", () => {
    expect(answerMessage({ errors: [{ message: "GraphQL says no" }] })).toBe("GraphQL says no");
    expect(
      answerMessage({
        errors: [{ status: "400", title: "Bad Request", detail: "No capacity at this location" }],
      }),
    ).toBe("No capacity at this location");
    expect(answerMessage({ errors: [{ status: "404", title: "Not Found" }] })).toBe("Not Found");
    expect(answerMessage({ success: false, error: "forbidden", msg: "no permission" })).toBe("no permission");
    expect(answerMessage({ detail: " too frequent " })).toBe("too frequent");
    expect(answerMessage("x".repeat(400))).toHaveLength(300);
    expect([answerMessage(""), answerMessage(42), answerMessage({ other: 1 })]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe("ProviderApiError", () => {
  it("is recognised by its marker, and a subclass by its provider, from any copy of the package", () => {
    const error = new ExampleApiError({ message: "m", statusCode: 503, isRetryable: true });
    expect([error.name, error.provider, error.statusCode, error.isRetryable]).toEqual([
      "ExampleApiError",
      "example",
      503,
      true,
    ]);
    expect(ProviderApiError.isInstance(error) && ProvisionError.isInstance(error)).toBe(true);
    expect(ExampleApiError.isInstance(error)).toBe(true);
    const other = new ProviderApiError({ message: "m", provider: "other" });
    expect([other.name, ExampleApiError.isInstance(other), ProviderApiError.isInstance(other)]).toEqual([
      "ProviderApiError",
      false,
      true,
    ]);
    const copy = Object.defineProperty(new Error("x"), Symbol.for("skyward.error.provider-api"), {
      value: true,
    });
    expect(ProviderApiError.isInstance(copy)).toBe(true);
    expect([ProviderApiError.isInstance(new Error("x")), ProviderApiError.isInstance(null)]).toEqual([
      false,
      false,
    ]);
  });
});

describe("parseProviderAnswer", () => {
  const schema = z.looseObject({ items: z.array(z.looseObject({ id: z.number() })) });
  const api = {
    label: "Example",
    createError: (options: ProviderApiErrorOptions) => new ExampleApiError(options),
  };

  it("returns the parsed answer", () => {
    expect(parseProviderAnswer(schema, { items: [{ id: 1 }], more: true }, "listing things", api)).toEqual({
      items: [{ id: 1 }],
      more: true,
    });
  });

  it("fails with the provider's error naming the purpose and the first issue's path", () => {
    const failure = (value: unknown) => {
      try {
        parseProviderAnswer(schema, value, "listing things", api);
      } catch (error) {
        return error;
      }
      throw new Error("expected a failure");
    };
    const error = failure({ items: [{ id: "one" }] });
    expect(error).toBeInstanceOf(ExampleApiError);
    expect((error as ExampleApiError).message).toMatch(
      /^Example's answer to listing things was not understood: items\.0\.id: /,
    );
    expect((error as ExampleApiError).isRetryable).toBe(false);
    expect((failure("not an object") as Error).message).toMatch(/not understood: \(root\): /);
  });
});

describe("answerNumberSchema", () => {
  it("reads numbers and numeric strings; null for anything else", () => {
    const read = (value: unknown) => answerNumberSchema.parse(value);
    expect([read(1.5), read("0.25"), read(0), read(-3)]).toEqual([1.5, 0.25, 0, -3]);
    expect([read(undefined), read(null), read("n/a"), read("Infinity")]).toEqual([null, null, null, null]);
    expect(answerNumberSchema.safeParse({}).success).toBe(false);
  });
});

describe("answerListSchema, answerOptionalListSchema and answerTextSchema", () => {
  it("refuse an absent list (never read as 'no instances'), read an optional one as empty, and an absent or null string as empty; items are checked", () => {
    const list = answerListSchema(z.object({ id: z.number() }));
    expect(list.parse([{ id: 1 }])).toEqual([{ id: 1 }]);
    expect(list.safeParse(undefined).error?.issues[0]?.message).toBe("expected a list");
    expect(list.safeParse(null).success).toBe(false);
    expect(list.safeParse([{ id: "1" }]).success).toBe(false);
    const optional = answerOptionalListSchema(z.object({ id: z.number() }));
    expect([optional.parse(undefined), optional.parse(null)]).toEqual([[], []]);
    expect([
      answerTextSchema.parse(undefined),
      answerTextSchema.parse(null),
      answerTextSchema.parse("a"),
    ]).toEqual(["", "", "a"]);
    expect(answerTextSchema.safeParse(3).success).toBe(false);
  });
});
