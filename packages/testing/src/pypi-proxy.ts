/**
 * A way out to PyPI for the test bed's hosts, which have no route to the internet: an HTTP
 * `CONNECT` proxy, listening on the test bed's bridge address, that opens tunnels to PyPI's two
 * HTTPS endpoints and to nothing else. pip (and uv) reach it through the standard proxy variables,
 * which a pool hands to its hosts through the image's `env`:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { SSH } from "@skyward/provider-ssh";
 * import { createPypiProxy, createTestbed, testbedSshHosts } from "@skyward/testing";
 *
 * await using bed = await createTestbed({ hosts: 2 });
 * await using proxy = await createPypiProxy({ testbed: bed });
 * await using pool = await sky.compute({
 *   provider: SSH({ hosts: testbedSshHosts(bed) }),
 *   image: { pip: ["jax"], env: proxy.env },
 * });
 * ```
 *
 * TLS stays end to end (the proxy only relays bytes), so pip verifies PyPI's certificate as it would
 * without a proxy.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Testbed } from "./testbed.js";

/** The `host:port` endpoints pip needs from PyPI: the index and the file host, HTTPS only. */
export const PYPI_ENDPOINTS: readonly string[] = Object.freeze([
  "pypi.org:443",
  "files.pythonhosted.org:443",
]);

/** One request the proxy answered. */
export interface PypiProxyRequest {
  /** `CONNECT`, or the method of a plain HTTP request (always refused). */
  readonly method: string;
  /** The target as the client asked for it: `host:port` for `CONNECT`, the URL otherwise. */
  readonly target: string;
  /** Whether a tunnel was opened (the target is allowed). */
  readonly allowed: boolean;
}

/** Options of {@link createPypiProxy}. */
export interface PypiProxyOptions {
  /**
   * The test bed whose hosts use the proxy: it listens on the bed's bridge address, and its
   * {@link PypiProxy.env} exempts the bed's hosts and subnet from the proxy (`NO_PROXY`). Either this
   * or `address`.
   */
  readonly testbed?: Pick<Testbed, "bridgeAddress" | "subnet" | "hosts">;
  /** The address to listen on when no `testbed` is given (`127.0.0.1` for a proxy on this machine). */
  readonly address?: string;
  /** The port (default 0: any free one). */
  readonly port?: number;
  /**
   * The `host:port` targets tunnels may be opened to, compared case-insensitively. Default
   * {@link PYPI_ENDPOINTS}. Everything else gets `403 Forbidden`.
   */
  readonly allow?: readonly string[];
  /** Deadline, in milliseconds, for connecting to an allowed target (default 30 s); past it the client gets `504`. */
  readonly connectTimeoutMs?: number;
}

/** A running proxy. Dispose it (`await using`) or call {@link PypiProxy.close}. */
export interface PypiProxy extends AsyncDisposable {
  /** `http://<address>:<port>`: the value of `HTTPS_PROXY`. */
  readonly url: string;
  /** The address it listens on. */
  readonly address: string;
  /** The port it listens on. */
  readonly port: number;
  /**
   * The environment that sends pip through the proxy: `HTTPS_PROXY` and `https_proxy` (pip, uv and
   * most HTTP clients read one or the other), and `NO_PROXY` / `no_proxy` naming loopback and, with
   * a test bed, its hosts and subnet, so traffic between the hosts (gRPC, which also honours
   * `https_proxy`, e.g. JAX's coordinator) stays direct. Put it in the image's `env`.
   */
  readonly env: Readonly<Record<string, string>>;
  /** Every request answered so far, in order. */
  readonly requests: readonly PypiProxyRequest[];
  /** Stops listening and cuts every open tunnel. Idempotent. */
  close(): Promise<void>;
}

function normalizeTarget(target: string): string {
  return target.trim().toLowerCase();
}

/** `host:port` of a CONNECT request target, or undefined when it is not one (ports 1–65535). */
function parseConnectTarget(target: string): { host: string; port: number } | undefined {
  const match = /^([a-z0-9.-]+):(\d{1,5})$/i.exec(target.trim());
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65_535) return undefined;
  return { host: match[1] as string, port };
}

function refuse(socket: Duplex, status: string, reason: string): void {
  const body = `${reason}\n`;
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Starts an HTTP `CONNECT` proxy that tunnels to the `allow`ed `host:port` targets only (default:
 * PyPI's index and file host on 443). Any other `CONNECT` target, and every plain HTTP request,
 * gets `403 Forbidden`; an allowed target that cannot be reached gets `502` (`504` past
 * `connectTimeoutMs`). Targets are resolved and connected to from this machine's network, so the
 * test bed's hosts reach PyPI without a route of their own.
 *
 * @throws {Error} when neither `testbed` nor `address` is given, or the address cannot be listened on.
 */
export async function createPypiProxy(options: PypiProxyOptions): Promise<PypiProxy> {
  const address = options.testbed?.bridgeAddress ?? options.address;
  if (address === undefined || address === "") {
    throw new Error("createPypiProxy: give a testbed (its bridge address is listened on) or an address");
  }
  const allowed = new Set((options.allow ?? PYPI_ENDPOINTS).map(normalizeTarget));
  const connectTimeoutMs = options.connectTimeoutMs ?? 30_000;
  const requests: PypiProxyRequest[] = [];
  const sockets = new Set<Duplex>();

  const server: Server = createServer((request, response) => {
    requests.push({ method: request.method ?? "", target: request.url ?? "", allowed: false });
    response.writeHead(403, { "content-type": "text/plain", connection: "close" });
    response.end("this proxy only opens CONNECT tunnels to PyPI\n");
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("connect", (request: IncomingMessage, client: Duplex, head: Buffer) => {
    const target = request.url ?? "";
    const parsed = parseConnectTarget(target);
    const ok = parsed !== undefined && allowed.has(normalizeTarget(target));
    requests.push({ method: "CONNECT", target, allowed: ok });
    client.on("error", () => client.destroy());
    if (!ok || parsed === undefined) {
      refuse(client, "403 Forbidden", `this proxy does not open tunnels to ${target}`);
      return;
    }
    const upstream = connect({ host: parsed.host, port: parsed.port });
    let tunnel = false;
    const timer = setTimeout(() => {
      refuse(client, "504 Gateway Timeout", `no connection to ${target} within ${connectTimeoutMs} ms`);
      upstream.destroy();
    }, connectTimeoutMs);
    sockets.add(upstream);
    upstream.on("error", (error) => {
      clearTimeout(timer);
      if (!tunnel) refuse(client, "502 Bad Gateway", `cannot reach ${target}: ${error.message}`);
    });
    upstream.once("close", () => {
      sockets.delete(upstream);
      // Before the tunnel is open the client has its answer (502, 504) and ends by itself.
      if (tunnel) client.destroy();
    });
    client.once("close", () => upstream.destroy());
    upstream.once("connect", () => {
      clearTimeout(timer);
      tunnel = true;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, address, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === "object" && bound !== null ? bound.port : 0;
  const host = address.includes(":") ? `[${address}]` : address;
  const url = `http://${host}:${port}`;
  const direct = ["localhost", "127.0.0.1", "::1"];
  if (options.testbed) {
    direct.push(...options.testbed.hosts.map((entry) => entry.host), options.testbed.subnet);
  }
  const noProxy = direct.join(",");
  const env = Object.freeze({ HTTPS_PROXY: url, https_proxy: url, NO_PROXY: noProxy, no_proxy: noProxy });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    });
    return closing;
  };
  return {
    url,
    address,
    port,
    env,
    requests,
    close,
    [Symbol.asyncDispose]: close,
  };
}
