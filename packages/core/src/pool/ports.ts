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
 * A loopback port free now, and the one above it too: the plugins' rendezvous use the head port
 * (torch, accelerate) and the one above it (JAX's coordinator). Either can still be taken before
 * they listen, but an ephemeral port in use next to a free one no longer fails JAX's start.
 */
export async function freeLoopbackPort(): Promise<number> {
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
