/**
 * A fake of AWS's instance metadata service, version 2 — only what Skyward's interruption-notice
 * poller reads — so tests can deliver a spot interruption notice or a rebalance recommendation to a
 * node. It serves several instances at once, each under its own path prefix (`/<instance id>`), so
 * one server answers every node of a pool; `endpointFor(id)` is what the node is told to poll.
 *
 * The shapes come from AWS's documentation:
 * - session tokens: `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1–21600)
 *   answers the token as text; later requests carry it in `X-aws-ec2-metadata-token`, and without a
 *   valid one are answered 401 —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html
 * - `GET /latest/meta-data/spot/instance-action`: 404 until an interruption is scheduled, then
 *   `{"action": "terminate", "time": "2017-09-18T08:22:00Z"}` —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
 * - `GET /latest/meta-data/events/recommendations/rebalance`: 404 until EC2 recommends
 *   rebalancing, then `{"noticeTime": "2020-11-05T08:22:00Z"}` —
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the fake answered. */
export interface FakeImdsRequest {
  readonly method: string;
  /** The path without the instance prefix (`/latest/meta-data/spot/instance-action`). */
  readonly path: string;
  /** The instance whose prefix it used. */
  readonly instanceId: string;
  readonly status: number;
}

/** A running fake IMDS. */
export interface FakeImds extends AsyncDisposable {
  /** `http://host:port`. */
  readonly url: string;
  /** The endpoint a node of instance `id` polls: `http://host:port/<id>`. */
  endpointFor(id: string): string;
  /** Schedules a spot interruption of instance `id` (`action` default `"terminate"`, two minutes from now). */
  interrupt(id: string, options?: { action?: "terminate" | "stop" | "hibernate"; time?: Date }): void;
  /** Posts a rebalance recommendation for instance `id`. */
  recommendRebalance(id: string, time?: Date): void;
  /** Every request answered, in order. */
  readonly requests: readonly FakeImdsRequest[];
  close(): Promise<void>;
}

/** Options of {@link startFakeImds}. */
export interface FakeImdsOptions {
  /** The address to listen on: loopback (default), or a test bed's bridge address for its hosts. */
  readonly host?: string;
}

function isoSeconds(time: Date): string {
  return `${time.toISOString().slice(0, 19)}Z`;
}

/** Starts a fake IMDSv2 server. */
export async function startFakeImds(options: FakeImdsOptions = {}): Promise<FakeImds> {
  const tokens = new Set<string>();
  const actions = new Map<string, { action: string; time: string }>();
  const rebalances = new Map<string, { noticeTime: string }>();
  const requests: FakeImdsRequest[] = [];

  const answer = (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://imds");
    const [, instanceId = "", ...rest] = url.pathname.split("/");
    const path = `/${rest.join("/")}`;
    const reply = (status: number, body = "", type = "text/plain") => {
      requests.push({ method: request.method ?? "", path, instanceId, status });
      response.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
      response.end(body);
    };
    if (request.method === "PUT" && path === "/latest/api/token") {
      const ttl = Number(request.headers["x-aws-ec2-metadata-token-ttl-seconds"]);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600) return reply(400);
      const token = randomBytes(16).toString("base64url");
      tokens.add(token);
      return reply(200, token);
    }
    if (request.method !== "GET") return reply(405);
    const token = request.headers["x-aws-ec2-metadata-token"];
    if (typeof token !== "string" || !tokens.has(token)) return reply(401);
    if (path === "/latest/meta-data/spot/instance-action") {
      const action = actions.get(instanceId);
      return action ? reply(200, JSON.stringify(action), "application/json") : reply(404);
    }
    if (path === "/latest/meta-data/events/recommendations/rebalance") {
      const rebalance = rebalances.get(instanceId);
      return rebalance ? reply(200, JSON.stringify(rebalance), "application/json") : reply(404);
    }
    return reply(404);
  };

  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => answer(request, response));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.address}:${address.port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return {
    url,
    endpointFor: (id) => `${url}/${id}`,
    interrupt(id, { action = "terminate", time = new Date(Date.now() + 120_000) } = {}) {
      actions.set(id, { action, time: isoSeconds(time) });
    },
    recommendRebalance(id, time = new Date()) {
      rebalances.set(id, { noticeTime: isoSeconds(time) });
    },
    requests,
    close,
    [Symbol.asyncDispose]: close,
  };
}
