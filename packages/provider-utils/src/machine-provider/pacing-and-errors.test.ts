/**
 * Pacing by documented rate limits (a sliding window per endpoint or account, a 429's `Retry-After`
 * holding the key back) and the one error taxonomy every machine provider's failures go through.
 */
import { describe, expect, it } from "vitest";
import { createProviderHttpClient, retryAfterMs } from "../http/provider-http.js";
import { createRequestPacer } from "../http/request-pacer.js";
import { kindOfStatus, MachineProviderError, machineErrorFactory } from "./errors.js";
import { pacedClient, rateLimitFor } from "./pacing.js";

describe("pacing", () => {
  it("turns documented limits into the client's: a burst within the window, the endpoint's own limit first", () => {
    const limits = {
      account: { requests: 100, perSeconds: 60, source: "https://example.com/limits" },
      endpoints: { get: { requests: 1, perSeconds: 2, source: "https://example.com/limits" } },
    };
    expect(rateLimitFor(limits, "list")).toEqual({
      key: "account",
      minIntervalMs: 600,
      penaltyMs: 0,
      burst: 100,
    });
    expect(rateLimitFor(limits, "get")).toEqual({
      key: "endpoint:get",
      minIntervalMs: 2000,
      penaltyMs: 0,
      burst: 1,
    });
    expect(rateLimitFor({}, "get")).toBeUndefined();
  });

  it("lets a burst go at once, then holds the next request until the window has passed", async () => {
    // A virtual clock: sleeping moves it on, so the waits are exact and no wall clock is read.
    let now = 0;
    const slept: number[] = [];
    const pacer = createRequestPacer(
      () => now,
      async (ms) => {
        slept.push(ms);
        now += ms;
      },
    );
    const limit = { key: "account", minIntervalMs: 10, penaltyMs: 0, burst: 3 };
    const signal = AbortSignal.timeout(5000);
    for (let request = 0; request < 3; request += 1) await pacer.take(limit, signal);
    expect(slept).toEqual([]);
    // The fourth of three a 30 ms window: it waits until the first request's window has passed.
    now = 5;
    await pacer.take(limit, signal);
    expect(slept).toEqual([25]);
    expect(now).toBe(30);
    now = 1000;
    pacer.holdBack(limit, 40);
    await pacer.take(limit, signal);
    expect(slept).toEqual([25, 40]);
  });

  it("spaces callers from when the one before really went, in call order", async () => {
    let now = 0;
    const went: number[] = [];
    const pacer = createRequestPacer(
      () => now,
      async (ms) => {
        // The first sleeper's timer fires 7 ms late (a loaded machine): the next still waits 50 ms.
        now += ms + (went.length === 1 ? 7 : 0);
      },
    );
    const limit = { key: "PUT /asks", minIntervalMs: 50, penaltyMs: 0 };
    const signal = AbortSignal.timeout(5000);
    await Promise.all(
      [0, 1, 2].map(async () => {
        await pacer.take(limit, signal);
        went.push(now);
      }),
    );
    expect(went).toEqual([0, 57, 107]);
  });

  it("honours Retry-After on a paced endpoint: nothing of the key goes before it has passed", async () => {
    const sent: number[] = [];
    const http = createProviderHttpClient({
      label: "Example",
      apiKeyVariable: "EXAMPLE_API_KEY",
      apiKey: () => "key",
      request: async () => {
        sent.push(Date.now());
        return sent.length === 1
          ? { status: 429, data: { message: "slow down" }, headers: { "retry-after": "1" } }
          : { status: 200, data: { ok: true } };
      },
      createError: machineErrorFactory({ provider: "example" }),
      maxRetries: 2,
      retryDelayMs: 1,
      timeoutMs: 5000,
    });
    const client = pacedClient(http, {
      account: { requests: 100, perSeconds: 60, source: "https://example.com/limits" },
    });
    const answer = await client.send("list", {
      method: "GET",
      url: "https://api.example.com/machines",
      idempotent: true,
      purpose: "listing machines",
      signal: AbortSignal.timeout(5000),
    });
    expect(answer.data).toEqual({ ok: true });
    expect((sent[1] ?? 0) - (sent[0] ?? 0)).toBeGreaterThanOrEqual(990);
  });

  it("reads Retry-After as seconds or as an HTTP date, at most a minute", () => {
    expect(retryAfterMs({ headers: { "retry-after": "3" } })).toBe(3000);
    expect(retryAfterMs({ headers: { "retry-after": "3600" } })).toBe(60_000);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfterMs({ headers: { "retry-after": inTenSeconds } })).toBeGreaterThan(8000);
    expect(retryAfterMs({ headers: { "retry-after": "soon" } })).toBeUndefined();
    expect(retryAfterMs({ headers: {} })).toBeUndefined();
  });
});

describe("the error taxonomy", () => {
  it("classifies by status when the provider says nothing more", () => {
    expect([401, 402, 403, 404, 409, 410, 429, 400, 500, undefined].map(kindOfStatus)).toEqual([
      "auth",
      "price",
      "auth",
      "gone",
      "busy",
      "gone",
      "rate-limit",
      "bad-request",
      "unavailable",
      "unavailable",
    ]);
  });

  it("lets the provider's classifier read the answer, and says what to do about each kind", () => {
    const create = machineErrorFactory({
      provider: "example",
      classify: ({ statusCode, answer }) => {
        const code = (answer as { code?: string } | undefined)?.code;
        if (statusCode === 403 && code === "POOL_NOT_ALLOWED") return "account";
        if (code === "QUOTA_EXCEEDED") return "quota";
        if (code === "OUT_OF_STOCK") return "capacity";
        return undefined;
      },
    });
    const account = create({
      statusCode: 403,
      message: "Example refused",
      answer: { code: "POOL_NOT_ALLOWED" },
    });
    expect(MachineProviderError.isInstance(account)).toBe(true);
    expect(account.kind).toBe("account");
    expect(account.message).toMatch(/this account may not use what was asked/);
    expect(account.provider).toBe("example");
    const quota = create({ statusCode: 403, message: "Example refused", answer: { code: "QUOTA_EXCEEDED" } });
    expect(quota.kind).toBe("quota");
    expect(quota.message).toMatch(/raise the account's quota/);
    const capacity = create({
      statusCode: 400,
      message: "Example: out of stock",
      answer: { code: "OUT_OF_STOCK" },
    });
    expect([capacity.kind, capacity.isRetryable]).toEqual(["capacity", true]);
    const bad = create({ statusCode: 400, message: "Example: bad image" });
    expect([bad.kind, bad.isRetryable]).toEqual(["bad-request", false]);
    expect(create({ message: "not understood", unknownAnswer: true }).kind).toBe("unknown-answer");
  });
});
