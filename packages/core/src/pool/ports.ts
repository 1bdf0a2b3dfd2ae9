/**
 * Loopback ports for pools whose nodes share this machine: the head's coordination services need a
 * free port on 127.0.0.1 (and the one above it).
 */
import { createServer } from "node:net";

/** Whether `port` on loopback can be listened on now. */
function loopbackPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * Where the head port is looked for first: below Linux's default ephemeral range (32768–60999), so
 * no outgoing connection and no service bound to port 0 (gloo's pairs, a port-forward) takes it, or
 * the one above it, between this check and the plugins' listen.
 */
const QUIET_PORTS = { first: 20_000, count: 12_000 } as const;

/**
 * A loopback port free now, and the one above it too: the plugins' rendezvous use the head port
 * (torch, accelerate) and the one above it (JAX's coordinator). Either can still be taken before
 * they listen; a random pair below the ephemeral range makes that unlikely, and an ephemeral port
 * (with a free one above it) is the fallback.
 */
export async function freeLoopbackPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const port = QUIET_PORTS.first + Math.floor(Math.random() * QUIET_PORTS.count);
    if ((await loopbackPortFree(port)) && (await loopbackPortFree(port + 1))) return port;
  }
  for (let attempt = 0; ; attempt += 1) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        const found = typeof address === "object" && address ? address.port : 0;
        server.close(() => resolve(found));
      });
    });
    if (port < 65_535 && ((await loopbackPortFree(port + 1)) || attempt >= 20)) return port;
  }
}
