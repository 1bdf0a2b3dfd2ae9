/**
 * An HTTP proxy in front of moto's S3 that holds chosen requests: they are read but never answered nor
 * forwarded (a part upload stuck on a slow link). Every other request goes through unchanged.
 */
import { createServer, request as forward, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/** A running proxy. */
export interface StallProxy {
  /** `http://127.0.0.1:PORT`. */
  readonly endpoint: string;
  /** Resolves when the first held request has arrived. */
  readonly firstHeld: Promise<void>;
  /** The held requests, as `METHOD url`. */
  readonly held: readonly string[];
  /** Closes the proxy and every connection it still holds. */
  close(): Promise<void>;
}

/** Starts a proxy to `target` (`http://HOST:PORT`) holding the requests `hold` picks. */
export async function startStallProxy(
  target: string,
  hold: (request: IncomingMessage) => boolean,
): Promise<StallProxy> {
  const upstream = new URL(target);
  const held: string[] = [];
  let arrived: () => void = () => undefined;
  const firstHeld = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer((incoming, answer) => {
    if (hold(incoming)) {
      held.push(`${incoming.method} ${incoming.url}`);
      incoming.resume();
      arrived();
      return;
    }
    const outgoing = forward(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (response) => {
        answer.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(answer);
      },
    );
    outgoing.on("error", () => answer.destroy());
    incoming.pipe(outgoing);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    firstHeld,
    held,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
