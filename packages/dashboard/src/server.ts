/**
 * The dashboard's HTTP server (`node:http`): the page and its scripts, the JSON endpoints, the
 * Server-Sent Events stream, and the two write actions. Bound to 127.0.0.1 by default; every data
 * endpoint wants the random token the printed link carries (401 without it).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Pool } from "@skyward/core";
import type { StreamBatch } from "./payloads.js";
import type { DashboardRecorder } from "./recorder.js";

/** Seconds between stream batches (and redraws of the page). */
const BATCH_INTERVAL_MS = 1000;
/** An SSE comment this often keeps proxies and the browser from closing an idle stream. */
const KEEPALIVE_MS = 15_000;
/**
 * Bytes a stream may have waiting to be sent before it is ended: a page that stopped reading (a
 * frozen tab) does not grow the client's memory; when it reads again it reconnects and replays.
 */
const STREAM_BACKLOG_LIMIT = 8 * 1024 * 1024;

const pageDirectory = new URL("../page/", import.meta.url);
const require = createRequire(import.meta.url);

/** The page's static files: name → where it lies and its content type. No data in them, so no token. */
const ASSETS: Record<string, { readonly path: () => string | URL; readonly type: string }> = {
  "/app.js": { path: () => new URL("app.js", pageDirectory), type: "text/javascript; charset=utf-8" },
  "/charts.js": { path: () => new URL("charts.js", pageDirectory), type: "text/javascript; charset=utf-8" },
  "/style.css": { path: () => new URL("style.css", pageDirectory), type: "text/css; charset=utf-8" },
  "/uPlot.iife.min.js": {
    path: () => require.resolve("uplot/dist/uPlot.iife.min.js"),
    type: "text/javascript; charset=utf-8",
  },
  "/uPlot.min.css": {
    path: () => require.resolve("uplot/dist/uPlot.min.css"),
    type: "text/css; charset=utf-8",
  },
};

/** A running dashboard. */
export interface DashboardServer {
  /** The link to open, its token included (`http://127.0.0.1:PORT/?token=…`). */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** Stops serving: open pages' streams end. Idempotent. */
  close(): Promise<void>;
}

/** Where {@link startServer} listens. */
export interface ListenOptions {
  readonly port: number;
  readonly host: string;
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
};

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { ...SECURITY_HEADERS, "content-type": "application/json; charset=utf-8" });
  response.end(JSON.stringify(body));
}

function tokenMatches(expected: Buffer, given: string | null): boolean {
  if (given === null) return false;
  const bytes = Buffer.from(given);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

function bearer(request: IncomingMessage): string | null {
  const header = request.headers.authorization;
  return header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : null;
}

function sseMessage(batch: StreamBatch): string {
  return `id: ${batch.id}\nevent: batch\ndata: ${JSON.stringify(batch)}\n\n`;
}

/**
 * Serves `recorder`'s view of the pool `currentPool` gives (undefined while it is being provisioned:
 * the page shows what the events said so far); a stream batch goes out every second.
 */
export async function startServer(
  currentPool: () => Pool | undefined,
  recorder: DashboardRecorder,
  listen: ListenOptions,
): Promise<DashboardServer> {
  const token = randomBytes(24).toString("base64url");
  const tokenBytes = Buffer.from(token);
  const streams = new Set<ServerResponse>();

  const openStream = (request: IncomingMessage, response: ServerResponse, url: URL): void => {
    response.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      connection: "keep-alive",
    });
    const lastEventId = Number(
      request.headers["last-event-id"] ?? url.searchParams.get("lastEventId") ?? Number.NaN,
    );
    if (Number.isInteger(lastEventId)) {
      const missed = recorder.batchesAfter(lastEventId);
      // Older than the batches kept: the page fetches the JSON endpoints again.
      if (missed === undefined) response.write("event: reset\ndata: {}\n\n");
      else for (const batch of missed) response.write(sseMessage(batch));
    }
    streams.add(response);
    request.on("close", () => streams.delete(response));
  };

  const act = async (request: IncomingMessage, response: ServerResponse, path: string): Promise<void> => {
    if (request.method !== "POST") return sendJson(response, 405, { error: "use POST" });
    const pool = currentPool();
    if (pool === undefined) return sendJson(response, 409, { error: "the pool is still being provisioned" });
    const cancel = /^\/api\/tasks\/([^/]+)\/cancel$/.exec(path);
    if (cancel !== null) {
      const cancelled = pool.cancel(decodeURIComponent(cancel[1] as string));
      return sendJson(response, cancelled ? 200 : 404, { cancelled });
    }
    sendJson(response, 202, { closing: true });
    await pool.close();
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? "/", "http://dashboard");
    const asset = ASSETS[url.pathname];
    if (asset !== undefined && request.method === "GET") {
      const body = await readFile(asset.path());
      response.writeHead(200, { ...SECURITY_HEADERS, "content-type": asset.type });
      response.end(body);
      return;
    }
    if (!tokenMatches(tokenBytes, url.searchParams.get("token") ?? bearer(request))) {
      return sendJson(response, 401, {
        error: "this dashboard wants the token of the link it printed (?token=…)",
      });
    }
    switch (url.pathname) {
      case "/":
      case "/index.html": {
        const body = await readFile(new URL("index.html", pageDirectory));
        response.writeHead(200, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8" });
        response.end(body);
        return;
      }
      case "/api/pool":
        await recorder.sessions.refresh(0);
        return sendJson(response, 200, recorder.pool(currentPool()));
      case "/api/metrics": {
        const since = Number(url.searchParams.get("since") ?? Number.NEGATIVE_INFINITY);
        return sendJson(
          response,
          200,
          recorder.metrics(Number.isNaN(since) ? Number.NEGATIVE_INFINITY : since),
        );
      }
      case "/api/events":
        return sendJson(response, 200, recorder.events());
      case "/api/stream":
        return openStream(request, response, url);
      case "/api/close":
        return act(request, response, url.pathname);
      default:
        if (url.pathname.startsWith("/api/tasks/")) return act(request, response, url.pathname);
        return sendJson(response, 404, { error: `no such page: ${url.pathname}` });
    }
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      if (!response.headersSent) sendJson(response, 500, { error: message });
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => {
      server.off("error", reject);
      resolve();
    });
  });

  const tick = setInterval(() => {
    // Read for the next batch (every two seconds at most): a batch never waits on the disk.
    void recorder.sessions.refresh();
    const message = sseMessage(recorder.flush(currentPool()));
    for (const stream of streams) {
      if (stream.writableLength > STREAM_BACKLOG_LIMIT) {
        streams.delete(stream);
        stream.end();
      } else stream.write(message);
    }
  }, BATCH_INTERVAL_MS);
  const keepalive = setInterval(() => {
    for (const stream of streams) stream.write(": keepalive\n\n");
  }, KEEPALIVE_MS);
  // The dashboard never keeps the client's process alive on its own.
  tick.unref();
  keepalive.unref();
  server.unref();

  const port = (server.address() as AddressInfo).port;
  const shownHost = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${port}/?token=${token}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        clearInterval(tick);
        clearInterval(keepalive);
        for (const stream of streams) stream.end();
        streams.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
