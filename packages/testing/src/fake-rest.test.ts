import { describe, expect, it } from "vitest";
import { fakeRoutes, jsonAnswer, startFakeRestServer, textAnswer } from "./fake-rest.js";

describe("startFakeRestServer", () => {
  it("routes by method and path under its prefix, records each request, answers JSON, text and errors", async () => {
    const routes = fakeRoutes(
      {
        "GET /items": ({ query }) => jsonAnswer(200, { items: [], page: query.get("page") }),
        "GET /items/:id": (_, { id }) => jsonAnswer(200, { id }),
        "POST /items": ({ body }) => textAnswer(201, `made ${(body as { name: string }).name}`),
        "DELETE /items/:id": () => jsonAnswer(204),
        "GET /broken": () => {
          throw new Error("route failed");
        },
      },
      ({ method, path }) => jsonAnswer(404, { error: `no route ${method} ${path}` }),
    );
    await using server = await startFakeRestServer({
      prefix: "/api/v2",
      handle: routes,
      failed: (error) => jsonAnswer(500, { error: String(error) }),
      record: ({ method, path, url, headers, body }) => ({
        method,
        path,
        full: url.pathname,
        token: headers.authorization,
        body,
      }),
    });
    expect(server.url).toBe(`${server.origin}/api/v2`);
    const call = (path: string, init?: RequestInit) => fetch(`${server.url}${path}`, init);

    const listed = await call("/items?page=2", { headers: { authorization: "Bearer t" } });
    expect([listed.status, listed.headers.get("content-type"), await listed.json()]).toEqual([
      200,
      "application/json",
      { items: [], page: "2" },
    ]);
    expect(await (await call("/items/a%20b")).json()).toEqual({ id: "a b" });
    const made = await call("/items", { method: "POST", body: JSON.stringify({ name: "x" }) });
    expect([made.status, made.headers.get("content-type"), await made.text()]).toEqual([
      201,
      "text/plain",
      "made x",
    ]);
    const deleted = await call("/items/7", { method: "DELETE" });
    expect([deleted.status, await deleted.text()]).toEqual([204, ""]);
    // A path with an extra segment, or another method, is no route.
    expect((await call("/items/7/more")).status).toBe(404);
    expect(await (await call("/items/7", { method: "PUT" })).json()).toEqual({
      error: "no route PUT /items/7",
    });
    // A route that throws, and a body that is not JSON, get the fake's 500.
    expect(await (await call("/broken")).json()).toEqual({ error: "Error: route failed" });
    expect((await call("/items", { method: "POST", body: "not json" })).status).toBe(500);

    expect(server.requests.map((request) => `${request.method} ${request.path} ${request.full}`)).toEqual([
      "GET /items /api/v2/items",
      "GET /items/a%20b /api/v2/items/a%20b",
      "POST /items /api/v2/items",
      "DELETE /items/7 /api/v2/items/7",
      "GET /items/7/more /api/v2/items/7/more",
      "PUT /items/7 /api/v2/items/7",
      "GET /broken /api/v2/broken",
    ]);
    expect(server.requests[0]?.token).toBe("Bearer t");
    expect(server.requests[2]?.body).toEqual({ name: "x" });
  });

  it("with textBodies hands a body that is not JSON on as its text", async () => {
    await using server = await startFakeRestServer({
      textBodies: true,
      handle: ({ body }) => jsonAnswer(200, { body: body ?? null }),
      failed: () => jsonAnswer(500),
      record: ({ body }) => body,
    });
    const answer = (init: RequestInit) => fetch(`${server.url}/`, init).then((response) => response.json());
    expect(await answer({ method: "POST", body: "a=b" })).toEqual({ body: "a=b" });
    expect(await answer({ method: "POST", body: "[1]" })).toEqual({ body: [1] });
    expect(await answer({ method: "GET" })).toEqual({ body: null });
    expect(server.requests).toEqual(["a=b", [1], undefined]);
  });
});
