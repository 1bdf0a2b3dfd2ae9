/**
 * A tiny HTTP proxy in front of moto that answers chosen EC2 calls with an AWS error instead of
 * passing them on — moto has no way to run out of spot capacity. Everything else reaches moto
 * untouched. Listens on 127.0.0.1 only.
 */
import { createServer, request as httpRequest, type Server } from "node:http";

/** An EC2 error to answer with. */
export interface InjectedFault {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

/** A running proxy. */
export interface FaultProxy {
  /** The endpoint to give the provider. */
  readonly endpoint: string;
  /** Every EC2 action seen, in order, with its form parameters. */
  readonly calls: { action: string; params: URLSearchParams }[];
  /** Stops the proxy. */
  close(): Promise<void>;
}

/** Starts a proxy to `target`; `fault` decides per EC2 call (action and form parameters) whether to fail it. */
export async function startFaultProxy(
  target: string,
  fault: (action: string, params: URLSearchParams) => InjectedFault | undefined,
): Promise<FaultProxy> {
  const upstream = new URL(target);
  const calls: FaultProxy["calls"] = [];
  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      const params = new URLSearchParams(body.toString("utf8"));
      const action = params.get("Action") ?? "";
      if (action) calls.push({ action, params });
      const injected = action ? fault(action, params) : undefined;
      if (injected) {
        outgoing.writeHead(injected.status, { "content-type": "text/xml" });
        outgoing.end(
          `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${injected.code}</Code>` +
            `<Message>${injected.message}</Message></Error></Errors><RequestID>injected-fault</RequestID></Response>`,
        );
        return;
      }
      const forwarded = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: incoming.method,
          path: incoming.url,
          headers: { ...incoming.headers, host: upstream.host },
        },
        (response) => {
          outgoing.writeHead(response.statusCode ?? 502, response.headers);
          response.pipe(outgoing);
        },
      );
      forwarded.on("error", (error) => {
        outgoing.writeHead(502);
        outgoing.end(String(error));
      });
      forwarded.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
