/**
 * The kit's numbered-page reader (every page read; ends at the empty page, the total, a repeated page,
 * a short page where documented; an endless list an error) and its token client (one token shared,
 * renewed once when the API refuses it, never twice in a row).
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineMachineApi } from "./machine-api.js";
import { nextNumberedPage, readNumberedPages } from "./numbered-pages.js";
import { tokenClient } from "./token-client.js";

const exampleApi = defineMachineApi({
  provider: "example",
  errorName: "ExampleApiError",
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_PAGES_TOKENS_KEY",
  classify: () => undefined,
});

const pageOf = (items: readonly number[], total?: number) => ({
  items,
  ...(total === undefined ? {} : { total }),
});

describe("readNumberedPages", () => {
  it("reads every page up to the answer's total, the API's page size winning over the one asked", () => {
    expect(nextNumberedPage(1, 100, { items: [1, 2], total: 5, pageSize: 2 })).toBe(2);
    expect(nextNumberedPage(3, 100, { items: [5], total: 5, pageSize: 2 })).toBeUndefined();
    expect(nextNumberedPage(2, 100, { items: [] })).toBeUndefined();
    // Without a total, a short page ends the list only where the API documents it.
    expect(nextNumberedPage(1, 100, pageOf([1, 2]))).toBe(2);
    expect(nextNumberedPage(1, 100, pageOf([1, 2]), true)).toBeUndefined();
  });

  it("stops at a page of items seen before, and calls a list still going after 1000 pages an API fault", async () => {
    const asked: number[] = [];
    const repeated = await readNumberedPages({
      api: exampleApi,
      list: "/things",
      asked: 2,
      idOf: (item: number) => item,
      read: async (page) => {
        asked.push(page);
        return pageOf([1, 2]);
      },
    });
    expect(repeated).toEqual([1, 2]);
    expect(asked).toEqual([1, 2]);
    const endless = readNumberedPages({
      api: exampleApi,
      list: "/things",
      asked: 1,
      idOf: (item: number) => item,
      read: async (page) => pageOf([page]),
    });
    await expect(endless).rejects.toMatchObject({
      kind: "unavailable",
      message: expect.stringContaining("over 1000 pages"),
    });
  });
});

describe("tokenClient", () => {
  it("asks for one token for calls made together, and for a new one once when the API refuses it", async () => {
    let granted = 0;
    const valid = new Set<string>();
    const fetch = async (input: URL | Request | string, init?: RequestInit) => {
      const request = new Request(input, init);
      const token = request.headers.get("authorization")?.replace(/^Bearer /, "") ?? "";
      if (!valid.has(token)) return Response.json({ message: "Access token is invalid" }, { status: 401 });
      return Response.json({ url: request.url });
    };
    const settings = {
      apiUrl: "https://api.example.com/v1",
      fetch,
      maxRetries: 0,
      retryDelayMs: 1,
      requestTimeoutMs: 5000,
    };
    const client = tokenClient(exampleApi, settings, async () => {
      granted += 1;
      const token = `token-${granted}`;
      valid.add(token);
      return { token, expiresInSeconds: 3600 };
    });
    const read = () =>
      client.read("get", "/things", z.object({ url: z.string() }), "reading", AbortSignal.timeout(5000));
    await Promise.all([read(), read(), read()]);
    expect(granted).toBe(1);
    valid.clear();
    await read();
    expect(granted).toBe(2);
    // A token refused right after it was granted is not asked for again and again: the refusal stands.
    const refusing = tokenClient(exampleApi, settings, async () => ({ token: "never-valid" }));
    await expect(
      refusing.read("get", "/things", z.unknown(), "reading", AbortSignal.timeout(5000)),
    ).rejects.toMatchObject({ kind: "auth", statusCode: 401 });
  });
});
