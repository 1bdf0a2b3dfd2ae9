/**
 * A tiny HTTP proxy in front of moto that answers chosen EC2 calls with an AWS error instead of
 * passing them on — moto has no way to run out of spot capacity — or rewrites moto's answers.
 * Everything else reaches moto untouched. Listens on 127.0.0.1 only.
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

/**
 * Starts a proxy to `target`; `fault` decides per EC2 call (action, form parameters, the region it is
 * signed for) whether to fail
 * it, and `rewrite` may change the body of moto's answer to a call (e.g. show an instance as
 * `shutting-down`, a state moto never reports), or hold it (a promise).
 */
export async function startFaultProxy(
  target: string,
  fault: (action: string, params: URLSearchParams, region: string | undefined) => InjectedFault | undefined,
  rewrite?: (action: string, params: URLSearchParams, body: string) => string | Promise<string>,
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
      // The region the call is signed for (SigV4's credential scope: KEY/DATE/REGION/ec2/aws4_request).
      const region = /Credential=[^/]+\/\d+\/([^/]+)\//.exec(incoming.headers.authorization ?? "")?.[1];
      const injected = action ? fault(action, params, region) : undefined;
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
          if (!rewrite || !action) {
            outgoing.writeHead(response.statusCode ?? 502, response.headers);
            response.pipe(outgoing);
            return;
          }
          const answer: Buffer[] = [];
          response.on("data", (chunk: Buffer) => answer.push(chunk));
          response.on("end", async () => {
            // A promise that never settles holds the answer: a call EC2 carried out, its answer lost.
            const text = Buffer.from(await rewrite(action, params, Buffer.concat(answer).toString("utf8")));
            const {
              "content-length": _length,
              "transfer-encoding": _encoding,
              ...headers
            } = response.headers;
            outgoing.writeHead(response.statusCode ?? 502, { ...headers, "content-length": text.length });
            outgoing.end(text);
          });
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
