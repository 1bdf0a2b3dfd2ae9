/**
 * The plumbing of a fake REST API on loopback, for provider tests whose real API cannot run here: an
 * HTTP server on 127.0.0.1 (a free port) that parses each request (path without the API's prefix,
 * query, headers, JSON body), records it, hands it to the fake's handler — usually a route table
 * ({@link fakeRoutes}) — and writes the answer the handler returns ({@link jsonAnswer},
 * {@link textAnswer}). What the API answers, and from which documentation page, stays in each fake.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { listenOnFreePort } from "./http-listen.js";

/** One request, as a fake REST server hands it to its handler. */
export interface FakeRestRequest {
  readonly method: string;
  /** The whole URL (its `pathname` with the prefix). */
  readonly url: URL;
  /** The URL's path with the server's `prefix` taken off (`/instances/42`). */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  /** The body parsed as JSON; undefined when empty (see {@link FakeRestServerOptions.textBodies}). */
  readonly body: unknown;
}

/** What a fake answers: an HTTP status and a body, JSON unless `contentType` says otherwise. */
export interface FakeRestAnswer {
  readonly status: number;
  /** Serialised as JSON; a string with a non-JSON `contentType` is sent as it is; undefined: no body. */
  readonly body?: unknown;
  /** Default `application/json`. */
  readonly contentType?: string;
  /** More response headers (a 429's `Retry-After`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A JSON answer (no body when `body` is undefined). */
export function jsonAnswer(status: number, body?: unknown, contentType?: string): FakeRestAnswer {
  return contentType === undefined ? { status, body } : { status, body, contentType };
}

/** A plain-text answer. */
export function textAnswer(status: number, text: string): FakeRestAnswer {
  return { status, body: text, contentType: "text/plain" };
}

/** Answers one request; the values of the route's `:name` segments are in `params`. */
export type FakeRestHandler = (
  request: FakeRestRequest,
  params: Readonly<Record<string, string>>,
) => FakeRestAnswer | Promise<FakeRestAnswer>;

/**
 * A route table as one handler: keys are `"METHOD /path"`, where a `:name` segment matches any one
 * segment (URL-decoded into `params.name`); the first route that matches answers, `fallback` answers
 * the rest.
 */
export function fakeRoutes(
  routes: Readonly<Record<string, FakeRestHandler>>,
  fallback: (request: FakeRestRequest) => FakeRestAnswer | Promise<FakeRestAnswer>,
): (request: FakeRestRequest) => Promise<FakeRestAnswer> {
  const table = Object.entries(routes).map(([key, handle]) => {
    const [method, path = ""] = key.split(" ");
    return { method, segments: path.split("/"), handle };
  });
  return async (request) => {
    const segments = request.path.split("/");
    for (const route of table) {
      if (route.method !== request.method || route.segments.length !== segments.length) continue;
      const params: Record<string, string> = {};
      const matches = route.segments.every((segment, index) => {
        const actual = segments[index] ?? "";
        if (!segment.startsWith(":")) return segment === actual;
        if (actual === "") return false;
        params[segment.slice(1)] = decodeURIComponent(actual);
        return true;
      });
      if (matches) return route.handle(request, params);
    }
    return fallback(request);
  };
}

/** Options of {@link startFakeRestServer}. */
export interface FakeRestServerOptions<Recorded> {
  /** The API's path prefix (`/v1`): taken off each request's path, and part of {@link FakeRestServer.url}. */
  readonly prefix?: string;
  /** Answers a request (after it is recorded). */
  readonly handle: (request: FakeRestRequest) => FakeRestAnswer | Promise<FakeRestAnswer>;
  /** The answer when `handle` (or parsing the body) throws: the fake's 500 in the API's error shape. */
  readonly failed: (error: unknown) => FakeRestAnswer;
  /** What the request log keeps of each request (the fake's own record shape). */
  readonly record: (request: FakeRestRequest) => Recorded;
  /** A body that is not JSON is handed on as its text instead of failing the request. Default false. */
  readonly textBodies?: boolean;
}

/** A running fake REST server. */
export interface FakeRestServer<Recorded> extends AsyncDisposable {
  /** `http://127.0.0.1:PORT` followed by the prefix: what the provider is given as its API URL. */
  readonly url: string;
  /** `http://127.0.0.1:PORT`. */
  readonly origin: string;
  /** Every request received, in order, as `record` made it. */
  readonly requests: Recorded[];
  close(): Promise<void>;
}

function parseBody(text: string, textBodies: boolean): unknown {
  if (text === "") return undefined;
  if (!textBodies) return JSON.parse(text);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Starts a fake REST server on 127.0.0.1 (a free port). */
export async function startFakeRestServer<Recorded>(
  options: FakeRestServerOptions<Recorded>,
): Promise<FakeRestServer<Recorded>> {
  const prefix = options.prefix ?? "";
  const requests: Recorded[] = [];
  const server = createServer((incoming, response) => {
    const send = (answer: FakeRestAnswer) => {
      const type = answer.contentType ?? "application/json";
      response.writeHead(answer.status, { ...answer.headers, "content-type": type });
      if (answer.body === undefined) response.end();
      else if (typeof answer.body === "string" && !type.startsWith("application/json"))
        response.end(answer.body);
      else response.end(JSON.stringify(answer.body));
    };
    const run = async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of incoming) chunks.push(chunk as Buffer);
      const url = new URL(incoming.url ?? "/", "http://fake");
      const path = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : url.pathname;
      const request: FakeRestRequest = {
        method: incoming.method ?? "GET",
        url,
        path,
        query: url.searchParams,
        headers: incoming.headers,
        body: parseBody(Buffer.concat(chunks).toString("utf8"), options.textBodies === true),
      };
      requests.push(options.record(request));
      send(await options.handle(request));
    };
    run().catch((error: unknown) => send(options.failed(error)));
  });
  const { url: origin, close } = await listenOnFreePort(server);
  return { url: `${origin}${prefix}`, origin, requests, close, [Symbol.asyncDispose]: close };
}
