/**
 * Endpoints as data (`machineEndpoints`): a declared route becomes a typed call with its path filled
 * in (encoded), its purpose in messages, its query and body sent; a list reads one page or every page,
 * numbered or by token; an answer the schema does not know fails loudly, never as an empty list.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { endpoint, listEndpoint, machineEndpoints } from "./endpoints.js";
import { defineMachineApi } from "./machine-api.js";

const exampleApi = defineMachineApi({
  provider: "example",
  errorName: "ExampleApiError",
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_ENDPOINTS_KEY",
  classify: () => undefined,
});

const machine = z.object({ id: z.number(), name: z.string() });
const numberedAnswer = z.object({ items: z.array(machine), count: z.number().nullish() });
const tokenAnswer = z.looseObject({ items: z.array(machine), next: z.string().nullish() });

const exampleCalls = machineEndpoints(exampleApi, {
  get: endpoint("GET /machines/{id}", machine, "looking up machine {id}", "get"),
  create: endpoint(
    "POST /regions/{region}/machines",
    machine,
    (input) => `creating machine ${(input.body as { name: string }).name}`,
    "create",
  ),
  remove: endpoint("DELETE /machines/{id}", undefined, "deleting machine {id}", { paced: "delete" }),
  numbered: listEndpoint("GET /machines", numberedAnswer, "listing machines", {
    paced: "list",
    query: { search: "skyward-" },
    items: (answer) => answer.items,
    pages: {
      numbered: {
        pageParam: "page",
        sizeParam: "pageSize",
        size: 2,
        total: (answer) => answer.count,
        idOf: (item) => item.id,
      },
    },
  }),
  tokened: listEndpoint("GET /v1/machines", tokenAnswer, "listing machines", {
    items: "items",
    pages: { token: { param: "after", next: (answer) => answer.next } },
  }),
  single: listEndpoint(
    "GET /all",
    z.object({ data: z.object({ items: z.array(machine) }) }),
    "listing everything",
    {
      items: (answer) => answer.data.items,
    },
  ),
});

/** A fake API holding machines 1–5, answering each request from its path and query; every request kept. */
function fakeApi() {
  const seen: { method: string; path: string; query: Record<string, string>; body: unknown }[] = [];
  const all = [1, 2, 3, 4, 5].map((id) => ({ id, name: `skyward-${id}` }));
  const fetch = async (input: URL | Request | string, init?: RequestInit) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const query = Object.fromEntries(url.searchParams);
    const body = request.method === "GET" ? undefined : await request.json().catch(() => undefined);
    seen.push({ method: request.method, path: url.pathname, query, body });
    const json = (data: unknown) => Response.json(data);
    if (url.pathname === "/v1/machines/a%2Fb") return json({ id: 9, name: "x" });
    if (url.pathname.startsWith("/v1/regions/"))
      return json({ id: 6, name: (body as { name: string }).name });
    if (request.method === "DELETE") return new Response(null, { status: 204 });
    if (url.pathname === "/v1/machines") {
      const page = Number(query.page);
      return json({ items: all.slice((page - 1) * 2, page * 2), count: all.length });
    }
    if (url.pathname === "/v1/v1/machines") {
      const from = Number(query.after ?? 0);
      return json({
        items: all.slice(from, from + 2),
        ...(from + 2 < all.length ? { next: String(from + 2) } : {}),
      });
    }
    return json({ data: { list: [] } });
  };
  const client = exampleApi.jsonClient({
    apiUrl: "http://api.example.test/v1/",
    apiKey: "sk_test_endpoints",
    maxRetries: 0,
    retryDelayMs: 1,
    requestTimeoutMs: 5000,
    fetch,
  });
  return { seen, calls: exampleCalls(client) };
}

const signal = () => AbortSignal.timeout(5000);

describe("machineEndpoints", () => {
  it("a call fills its path (encoded), sends its body and parses the answer", async () => {
    const { seen, calls } = fakeApi();
    expect(await calls.get({ id: "a/b" }, signal())).toEqual({ id: 9, name: "x" });
    expect(await calls.create({ region: "eu", body: { name: "skyward-6" } }, signal())).toEqual({
      id: 6,
      name: "skyward-6",
    });
    await calls.remove({ id: 3 }, signal());
    await expect(calls.single.all({ purpose: "counting machines" }, signal())).rejects.toThrow(
      /counting machines/,
    );
    expect(seen.map(({ method, path, body }) => [method, path, body])).toEqual([
      ["GET", "/v1/machines/a%2Fb", undefined],
      ["POST", "/v1/regions/eu/machines", { name: "skyward-6" }],
      ["DELETE", "/v1/machines/3", undefined],
      ["GET", "/v1/all", undefined],
    ]);
  });

  it("a numbered list reads a page with its declared query, then every page up to the total", async () => {
    const { seen, calls } = fakeApi();
    const first = await calls.numbered.page(undefined, signal());
    expect(first).toEqual({
      machines: [
        { id: 1, name: "skyward-1" },
        { id: 2, name: "skyward-2" },
      ],
      next: "2",
    });
    expect(seen[0]?.query).toEqual({ search: "skyward-", page: "1", pageSize: "2" });
    expect((await calls.numbered.page("3", signal())).next).toBeUndefined();
    const every = await calls.numbered.all({ query: { environment: "e1" } }, signal());
    expect(every.map((item) => item.id)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.at(-1)?.query).toEqual({ search: "skyward-", environment: "e1", page: "3", pageSize: "2" });
  });

  it("a token list follows the answer's token to the last page", async () => {
    const { seen, calls } = fakeApi();
    expect((await calls.tokened.all({}, signal())).map((item) => item.id)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.map(({ query }) => query.after)).toEqual([undefined, "2", "4"]);
  });

  it("an answer the schema does not know is the provider's error naming the purpose, not an empty list", async () => {
    const { calls } = fakeApi();
    const failure = calls.single.page(undefined, signal());
    await expect(failure).rejects.toThrow(/listing everything/);
    await expect(calls.single.all({}, signal())).rejects.toSatisfy((error) =>
      exampleApi.ApiError.isInstance(error),
    );
  });
});
