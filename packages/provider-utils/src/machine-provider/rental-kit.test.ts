import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ProviderHttpRequest } from "../http/provider-http.js";
import { askRentals } from "./ask-rentals.js";
import { keyCheckedOn404 } from "./key-checked-404.js";
import { lenientItemsSchema } from "./lenient-items.js";
import { machineErrorClass } from "./machine-api.js";
import { shellSafePathField } from "./setting-fields.js";
import { rateLimitsField, settingRateLimits } from "./setting-rate-limits.js";

const AcmeError = machineErrorClass("acme", "AcmeApiError");
const signal = new AbortController().signal;
const request = (url: string): ProviderHttpRequest => ({
  method: "GET",
  url,
  idempotent: true,
  purpose: "listing",
  signal,
});

describe("rate-limit settings", () => {
  it("checks each limit and lays the setting over the documented one; creates paced by the settings", () => {
    const field = rateLimitsField(["search", "get"]);
    expect(field.safeParse({ search: { requests: 0, perSeconds: 1 } }).success).toBe(false);
    expect(field.safeParse({ other: { requests: 1, perSeconds: 1 } }).success).toBe(false);
    const documented = { offers: { requests: 10, perSeconds: 60, source: "page" } };
    const settings = {
      rateLimits: field.parse({ get: { requests: 5, perSeconds: 1 } }),
      createIntervalMs: 4950,
      rateLimitPenaltyMs: 12_000,
    };
    expect(settingRateLimits(documented, { offers: "search", get: "get" }, settings, "page")).toEqual({
      endpoints: {
        offers: { requests: 10, perSeconds: 60, source: "page" },
        get: { requests: 5, perSeconds: 1, source: "page" },
        create: { requests: 1, perSeconds: 4.95, penaltySeconds: 12, source: "page" },
      },
    });
  });

  it("a shell-safe path refuses quotes, spaces and $, but takes {id}", () => {
    expect(shellSafePathField().parse("/opt/skyward-{id}")).toBe("/opt/skyward-{id}");
    for (const bad of ["relative", "/a b", "/a$HOME", "/a'b"])
      expect(shellSafePathField().safeParse(bad).success).toBe(false);
  });
});

describe("lenientItemsSchema", () => {
  const item = z.object({ id: z.number(), name: z.string() });
  const fallback = z.looseObject({ id: z.number() }).transform(({ id }) => ({ id, name: "?" }));
  const schema = lenientItemsSchema(item, fallback, "id", "a machine without a numeric id");

  it("keeps an item of an unforeseen shape by what the fallback reads", () => {
    expect(
      schema.parse([
        { id: 1, name: "a" },
        { id: 2, name: 3 },
      ]),
    ).toEqual([
      { id: 1, name: "a" },
      { id: 2, name: "?" },
    ]);
  });

  it("fails the whole list on an item neither reads", () => {
    const result = schema.safeParse([{ id: 1, name: "a" }, { id: "x" }]);
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]).toMatchObject({
      path: [1, "id"],
      message: "a machine without a numeric id",
    });
  });
});

describe("keyCheckedOn404", () => {
  const wrap = keyCheckedOn404({
    ApiError: AcmeError,
    url: "/me",
    rejected: (purpose) => `bad key while ${purpose}`,
  });
  const notFound = new AcmeError({ kind: "gone", statusCode: 404, message: "not found" });

  it("a 404 with a key the check refuses is the rejected key", async () => {
    const send = wrap(async () => {
      throw notFound;
    });
    await expect(send(request("/x"))).rejects.toMatchObject({
      kind: "auth",
      message: expect.stringMatching(/^bad key while listing/),
    });
  });

  it("a 404 with an accepted key means what it says, and the key is checked once", async () => {
    const urls: string[] = [];
    const send = wrap(async (sent) => {
      urls.push(sent.url);
      if (sent.url === "/me") return { status: 200, data: {}, headers: {} } as never;
      throw notFound;
    });
    await expect(send(request("/x"))).rejects.toBe(notFound);
    await expect(send(request("/y"))).rejects.toBe(notFound);
    expect(urls).toEqual(["/x", "/me", "/y"]);
  });
});

describe("askRentals", () => {
  const capacity = (message: string) => new AcmeError({ kind: "capacity", message });
  const base = {
    cluster: "c1",
    name: "c1-0",
    market: "on-demand",
    maxHourlyCost: 2,
    findLost: async () => undefined,
    noAsk: (message: string) => new Error(message),
    label: "Acme",
    signal,
  };

  it("moves past asks over the cap or refused, and never asks a taken one again", async () => {
    const rentals = askRentals();
    const asked: number[] = [];
    const asks = [
      async () => [{ id: 1, price: 3 }],
      async () => [
        { id: 2, price: 1 },
        { id: 3, price: 1 },
      ],
    ];
    const rent = async ({ id }: { id: number }) => {
      asked.push(id);
      if (id === 2) throw capacity("taken");
      return 100 + id;
    };
    expect(await rentals.rent({ ...base, asks, rent })).toMatchObject({ id: 103, price: 1 });
    await expect(rentals.rent({ ...base, name: "c1-1", asks, rent })).rejects.toThrow(
      /on-demand on offer 1: \$3\/h is over maxHourlyCost \$2\/h$/,
    );
    expect(asked).toEqual([2, 3]);
    rentals.forget("c1");
    expect(await rentals.rent({ ...base, asks, rent })).toMatchObject({ id: 103 });
  });

  it("a lost answer is found by name, else thrown; a refusal while it is unsettled is thrown too", async () => {
    const rentals = askRentals();
    const lost = new AcmeError({ kind: "unavailable", message: "no answer" });
    const asks = [async () => [{ id: 1, price: 1 }]];
    await expect(rentals.rent({ ...base, asks, rent: async () => Promise.reject(lost) })).rejects.toBe(lost);
    const refused = capacity("taken");
    await expect(rentals.rent({ ...base, asks, rent: async () => Promise.reject(refused) })).rejects.toBe(
      refused,
    );
    const found = { ...base, findLost: async () => 7, asks: [async () => [{ id: 5, price: 1 }]] };
    expect(await rentals.rent({ ...found, rent: async () => Promise.reject(lost) })).toMatchObject({ id: 7 });
  });
});
